package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/cmd/internal/reviewers"
	"github.com/chatguard/chatguard/pipeline"
)

// engineParams are the stage engine's parameters: the interactive class (a
// moderator is waiting: refused at once when the pools are full, never
// queued behind batch work, and allowed the reserved leases) on top of
// what every reviewing binary shares with the workers.
func (c Config) engineParams(events pipeline.EventSink, reg prometheus.Registerer, log *slog.Logger, history func() pipeline.AccountHistory) reviewers.Params {
	return reviewers.Params{Component: "console", Class: pipeline.ClassInteractive, Pools: c.Pools, Options: c.Options, Redis: c.RedisOptions,
		Events: events, Registerer: reg, Log: log, History: history}
}

// newReviewer builds the stage engine (reviewers.New); Close on the engine
// ends the router's background work and closes its fleet store. history
// returns the verdict store once it is open (nil before): the account
// history is read from it.
func newReviewer(cfg Config, events pipeline.EventSink, reg prometheus.Registerer, log *slog.Logger, history func() pipeline.AccountHistory) (*reviewers.Engine, error) {
	return reviewers.New(cfg.engineParams(events, reg, log, history))
}
