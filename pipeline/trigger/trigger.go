// Package trigger is the real-time trigger's engine: it receives chat
// events from the chat-events queue, records them in the shared per-room
// debounce state (pipeline.RoomActivity), and publishes a review event for
// every room whose window falls due, to the review-realtime queue.
//
// At least once in: a chat event is deleted only after its room's state
// is written. While the state store is down the engine stops receiving and
// holds what it has, extending the messages' visibility, so an outage
// costs freshness and never dead-letters an event; only a malformed event
// goes to the DLQ, with its reason. Exactly-once effect out: a window is
// recorded as pending before its review event is sent and acknowledged
// only after the queue accepted it; a window whose publish failed is
// published again, unchanged, once its claim lapses.
package trigger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

// Config tunes the engine. Start from DefaultConfig.
type Config struct {
	// Pollers is how many receive loops run at once.
	Pollers int
	// WaitTime is the long-poll wait of one receive (at most 20 s).
	WaitTime time.Duration
	// Visibility hides received events; while the state store is down it
	// is renewed every half of it.
	Visibility time.Duration
	// Retry backs off between attempts to record a batch while the state
	// store is down (Attempts is ignored: the batch is held until it is
	// recorded or the engine stops).
	Retry retry.Policy
	// FireInterval is how often the due rooms are looked for.
	FireInterval time.Duration
	// FireBatch bounds the rooms claimed per shard per look.
	FireBatch int
	// CallTimeout bounds each call to the state store and the queues.
	CallTimeout time.Duration
	// MaxClockSkew is how far after its arrival in the chat-events queue
	// an event's sent_at may lie: one further ahead (a producer clock
	// running ahead) is taken as sent at its arrival, and counted, so
	// that it cannot keep its room's window re-arming. Zero: no clamp. A
	// sent_at long before arrival is kept: it is a delivery delay, and
	// the chat API files the message at that time.
	MaxClockSkew time.Duration
	// StaleAfter is the age of sent_at past which a room's window could
	// no longer reach the message (the room state's max window less its
	// max delay and slack; the binary sets it from them). Such an event
	// is not recorded in its room, which would pull a whole max window
	// in: it gets a window of its own, and is counted. Zero: never stale.
	StaleAfter time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Pollers: 2, WaitTime: 20 * time.Second, Visibility: 60 * time.Second,
		Retry:        retry.Policy{Initial: 200 * time.Millisecond, Max: 10 * time.Second},
		FireInterval: time.Second, FireBatch: 100, CallTimeout: 10 * time.Second, MaxClockSkew: 5 * time.Minute}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Pollers < 1 || c.Pollers > 64 {
		errs = append(errs, fmt.Errorf("pollers %d must be within 1..64", c.Pollers))
	}
	if c.WaitTime < 0 || c.WaitTime > 20*time.Second {
		errs = append(errs, fmt.Errorf("wait time %s must be within 0..20s", c.WaitTime))
	}
	if c.Visibility < 2*time.Second || c.Visibility > 12*time.Hour {
		errs = append(errs, fmt.Errorf("visibility %s must be within 2s..12h", c.Visibility))
	}
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.FireInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("fire interval %s must be at least 10ms", c.FireInterval))
	}
	if c.FireBatch < 1 {
		errs = append(errs, fmt.Errorf("fire batch %d must be at least 1", c.FireBatch))
	}
	if c.CallTimeout <= 0 {
		errs = append(errs, errors.New("call timeout must be positive"))
	}
	if c.MaxClockSkew < 0 {
		errs = append(errs, fmt.Errorf("max clock skew %s must not be negative", c.MaxClockSkew))
	}
	if c.StaleAfter < 0 {
		errs = append(errs, fmt.Errorf("stale after %s must not be negative", c.StaleAfter))
	}
	return errors.Join(errs...)
}

// Deps are the engine's collaborators.
type Deps struct {
	// Events is the chat-events queue; DLQ its dead-letter queue, where a
	// malformed event is copied with its reason before it is deleted.
	Events pipeline.Inbox
	DLQ    pipeline.Sender
	// Reviews is the review-realtime queue.
	Reviews pipeline.Sender
	// Rooms is the shared debounce state.
	Rooms pipeline.RoomActivity
	// Clock is the engine's clock (nil: the wall clock); the state store
	// reads the same one.
	Clock clock.Clock
	// Log and Registerer may be nil.
	Log        *slog.Logger
	Registerer prometheus.Registerer
}

// Engine is the trigger. Run it once.
type Engine struct {
	cfg     Config
	d       Deps
	clk     clock.Clock
	log     *slog.Logger
	m       *metrics
	holding atomic.Int32 // receive loops holding a batch for the state store
	running atomic.Bool
	// beats holds, per receive loop, when it last advanced (unix ns on
	// clk), for Live.
	beats []atomic.Int64
	// links are the chat events' trace contexts for the windows' spans.
	links eventLinks
}

// New returns an engine, or the configuration's problems.
func New(cfg Config, d Deps) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("trigger: %w", err)
	}
	if d.Events == nil || d.DLQ == nil || d.Reviews == nil || d.Rooms == nil {
		return nil, errors.New("trigger: the events queue, its DLQ, the reviews queue and the room state are required")
	}
	log := d.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(d.Registerer)
	if err != nil {
		return nil, fmt.Errorf("trigger: %w", err)
	}
	return &Engine{cfg: cfg, d: d, clk: clock.Or(d.Clock), log: log, m: m, beats: make([]atomic.Int64, cfg.Pollers)}, nil
}

// Ready reports whether the engine is receiving and its state store
// answers: false before Run, while a batch is held for the state store,
// and after Run.
func (e *Engine) Ready() bool { return e.running.Load() && e.holding.Load() == 0 }

// Run receives and fires until ctx ends. A batch held for the state store
// when ctx ends is handed back to the queue (visibility 0). It returns nil
// after a stop by ctx.
func (e *Engine) Run(ctx context.Context) error {
	for i := range e.beats {
		e.beats[i].Store(e.clk.Now().UnixNano())
	}
	e.running.Store(true)
	defer e.running.Store(false)
	var wg sync.WaitGroup
	for i := range e.cfg.Pollers {
		wg.Add(1)
		go func() { defer wg.Done(); e.receiveLoop(ctx, &e.beats[i]) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); e.fireLoop(ctx) }()
	wg.Wait()
	return nil
}

// LiveAfter is how long a receive loop may go without advancing before
// Live fails: a long poll, the longest backoff, and three calls (record,
// publish, delete) of one batch.
func (c Config) LiveAfter() time.Duration {
	return c.WaitTime + c.Retry.Max + 3*c.CallTimeout
}

// Live reports a receive loop that has not advanced (a receive answered,
// a record attempted, a batch settled) for Config.LiveAfter: a stuck loop
// the trigger's liveness probe (/healthz) restarts. A loop holding a
// batch through a state-store outage advances with every attempt, so an
// outage is not a restart (it is /readyz's). Before Run and after it,
// nil.
func (e *Engine) Live() error {
	if !e.running.Load() {
		return nil
	}
	now, bound := e.clk.Now(), e.cfg.LiveAfter()
	for i := range e.beats {
		if last := time.Unix(0, e.beats[i].Load()); now.Sub(last) > bound {
			return fmt.Errorf("trigger: receive loop %d has not advanced for %s (more than %s)", i, now.Sub(last).Round(time.Second), bound)
		}
	}
	return nil
}

// call runs fn with the call timeout.
func (e *Engine) call(ctx context.Context, fn func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	return fn(cctx)
}
