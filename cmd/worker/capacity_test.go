package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline/llm"
)

func validCapacityConfig() Config {
	c := DefaultConfig()
	c.ReviewQueueURL, c.ReviewDLQURL, c.FeedbackQueueURL = "http://q/r", "http://q/d", "http://q/f"
	c.MySQLDSN, c.ChatAPIURL = "root@tcp(127.0.0.1:3306)/x", "http://chat"
	c.PrimaryBaseURL, c.PrimaryModel = "http://vllm:8000/v1", "m"
	return c
}

func TestCapacityFlagsValidate(t *testing.T) {
	c := validCapacityConfig()
	require.NoError(t, c.Validate())

	c.Capacity.FleetPrimaryLimit = 64
	require.ErrorContains(t, c.Validate(), "--fleet-* limits need --redis-addr")
	c.RedisAddr = "127.0.0.1:6379"
	require.NoError(t, c.Validate())
	c.Capacity.FleetPrimaryReserved = 64
	require.ErrorContains(t, c.Validate(), "--fleet-primary-reserved")
	c.Capacity.FleetPrimaryReserved = 8
	c.Capacity.PrimaryReservedInteractive = c.PrimaryConcurrency
	require.ErrorContains(t, c.Validate(), "--primary-reserved-interactive")
}

func TestCapacityReachesTheRouter(t *testing.T) {
	c := validCapacityConfig()
	c.RedisAddr = "127.0.0.1:1" // nothing listens: the router starts on its static share
	c.Capacity = CapacityConfig{PrimaryReservedInteractive: 2, PrimaryAdaptive: true, PrimaryAdaptiveMin: 3,
		PrimaryMetricsURL: "http://vllm:8000/metrics", FleetPrimaryLimit: 64, FleetPrimaryReserved: 8,
		FleetFallbackRPM: 600, FleetReplicas: 4, FleetKeyPrefix: "cg:fleet:"}
	require.NoError(t, c.Validate())
	rc := c.capacityRouter(c.router())
	closeStore, err := newFleetStore(c, &rc)
	require.NoError(t, err)
	defer closeStore()
	require.Equal(t, 2, rc.Primary.ReservedInteractive)
	require.Equal(t, llm.AdaptiveConfig{Enabled: true, Min: 3, MetricsURL: "http://vllm:8000/metrics"}, rc.Primary.Adaptive)
	require.Equal(t, 64, rc.Fleet.PrimaryLimit)
	require.Equal(t, "cg:fleet", rc.Fleet.Name)
	require.NotNil(t, rc.Fleet.Leases)
	_, err = llm.New(rc, nil)
	require.NoError(t, err)
}
