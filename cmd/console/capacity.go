package main

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/storage/redislimits"
)

// FleetConfig makes the console's interactive calls take the primary's
// fleet-wide leases (docs/architecture.md, "Fleet capacity") with the workers' limit, so
// the leases the workers' batch calls leave free (--fleet-primary-reserved)
// are the moderators'. The values must match the workers'.
type FleetConfig struct {
	FleetPrimaryLimit    int
	FleetPrimaryReserved int
	FleetReplicas        int
	FleetKeyPrefix       string
}

func defaultFleet() FleetConfig {
	return FleetConfig{FleetReplicas: 1, FleetKeyPrefix: "chatguard:fleet:"}
}

func (f *FleetConfig) flags(fs *cli.FlagSet) {
	fs.IntVar(&f.FleetPrimaryLimit, "fleet-primary-limit", "the workers' --fleet-primary-limit: primary calls in flight across every replica (Redis leases); 0: none")
	fs.IntVar(&f.FleetPrimaryReserved, "fleet-primary-reserved", "the workers' --fleet-primary-reserved: leases batch calls leave to on-demand reviews")
	fs.IntVar(&f.FleetReplicas, "fleet-replicas", "replicas the fleet limit is divided by while Redis is unreachable")
	fs.StringVar(&f.FleetKeyPrefix, "fleet-key-prefix", "the workers' --fleet-key-prefix")
}

func (f FleetConfig) validate() error {
	if f.FleetPrimaryLimit < 0 || f.FleetPrimaryReserved < 0 || (f.FleetPrimaryLimit > 0 && f.FleetPrimaryReserved >= f.FleetPrimaryLimit) || f.FleetReplicas < 1 {
		return errors.New("--fleet-primary-reserved must be in 0..--fleet-primary-limit-1, --fleet-replicas at least 1")
	}
	return nil
}

// withFleet adds the fleet leases to the router's configuration when a
// limit is set.
func (f FleetConfig) withFleet(rc llm.Config, rdb redis.UniversalClient) llm.Config {
	if f.FleetPrimaryLimit > 0 {
		store := redislimits.New(rdb, "")
		rc.Fleet = llm.FleetConfig{Leases: store, Name: strings.TrimSuffix(f.FleetKeyPrefix, ":"),
			PrimaryLimit: f.FleetPrimaryLimit, PrimaryReserved: f.FleetPrimaryReserved, Replicas: f.FleetReplicas}
	}
	return rc
}

// runRouter runs the router's background work (lease renewal) until the
// returned stop is called; stop waits for it to end.
func runRouter(r *llm.Router) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
