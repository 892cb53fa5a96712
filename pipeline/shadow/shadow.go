// Package shadow mirrors a sampled share of live reviews to a candidate
// reviewer, after the live verdict has committed, and writes what the
// candidate said as shadow_verdict lake events. It never delays, changes or
// holds a live review: Offer returns at once, the candidate runs on its own
// goroutines with their own bounded concurrency and deadline, and a
// candidate that fails, is slow or hangs only costs its own slot.
package shadow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// Config configures a Runner.
type Config struct {
	// Rate is the share of live reviews mirrored, 0 to 1, sampled by the
	// review key so that reruns and pods agree.
	Rate float64
	// Concurrency bounds the shadow reviews in flight; an offer beyond it
	// is dropped and counted.
	Concurrency int
	// Timeout bounds one shadow review.
	Timeout time.Duration
	// Candidate names the candidate endpoint in the events (and their ids).
	Candidate string
	// Model is the model the candidate is asked for, for the events.
	Model string
	// TextDiffers says that the candidate is sent other text than the live
	// path (pseudonymised for a third party), for the events.
	TextDiffers bool
	// Budget is the fleet-wide budget of the candidate's tokens and cost;
	// its zero value bounds nothing.
	Budget Budget
	// Registerer, when set, receives the runner's metrics.
	Registerer prometheus.Registerer
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Rate < 0 || c.Rate > 1 {
		errs = append(errs, fmt.Errorf("shadow rate %v is outside 0-1", c.Rate))
	}
	if c.Concurrency < 1 {
		errs = append(errs, errors.New("shadow concurrency must be at least 1"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("shadow timeout must be positive"))
	}
	if c.Candidate == "" {
		errs = append(errs, errors.New("shadow candidate name is required"))
	}
	errs = append(errs, c.Budget.validate())
	return errors.Join(errs...)
}

// The outcomes counted in chatguard_worker_shadow_reviews_total.
const (
	outcomeOK        = pipeline.ShadowOK
	outcomeError     = pipeline.ShadowError
	outcomeCanceled  = pipeline.ShadowCanceled
	outcomeSaturated = "dropped_saturated"
	outcomeBudget    = "dropped_budget"
)

// Runner runs shadow reviews. Close it to cancel those in flight.
type Runner struct {
	cfg    Config
	rev    pipeline.Reviewer
	sink   pipeline.EventSink
	clk    clock.Clock
	sem    chan struct{}
	budget gate
	ctx    context.Context
	cancel context.CancelFunc
	total  *prometheus.CounterVec

	// mu makes admitting a review (wg.Add) and closing one critical
	// section: a review is either admitted before Close, which then waits
	// for it, or not at all. wg.Add racing a Wait that saw zero would let
	// a review start after Close returned, owned by no one.
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// New returns a Runner of the candidate rev that publishes to sink. clk
// times the reviews (nil: the wall clock).
func New(cfg Config, rev pipeline.Reviewer, sink pipeline.EventSink, clk clock.Clock) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	if rev == nil || sink == nil {
		return nil, errors.New("shadow: a candidate reviewer and an event sink are required")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runner{cfg: cfg, rev: rev, sink: sink, clk: clock.Or(clk), sem: make(chan struct{}, cfg.Concurrency), ctx: ctx, cancel: cancel,
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_worker_shadow_reviews_total",
			Help: "Shadow reviews by outcome: ok, error, canceled (drain), dropped_saturated (no free shadow slot), dropped_budget (the fleet's shadow budget is spent).",
		}, []string{"outcome"})}
	for _, o := range []string{outcomeOK, outcomeError, outcomeCanceled, outcomeSaturated, outcomeBudget} {
		r.total.WithLabelValues(o)
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(r.total); err != nil {
			cancel()
			return nil, fmt.Errorf("shadow: metrics: %w", err)
		}
	}
	return r, nil
}

// Metrics returns the counter of shadow reviews by outcome.
func (r *Runner) Metrics() *prometheus.CounterVec { return r.total }

// Sampled reports whether the review of k is mirrored: a hash of the key
// below the rate, the same answer on every pod and every rerun.
func Sampled(k pipeline.ReviewKey, rate float64) bool {
	if rate <= 0 {
		return false
	}
	h := fnv.New64a()
	for _, s := range []string{k.RoomID, k.WindowStart.UTC().Format(time.RFC3339Nano), k.WindowEnd.UTC().Format(time.RFC3339Nano), k.PipelineVersion} {
		_ = binary.Write(h, binary.BigEndian, uint32(len(s)))
		h.Write([]byte(s))
	}
	return float64(h.Sum64()>>11)/float64(1<<53) < rate
}

// Offer mirrors the committed live verdict's review to the candidate when
// it is sampled and a slot is free, and returns at once either way. ev and
// msgs are what the live review ran on; the candidate gets a copy.
func (r *Runner) Offer(live pipeline.Verdict, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage) {
	if live.Status != pipeline.StatusDone || !Sampled(live.Key, r.cfg.Rate) {
		return
	}
	if !r.admit(r.clk.Now()) {
		return
	}
	msgs = slices.Clone(msgs)
	go func() {
		defer r.wg.Done()
		defer func() { <-r.sem }()
		r.run(live, ev, msgs)
	}()
}

// admit takes a slot for one review and adds it to the reviews Close
// waits for, or counts why not; after Close it admits nothing.
func (r *Runner) admit(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	if !r.budget.open(now) {
		r.total.WithLabelValues(outcomeBudget).Inc()
		return false
	}
	select {
	case r.sem <- struct{}{}:
	default:
		r.total.WithLabelValues(outcomeSaturated).Inc()
		return false
	}
	r.wg.Add(1)
	return true
}

// run is one shadow review; it publishes its event whatever the outcome.
func (r *Runner) run(live pipeline.Verdict, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage) {
	// The candidate's calls are in the shadow class whatever reviewer it
	// is: the router serves them from idle capacity only.
	ctx, cancel := clock.WithTimeout(pipeline.WithClass(r.ctx, pipeline.ClassShadow), r.clk, r.cfg.Timeout)
	defer cancel()
	start := r.clk.Now()
	v, err := r.rev.Review(ctx, ev, msgs, 1)
	p := pipeline.ShadowVerdict{
		RoomID: live.Key.RoomID, WindowStart: live.Key.WindowStart, WindowEnd: live.Key.WindowEnd, PipelineVersion: live.Key.PipelineVersion,
		RunID: live.RunID, Candidate: r.cfg.Candidate, CandidateModel: r.cfg.Model, CandidatePipelineVersion: r.rev.PipelineVersion(),
		LiveLabel: live.Label, LiveCategory: live.Category, TextDiffers: r.cfg.TextDiffers,
		LatencyMs: float64(r.clk.Since(start)) / float64(time.Millisecond),
	}
	switch {
	case r.ctx.Err() != nil:
		p.Outcome, p.ErrorKind = outcomeCanceled, "drain"
	case err != nil || v.Status != pipeline.StatusDone:
		p.Outcome, p.ErrorKind = outcomeError, errorKind(ctx, err)
	default:
		p.Outcome, p.Label, p.Category, p.Severity, p.Confidence, p.Action, p.EarlyExit =
			outcomeOK, v.Label, v.Category, v.Severity, v.Confidence, v.Action, v.EarlyExit
	}
	for _, st := range v.Stages {
		if slices.ContainsFunc(p.Stages, func(s pipeline.ShadowStage) bool { return s.Stage == st.Stage }) {
			continue
		}
		p.Stages = append(p.Stages, pipeline.ShadowStage{Stage: st.Stage, TokensIn: st.TokensIn, TokensOut: st.TokensOut,
			LatencyMs: float64(st.Latency) / float64(time.Millisecond)})
		p.CostUSD += st.CostUSD
	}
	r.total.WithLabelValues(p.Outcome).Inc()
	r.spend(p)
	r.sink.Publish(pipeline.LakeEvent{EventID: pipeline.ShadowVerdictEventID(live.Key, r.cfg.Candidate), EventType: pipeline.EventShadowVerdict,
		OccurredAt: r.clk.Now().UTC(), SchemaVersion: pipeline.LakeEventSchemaVersion, Payload: p})
}

// spend charges the review's tokens and cost to the fleet's budget, and
// pauses this pod's shadowing when the budget is spent. A review canceled
// on drain was paid for too.
func (r *Runner) spend(p pipeline.ShadowVerdict) {
	tokens := 0
	for _, s := range p.Stages {
		tokens += s.TokensIn + s.TokensOut
	}
	if d := r.cfg.Budget.charge(context.WithoutCancel(r.ctx), tokens, p.CostUSD); d > 0 {
		r.budget.pause(r.clk.Now().Add(d))
	}
}

// errorKind is a short class of a candidate's failure, never its text
// (which may quote the chat).
func errorKind(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return "not_done"
	case ctx.Err() != nil:
		return "timeout"
	}
	switch d, _ := pipeline.Classify(err); d {
	case pipeline.GiveUp:
		return "permanent"
	case pipeline.Hold:
		return "dependency_down"
	case pipeline.Stopped:
		return "stopped"
	}
	return "transient"
}

// Close cancels the shadow reviews in flight (they are counted canceled
// and their events say so) and waits for them until ctx ends, returning
// ctx's error if they outlast it. Offers after Close, and offers that
// Close overtakes while they are admitting, are ignored; every review
// admitted is one Close waits for. Close may be called more than once.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.cancel()
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shadow: close: %w", ctx.Err())
	}
}
