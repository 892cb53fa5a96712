package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/sqsjob"
)

// FaultConfig is the worker's settings for surviving faults: the
// cross-pod review claim. It is embedded in Config.
type FaultConfig struct {
	// ClaimTTL is how long a review's claim lasts without renewal: how long
	// a worker killed mid-review blocks a duplicate delivery of it.
	ClaimTTL time.Duration
	// ClaimPoll is how often a duplicate delivery looks again for the
	// holder's verdict or the claim's expiry.
	ClaimPoll time.Duration
}

func defaultFaultConfig() FaultConfig {
	return FaultConfig{ClaimTTL: sqsjob.DefaultClaimTTL, ClaimPoll: sqsjob.DefaultClaimPoll}
}

func (c *Config) faultFlags(fs *cli.FlagSet) {
	fs.DurationVar(&c.ClaimTTL, "claim-ttl", "lifetime of a review's MySQL claim, renewed every third of it; a dead worker's claim is taken over after it")
	fs.DurationVar(&c.ClaimPoll, "claim-poll", "how often a duplicate delivery of a review claimed elsewhere looks for its verdict again")
}

func (c Config) validateFaults() error {
	var errs []error
	if c.ClaimTTL < 3*time.Second || c.ClaimTTL >= c.JobTimeout {
		errs = append(errs, fmt.Errorf("--claim-ttl %s must be at least 3s and below --job-timeout %s", c.ClaimTTL, c.JobTimeout))
	}
	if c.ClaimPoll <= 0 || c.ClaimPoll > c.ClaimTTL {
		errs = append(errs, fmt.Errorf("--claim-poll %s must be positive and at most --claim-ttl", c.ClaimPoll))
	}
	return errors.Join(errs...)
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
