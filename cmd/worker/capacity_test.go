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
	c.LLM.Primary.BaseURL, c.LLM.Primary.Model = "http://vllm:8000/v1", "m"
	c.DevInsecureKeys = true
	return c
}

func TestCapacityFlagsValidate(t *testing.T) {
	c := validCapacityConfig()
	require.NoError(t, c.Validate())

	c.LLM.Fleet.PrimaryLimit = 64
	require.ErrorContains(t, c.Validate(), "--fleet-* limits need --redis-addr")
	c.RedisAddr = "127.0.0.1:6379"
	require.NoError(t, c.Validate())
	c.LLM.Fleet.PrimaryReserved = 64
	require.ErrorContains(t, c.Validate(), "--fleet-primary-reserved")
	c.LLM.Fleet.PrimaryReserved = 8
	c.LLM.Primary.ReservedInteractive = c.LLM.Primary.MaxConcurrency
	require.ErrorContains(t, c.Validate(), "--primary-reserved-interactive")
}

func TestCapacityReachesTheRouter(t *testing.T) {
	c := validCapacityConfig()
	c.RedisAddr = "127.0.0.1:1" // nothing listens: the router starts on its static share
	fs := c.flags()
	require.NoError(t, fs.Parse([]string{"--primary-reserved-interactive=2", "--primary-adaptive", "--primary-adaptive-min=3",
		"--primary-metrics-url=http://vllm:8000/metrics", "--fleet-primary-limit=64", "--fleet-primary-reserved=8",
		"--fleet-fallback-rpm=600", "--fleet-replicas=4", "--fleet-key-prefix=cg:fleet:"}, func(string) string { return "" }))
	require.NoError(t, c.Validate())
	rc := c.Pools.Router()
	require.Equal(t, 2, rc.Primary.ReservedInteractive)
	require.Equal(t, llm.AdaptiveConfig{Enabled: true, Min: 3, MetricsURL: "http://vllm:8000/metrics"}, rc.Primary.Adaptive)
	require.Equal(t, 64, rc.Fleet.PrimaryLimit)
	require.Equal(t, 600, rc.Fleet.FallbackRPM)
	require.Equal(t, 4, rc.Fleet.Replicas)
	require.Equal(t, "cg:fleet:", rc.Fleet.Name, "the key prefix as given; llm drops the colon")
	eng, err := newReviewer(c, nil, nil, nil, noStore)
	require.NoError(t, err)
	eng.Close()
}
