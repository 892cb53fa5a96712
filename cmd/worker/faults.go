package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/health"
)

// faultFlags binds the settings for surviving faults to their parts'
// fields: the cross-pod review claim (the review job's) and the
// dependencies' breakers (health.Config). The longest hold is the job
// loop's (--max-hold).
func (c *Config) faultFlags(fs *cli.FlagSet) {
	fs.DurationVar(&c.Review.ClaimTTL, "claim-ttl", "lifetime of a review's MySQL claim, renewed every third of it; a dead worker's claim is taken over after it")
	fs.DurationVar(&c.Review.ClaimPoll, "claim-poll", "how often a duplicate delivery of a review claimed elsewhere looks for its verdict again")
	fs.IntVar(&c.Health.Failures, "breaker-failures", "consecutive failures of a dependency (MySQL, chat API, both model pools) that mark it down: polling pauses and failed jobs are held")
	fs.DurationVar(&c.Health.OpenFor, "breaker-open-for", "how long a dependency marked down waits before one probe call")
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
