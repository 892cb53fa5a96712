// Package health keeps one circuit breaker per dependency a job needs
// (pipeline.Dependencies), fed by the outcomes of real calls. The job loop
// stops receiving while one is open and holds the jobs that failed because
// of it; /readyz, a metric and one log line per transition name the
// dependency that is down.
//
// A breaker opens after Config.Failures consecutive failures, stays open
// for Config.OpenFor, then lets one probe call through (half-open): its
// success closes the breaker, its failure opens it again. Time comes from
// an injectable clock, so tests never sleep.
package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// State is a breaker's state.
type State int

// The breaker states.
const (
	Closed State = iota
	Open
	HalfOpen
)

var stateNames = [...]string{"closed", "open", "half_open"}

// String names the state as metrics and logs show it.
func (s State) String() string { return stateNames[s] }

// ErrOpen is the error of a call not made because its dependency's breaker
// is open (or its one probe is already in flight).
var ErrOpen = errors.New("circuit open")

// Config tunes every breaker of a Monitor.
type Config struct {
	// Failures is how many consecutive failures open a breaker.
	Failures int
	// OpenFor is how long a breaker stays open before it lets a probe
	// through.
	OpenFor time.Duration
}

// DefaultConfig returns the defaults: five failures in a row, five seconds
// open.
func DefaultConfig() Config { return Config{Failures: 5, OpenFor: 5 * time.Second} }

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Failures < 1 {
		errs = append(errs, errors.New("breaker failures must be at least 1"))
	}
	if c.OpenFor <= 0 {
		errs = append(errs, errors.New("breaker open time must be positive"))
	}
	return errors.Join(errs...)
}

type breaker struct {
	state    State
	fails    int
	openedAt time.Time
	probing  bool
}

// Monitor is the set of breakers. It is safe for concurrent use.
type Monitor struct {
	cfg   Config
	log   *slog.Logger
	gauge *prometheus.GaugeVec
	trans *prometheus.CounterVec
	clk   clock.Clock // open times and the waits for their end

	mu       sync.Mutex
	breakers map[pipeline.Dependency]*breaker
	changed  chan struct{} // closed and replaced on every transition
}

// Option sets what a Monitor is built with besides its Config: the
// collaborators an operator does not configure.
type Option func(*Monitor)

// WithClock times the breakers' open periods and the waits for their end
// on c instead of the wall clock (nil keeps the wall clock).
func WithClock(c clock.Clock) Option { return func(m *Monitor) { m.clk = clock.Or(c) } }

// New returns a Monitor with every dependency closed, registering its
// metrics on reg when it is not nil; log may be nil.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger, opts ...Option) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Monitor{cfg: cfg, log: log, clk: clock.Real(),
		breakers: map[pipeline.Dependency]*breaker{}, changed: make(chan struct{}),
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "chatguard_worker_dependency_state",
			Help: "1 for the state each dependency's breaker is in (closed, open, half_open), 0 for the others.",
		}, []string{"dependency", "state"}),
		trans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_worker_dependency_transitions_total",
			Help: "Breaker transitions per dependency and new state.",
		}, []string{"dependency", "state"}),
	}
	for _, o := range opts {
		o(m)
	}
	for _, d := range pipeline.Dependencies {
		m.breakers[d] = &breaker{}
		m.setGauge(d, Closed)
	}
	if reg != nil {
		reg.MustRegister(m.gauge, m.trans)
	}
	return m, nil
}

func (m *Monitor) setGauge(d pipeline.Dependency, s State) {
	for st, name := range stateNames {
		v := 0.0
		if State(st) == s {
			v = 1
		}
		m.gauge.WithLabelValues(string(d), name).Set(v)
	}
}

// transition moves d's breaker to s; called with m.mu held.
func (m *Monitor) transition(d pipeline.Dependency, b *breaker, s State, cause error) {
	if b.state == s {
		return
	}
	from := b.state
	b.state = s
	if s == Open {
		b.openedAt = m.clk.Now()
	}
	if s == Closed {
		b.fails = 0
	}
	m.setGauge(d, s)
	m.trans.WithLabelValues(string(d), s.String()).Inc()
	attrs := []any{"dependency", string(d), "from", from.String(), "to", s.String()}
	if cause != nil {
		attrs = append(attrs, "err", cause.Error())
	}
	if s == Closed {
		m.log.Info("health: dependency recovered", attrs...)
	} else {
		m.log.Warn("health: dependency down", attrs...)
	}
	m.signal()
}

// signal wakes every waiter; called with m.mu held.
func (m *Monitor) signal() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// advance moves an open breaker whose time is up to half-open; called with
// m.mu held.
func (m *Monitor) advance(d pipeline.Dependency, b *breaker) {
	if b.state == Open && !m.clk.Now().Before(b.openedAt.Add(m.cfg.OpenFor)) {
		m.transition(d, b, HalfOpen, nil)
	}
}

// Call runs fn as a call to dependency d unless d's breaker refuses it, and
// records the outcome: a job-specific error (pipeline.IsJobSpecific) is a
// success for the dependency, a cancellation of ctx is not counted, any
// other error is a failure. An error that is not job-specific comes back as
// a *pipeline.DependencyError whose Down says whether d is down now; a
// refused call's error wraps ErrOpen.
func (m *Monitor) Call(ctx context.Context, d pipeline.Dependency, fn func(ctx context.Context) error) error {
	if err := m.allow(d); err != nil {
		return &pipeline.DependencyError{Dep: d, Down: true, Err: fmt.Errorf("%s: %w", d, err)}
	}
	finished := false
	defer func() {
		if !finished { // fn panicked: no outcome, but free the probe
			m.release(d)
		}
	}()
	err := fn(ctx)
	finished = true
	switch {
	case pipeline.IsJobSpecific(err):
		m.record(d, nil)
		return err
	case ctx.Err() != nil:
		m.release(d)
		return err
	}
	down := m.record(d, err)
	return &pipeline.DependencyError{Dep: d, Down: down, Err: err}
}

func (m *Monitor) allow(d pipeline.Dependency) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.breakers[d]
	m.advance(d, b)
	switch b.state {
	case Open:
		return ErrOpen
	case HalfOpen:
		if b.probing {
			return ErrOpen
		}
		b.probing = true
	}
	return nil
}

// release gives back a half-open probe that ended without an outcome.
func (m *Monitor) release(d pipeline.Dependency) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.breakers[d]; b.probing {
		b.probing = false
		m.signal()
	}
}

// record feeds one outcome (nil: success) and reports whether d is down
// after it.
func (m *Monitor) record(d pipeline.Dependency, err error) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.breakers[d]
	wasProbe := b.probing
	b.probing = false
	if err == nil {
		b.fails = 0
		if b.state == HalfOpen && wasProbe {
			m.transition(d, b, Closed, nil)
		}
		return b.state != Closed
	}
	b.fails++
	switch {
	case b.state == HalfOpen && wasProbe:
		m.transition(d, b, Open, err)
	case b.state == Closed && b.fails >= m.cfg.Failures:
		m.transition(d, b, Open, err)
	}
	return b.state != Closed
}

// Report feeds the outcome of a call made outside Call (nil: success) and
// reports whether d is down after it.
func (m *Monitor) Report(d pipeline.Dependency, err error) bool { return m.record(d, err) }

// State returns d's breaker state now.
func (m *Monitor) State(d pipeline.Dependency) State {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.breakers[d]
	m.advance(d, b)
	return b.state
}

// Down lists the dependencies whose breakers are not closed, in
// pipeline.Dependencies order.
func (m *Monitor) Down() []pipeline.Dependency {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []pipeline.Dependency
	for _, d := range pipeline.Dependencies {
		b := m.breakers[d]
		m.advance(d, b)
		if b.state != Closed {
			out = append(out, d)
		}
	}
	return out
}

// waitUntil blocks until ok() (evaluated under the monitor's lock with
// every breaker advanced) holds, or ctx ends with its cause. It wakes on
// every transition and when an open breaker's time is up.
func (m *Monitor) waitUntil(ctx context.Context, ok func() bool) error {
	for {
		m.mu.Lock()
		var next time.Time
		for _, d := range pipeline.Dependencies {
			b := m.breakers[d]
			m.advance(d, b)
			if b.state == Open {
				if at := b.openedAt.Add(m.cfg.OpenFor); next.IsZero() || at.Before(next) {
					next = at
				}
			}
		}
		if ok() {
			m.mu.Unlock()
			return nil
		}
		changed := m.changed
		m.mu.Unlock()
		if err := m.waitChange(ctx, changed, next); err != nil {
			return err
		}
	}
}

// WaitNotOpen blocks until no breaker is open (closed or probing), or ctx
// ends: the job loop receives only then.
func (m *Monitor) WaitNotOpen(ctx context.Context) error {
	return m.waitUntil(ctx, func() bool {
		for _, b := range m.breakers {
			if b.state == Open {
				return false
			}
		}
		return true
	})
}

// WaitProbe blocks until d's breaker is closed, or half-open with no probe
// in flight (a held job may then be the probe), or ctx ends.
func (m *Monitor) WaitProbe(ctx context.Context, d pipeline.Dependency) error {
	return m.waitUntil(ctx, func() bool {
		b := m.breakers[d]
		return b.state == Closed || (b.state == HalfOpen && !b.probing)
	})
}

// waitChange waits for a transition (changed closed), for next when it is
// not zero, or for ctx's end, which it returns the cause of.
func (m *Monitor) waitChange(ctx context.Context, changed <-chan struct{}, next time.Time) error {
	var fire <-chan time.Time
	if !next.IsZero() {
		t := m.clk.NewTimer(max(next.Sub(m.clk.Now()), 0))
		defer t.Stop()
		fire = t.Chan()
	}
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-changed:
	case <-fire:
	}
	return nil
}
