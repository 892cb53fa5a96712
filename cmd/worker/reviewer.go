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
	closeStore, err := newFleetStore(cfg, &rc)
	if err != nil {
		return nil, nil, err
	}
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
	gate, err := cfg.imageGate()
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("images: %w", err)
	}
	if cfg.QuoteDigestKey == "" {
		log.Warn("worker: --quote-digest-key is empty: quote digests use the DEV-ONLY key (labelled hmac-dev); set CHATGUARD_QUOTE_DIGEST_KEY from a Secret in production")
	}
	rev, err := review.New(review.Config{Class: llm.ClassBatch, DigestKey: []byte(cfg.QuoteDigestKey), Images: gate}, router, events, reg)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("reviewer: %w", err)
	}
	prim, fb := router.Models()
	log.Info("worker: stage engine ready", "primary_model", prim, "fallback_model", fb, "pipeline_version", rev.PipelineVersion(),
		"image_hosts", cfg.ImageHosts, "image_inline", cfg.ImageInline, "fallback_pseudonymize", cfg.FallbackPseudonymize)
	return rev, stop, nil
}
