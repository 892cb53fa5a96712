package main

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline/llm"
)

func TestFleetLeasesReachTheConsoleRouter(t *testing.T) {
	f := defaultFleet()
	require.NoError(t, f.validate())
	rc := llm.Config{Primary: llm.PoolConfig{BaseURL: "http://vllm:8000/v1", Model: "m"}}
	require.Nil(t, f.withFleet(rc, nil).Fleet.Leases, "no limit, no leases")

	f.FleetPrimaryLimit, f.FleetPrimaryReserved, f.FleetKeyPrefix = 64, 64, "cg:fleet:"
	require.Error(t, f.validate())
	f.FleetPrimaryReserved = 4
	require.NoError(t, f.validate())
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled here
	defer rdb.Close()
	got := f.withFleet(rc, rdb)
	require.NotNil(t, got.Fleet.Leases)
	require.Equal(t, "cg:fleet", got.Fleet.Name)
	require.Equal(t, 64, got.Fleet.PrimaryLimit)
	require.Equal(t, 4, got.Fleet.PrimaryReserved)
	_, err := llm.New(got, nil)
	require.NoError(t, err)
}
