package reviewers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/accounthistory"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/review"
	"github.com/chatguard/chatguard/storage/imagecdn"
	"github.com/chatguard/chatguard/storage/rediscampaign"
	"github.com/chatguard/chatguard/storage/redislimits"
)

// FleetStore holds the fleet-wide leases and budgets (storage/redislimits).
type FleetStore interface {
	pipeline.LeaseSemaphore
	pipeline.RateBudget
}

var _ FleetStore = (*redislimits.Limits)(nil)

// Params are what a binary hands New.
type Params struct {
	// Component names the binary in its log lines ("worker", "console").
	Component string
	// Class is the router class of every call the reviewer makes: the one
	// setting that differs between binaries.
	Class pipeline.Class
	// Pools are the router's configuration (depflags.Pools' flags: the
	// pools, their prices and pseudonymisation, the fleet limits), with
	// whatever else the binary binds to them (the worker's capacity).
	Pools depflags.Pools
	// Options are the image gate and the quote-digest key.
	Options Options
	// Redis is where the fleet limits live (used only when one is set).
	Redis cli.RedisOptions
	// Events receives the inference logs; may be nil.
	Events pipeline.EventSink
	// Registerer receives the router's and the reviewer's metrics; may be
	// nil.
	Registerer prometheus.Registerer
	// Log receives the settings line and the dev-key warning; nil logs
	// nothing.
	Log *slog.Logger
	// Clock stamps the reviewer's verdicts and inference logs and times
	// the account-history cache; nil is the wall clock.
	Clock clock.Clock
	// History returns where account history is read (the verdict store),
	// or nil while it is not open: the engine is built before the store's
	// first dial, so it is asked at each lookup. Required when
	// --account-history is on.
	History func() pipeline.AccountHistory
	// SharedHistory, when set, is another engine's account-history lookup
	// (Engine.HistoryLookup) that this one reads through instead of
	// building its own over History: a shadow candidate then weighs the
	// history the live review just weighed, from the live lookup's cache,
	// without a second query or a second cache.
	SharedHistory review.HistoryLookup
}

// Settings are what a stage engine does with chat data and which rows its
// verdicts land in. Two binaries given the same flags report equal
// Settings; both log them once at start ("<component>: stage engine
// ready").
type Settings struct {
	// PipelineVersion is part of every verdict's key.
	PipelineVersion string
	PrimaryModel    string
	FallbackModel   string
	// ImageHosts are the hosts whose https image URLs may reach a model
	// (empty: none); every image passes the gate.
	ImageHosts []string
	// ImageInline says allowed images are fetched here and sent as data:
	// URLs, so no model server fetches anything.
	ImageInline bool
	// DevDigestKey says every pseudonym uses the public dev-only keys
	// (--dev-insecure-keys).
	DevDigestKey         bool
	PrimaryPseudonymize  bool
	FallbackPseudonymize bool
	// AccountHistory is how far back the account history given to the
	// stages reaches; zero when it is off.
	AccountHistory time.Duration
	// CampaignSignals says reviews count campaign marks fleet-wide.
	CampaignSignals bool
}

// Engine is a stage engine: a pipeline.Reviewer over a router of its own
// whose background work (lease renewal, adaptive limits) runs until Close.
type Engine struct {
	*review.Reviewer
	settings Settings
	history  review.HistoryLookup
	close    func() error
}

// Settings returns what the engine was built with.
func (e *Engine) Settings() Settings { return e.settings }

// HistoryLookup is the engine's account-history lookup (nil when
// --account-history is off), for Params.SharedHistory.
func (e *Engine) HistoryLookup() review.HistoryLookup { return e.history }

// Close ends the router's background work and closes the fleet store's
// Redis client; call it after the last review has returned. It returns
// the error the background work ended with (already logged if it ended
// before Close), nil when it ended with Close.
func (e *Engine) Close() error { return e.close() }

// New builds the stage engine: one router shared by every review of the
// process (its gates, cooldowns and breakers only work when shared), with
// the fleet limits on a Redis client of the cli.FleetProfile when any is
// set, and the reviewer over it with the image gate, the digest key and
// the pools' pseudonymisation. A Redis that is down at start is not an
// error (the router runs on its static share until it answers). It fails
// on options that Validate would refuse, or on unreadable Redis TLS files.
func New(p Params) (*Engine, error) {
	log := p.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(p.Options.Validate(), p.Pools.ValidateFleet(p.Redis.RedisAddr), p.Options.ValidateCampaign(p.Redis.RedisAddr)); err != nil {
		return nil, err
	}
	history, err := newHistory(p)
	if err != nil {
		return nil, err
	}
	gate, err := imagecdn.New(p.Options.Images)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	closeStore := func() {}
	rc := p.Pools.Router()
	if rc.Fleet.Limited() {
		rdb, err := p.Redis.Client(cli.FleetProfile)
		if err != nil {
			return nil, fmt.Errorf("fleet limits: %w", err)
		}
		store := redislimits.New(rdb, "")
		rc.Fleet.Leases, rc.Fleet.Budget, closeStore = store, store, func() { _ = rdb.Close() }
	}
	router, err := llm.New(rc, p.Registerer)
	if err != nil {
		closeStore()
		return nil, fmt.Errorf("router: %w", err)
	}
	stopRouter := runBackground(router, log, p.Component)
	closeAll := func() error {
		err := stopRouter()
		closeStore()
		return err
	}
	keys, err := p.Options.Keys()
	if err != nil {
		closeAll()
		return nil, err
	}
	if keys.IsDev() {
		log.Warn(p.Component + ": --dev-insecure-keys: every pseudonym uses the public DEV-ONLY keys (labelled -dev); never in production")
	}
	rcfg := review.Config{Class: p.Class, Keys: keys, LegacyPseudonyms: p.Options.LegacyPseudonyms, Images: gate}
	if p.Options.Campaign.Enabled {
		det, closeCampaign, err := newCampaigns(p)
		if err != nil {
			return nil, errors.Join(err, closeAll())
		}
		rcfg.Campaigns = det
		closeRest := closeAll
		closeAll = func() error {
			err := closeRest()
			closeCampaign()
			return err
		}
	}
	if history != nil {
		rcfg.History = history
	}
	rev, err := review.New(rcfg, router, p.Events, p.Registerer, p.Clock)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("reviewer: %w", err), closeAll())
	}
	prim, fb := router.Models()
	s := Settings{PipelineVersion: rev.PipelineVersion(), PrimaryModel: prim, FallbackModel: fb,
		ImageHosts: p.Options.Images.Hosts, ImageInline: p.Options.Images.Inline, DevDigestKey: keys.IsDev(),
		PrimaryPseudonymize: rc.Primary.Pseudonymize, FallbackPseudonymize: rc.Fallback.Pseudonymize, AccountHistory: p.Options.History.Window,
		CampaignSignals: p.Options.Campaign.Enabled}
	log.Info(p.Component+": stage engine ready", "class", p.Class.String(), "primary_model", s.PrimaryModel, "fallback_model", s.FallbackModel,
		"pipeline_version", s.PipelineVersion, "image_hosts", s.ImageHosts, "image_inline", s.ImageInline, "dev_digest_key", s.DevDigestKey,
		"primary_pseudonymize", s.PrimaryPseudonymize, "fallback_pseudonymize", s.FallbackPseudonymize, "account_history", s.AccountHistory.String(), "campaign_signals", s.CampaignSignals)
	return &Engine{Reviewer: rev, settings: s, history: rcfg.History, close: closeAll}, nil
}

// newCampaigns builds the campaign detector over the Redis counter, on a
// client of the cli.CampaignProfile that the returned close ends.
func newCampaigns(p Params) (*campaign.Detector, func(), error) {
	rdb, err := p.Redis.Client(cli.CampaignProfile)
	if err != nil {
		return nil, nil, fmt.Errorf("campaign signals: %w", err)
	}
	counter, err := rediscampaign.New(rdb, p.Options.CampaignStore, p.Registerer)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	det, err := campaign.New(p.Options.Campaign, counter, p.Registerer, p.Clock)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return det, func() { _ = rdb.Close() }, nil
}

// background is work that runs until its context ends (*llm.Router: the
// adaptive limits' scrapes and the fleet leases' renewal).
type background interface {
	Run(ctx context.Context) error
}

// runBackground runs b until the returned stop is called; stop waits for
// it to end and returns its error. An error that ends b before stop is
// also logged when it happens: the reviews go on, on static limits and
// leases that are no longer renewed, and the operator should know then,
// not at shutdown.
func runBackground(b background, log *slog.Logger, component string) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = b.Run(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error(component+": router background work ended early; adaptive limits and fleet leases are no longer kept", "err", err)
		}
	}()
	return func() error {
		cancel()
		<-done
		if err != nil {
			return fmt.Errorf("router background work: %w", err)
		}
		return nil
	}
}

// newHistory builds the account-history lookup when --account-history is
// on (nil when off), over the source Params.History returns at each
// lookup, or returns Params.SharedHistory when that is set.
func newHistory(p Params) (review.HistoryLookup, error) {
	if !p.Options.History.Enabled() {
		return nil, nil
	}
	if p.SharedHistory != nil {
		return p.SharedHistory, nil
	}
	if p.History == nil {
		return nil, errors.New("--account-history: this binary has no verdict store to read it from; set it to 0")
	}
	l, err := accounthistory.New(p.Options.History, lateHistory(p.History), p.Clock, p.Registerer)
	if err != nil {
		return nil, fmt.Errorf("account history: %w", err)
	}
	return l, nil
}

// lateHistory is an account-history source opened after the engine was
// built: until it is, a lookup fails (and the review goes on without
// history, counted).
type lateHistory func() pipeline.AccountHistory

func (f lateHistory) AccountHistory(ctx context.Context, q pipeline.HistoryQuery) ([]pipeline.HistoryCount, error) {
	src := f()
	if src == nil {
		return nil, errors.New("account history: the verdict store is not open yet")
	}
	return src.AccountHistory(ctx, q)
}
