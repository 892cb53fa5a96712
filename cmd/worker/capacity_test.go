package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline/llm"
)

func validCapacityConfig() Config {
	c := DefaultConfig()
	c.ReviewQueue.URL, c.ReviewDLQ.URL, c.Events.URL = "http://q/r", "http://q/d", "http://q/f"
	c.MySQL.DSN, c.Chat.BaseURL = "root@tcp(127.0.0.1:3306)/x", "http://chat"
	c.PrimaryBaseURL, c.PrimaryModel = "http://vllm:8000/v1", "m"
	return c
}

func TestCapacityFlagsValidate(t *testing.T) {
	c := validCapacityConfig()
	require.NoError(t, c.Validate())

	c.FleetPrimaryLimit = 64
	require.ErrorContains(t, c.Validate(), "--fleet-* limits need --redis-addr")
	c.RedisAddr = "127.0.0.1:6379"
	require.NoError(t, c.Validate())
	c.FleetPrimaryReserved = 64
	require.ErrorContains(t, c.Validate(), "--fleet-primary-reserved")
	c.FleetPrimaryReserved = 8
	c.Capacity.PrimaryReservedInteractive = c.PrimaryConcurrency
	require.ErrorContains(t, c.Validate(), "--primary-reserved-interactive")
}

func TestCapacityReachesTheRouter(t *testing.T) {
	c := validCapacityConfig()
	c.RedisAddr = "127.0.0.1:1" // nothing listens: the router starts on its static share
	c.Capacity = CapacityConfig{PrimaryReservedInteractive: 2, PrimaryAdaptive: true, PrimaryAdaptiveMin: 3,
		PrimaryMetricsURL: "http://vllm:8000/metrics"}
	c.FleetPrimaryLimit, c.FleetPrimaryReserved, c.FleetFallbackRPM, c.FleetReplicas, c.FleetKeyPrefix = 64, 8, 600, 4, "cg:fleet:"
	require.NoError(t, c.Validate())
	var rc llm.Config
	c.capacity(&rc)
	require.Equal(t, 2, rc.Primary.ReservedInteractive)
	require.Equal(t, llm.AdaptiveConfig{Enabled: true, Min: 3, MetricsURL: "http://vllm:8000/metrics"}, rc.Primary.Adaptive)
	rc = c.Options.Router(c.Pools.Router(), nil)
	require.Equal(t, 64, rc.Fleet.PrimaryLimit)
	require.Equal(t, 600, rc.Fleet.FallbackRPM)
	require.Equal(t, "cg:fleet", rc.Fleet.Name)
	eng, err := newReviewer(c, nil, nil, nil)
	require.NoError(t, err)
	eng.Close()
}
