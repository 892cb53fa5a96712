package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/cmd/internal/reviewers"
	"github.com/chatguard/chatguard/pipeline"
)

// engineParams are the stage engine's parameters: the batch class (queue
// work waits for a slot and leaves the interactive reserve alone) and this
// process's capacity settings on top of what every reviewing binary shares.
func (c Config) engineParams(events pipeline.EventSink, reg prometheus.Registerer, log *slog.Logger, history func() pipeline.AccountHistory) reviewers.Params {
	return reviewers.Params{Component: "worker", Class: pipeline.ClassBatch, Pools: c.Pools, Options: c.Options, Redis: c.RedisOptions,
		Events: events, Registerer: reg, Log: log, History: history}
}

// newReviewer builds the stage engine (reviewers.New); Close on the engine
// ends the router's background work and closes its fleet store. history
// returns the verdict store once it is open (nil before): the account
// history is read from it.
func newReviewer(cfg Config, events pipeline.EventSink, reg prometheus.Registerer, log *slog.Logger, history func() pipeline.AccountHistory) (*reviewers.Engine, error) {
	return reviewers.New(cfg.engineParams(events, reg, log, history))
}
