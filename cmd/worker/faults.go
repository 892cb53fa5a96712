package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/health"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// FaultConfig is the worker's settings for surviving faults: the
// cross-pod review claim and the dependencies' breakers (the longest hold
// is the job loop's, jobloop.Config.MaxHold). It is embedded in Config.
type FaultConfig struct {
	// ClaimTTL is how long a review's claim lasts without renewal: how long
	// a worker killed mid-review blocks a duplicate delivery of it.
	ClaimTTL time.Duration
	// ClaimPoll is how often a duplicate delivery looks again for the
	// holder's verdict or the claim's expiry.
	ClaimPoll time.Duration
	// BreakerFailures consecutive failures of a dependency open its
	// breaker; BreakerOpenFor later one probe is let through.
	BreakerFailures int
	BreakerOpenFor  time.Duration
}

func defaultFaultConfig() FaultConfig {
	hc := health.DefaultConfig()
	return FaultConfig{ClaimTTL: jobloop.DefaultClaimTTL, ClaimPoll: jobloop.DefaultClaimPoll,
		BreakerFailures: hc.Failures, BreakerOpenFor: hc.OpenFor}
}

func (c Config) health() health.Config {
	return health.Config{Failures: c.BreakerFailures, OpenFor: c.BreakerOpenFor}
}

func (c *Config) faultFlags(fs *cli.FlagSet) {
	fs.DurationVar(&c.ClaimTTL, "claim-ttl", "lifetime of a review's MySQL claim, renewed every third of it; a dead worker's claim is taken over after it")
	fs.DurationVar(&c.ClaimPoll, "claim-poll", "how often a duplicate delivery of a review claimed elsewhere looks for its verdict again")
	fs.IntVar(&c.BreakerFailures, "breaker-failures", "consecutive failures of a dependency (MySQL, chat API, both model pools) that mark it down: polling pauses and failed jobs are held")
	fs.DurationVar(&c.BreakerOpenFor, "breaker-open-for", "how long a dependency marked down waits before one probe call")
}

func (c Config) validateFaults() error {
	var errs []error
	if c.ClaimTTL < 3*time.Second {
		errs = append(errs, fmt.Errorf("--claim-ttl %s must be at least 3s", c.ClaimTTL))
	}
	if c.ClaimPoll <= 0 || c.ClaimPoll > c.ClaimTTL {
		errs = append(errs, fmt.Errorf("--claim-poll %s must be positive and at most --claim-ttl", c.ClaimPoll))
	}
	return errors.Join(append(errs, c.health().Validate())...)
}

// readiness is /readyz's check: not ready while a dependency's breaker is
// open or probing (named in the answer), or while MySQL does not answer.
type readiness struct {
	db     interface{ Ping(context.Context) error }
	health *health.Monitor
}

func (r readiness) Ping(ctx context.Context) error {
	if down := r.health.Down(); len(down) > 0 {
		names := make([]string, len(down))
		for i, d := range down {
			names[i] = string(d)
		}
		return fmt.Errorf("dependency down: %s", strings.Join(names, ","))
	}
	if err := r.db.Ping(ctx); err != nil {
		return errors.New("mysql unreachable")
	}
	return nil
}

// claimOwner names this process in review claims: host, pid and a random
// suffix, so that a restarted pod with the same name and pid is another
// owner.
func claimOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", pipeline.ClipRunes(host, 100), os.Getpid(), hex.EncodeToString(b[:]))
}
