package main

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/review"
)

// newReviewer builds the stage engine: one router shared by every job (its
// gates, cooldowns and breakers only work when shared) and the stage runner
// over it. Their metrics go on reg and the inference logs to events.
// stop ends the router's background work and closes its fleet store.
func newReviewer(cfg Config, events pipeline.EventSink, reg prometheus.Registerer, log *slog.Logger) (rv pipeline.Reviewer, stop func(), err error) {
	rc := cfg.capacityRouter(cfg.router())
	closeStore := newFleetStore(cfg, &rc)
	router, err := llm.New(rc, reg)
	if err != nil {
		closeStore()
		return nil, nil, fmt.Errorf("router: %w", err)
	}
	stopRouter := runRouter(router)
	stop = func() {
		stopRouter()
		closeStore()
	}
	rev, err := review.New(review.Config{Class: llm.ClassBatch}, router, events, reg)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("reviewer: %w", err)
	}
	prim, fb := router.Models()
	log.Info("worker: stage engine ready", "primary_model", prim, "fallback_model", fb, "pipeline_version", rev.PipelineVersion())
	return rev, stop, nil
}
