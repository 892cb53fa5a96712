package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.EventSink = (*LakePublisher)(nil)

// LakeConfig configures a LakePublisher: the feedback queue's Config
// (Concurrency is the number of calls in flight) and the buffer.
type LakeConfig struct {
	Config
	// Buffer bounds events waiting to be encoded and sent; a few batches
	// more may wait in the sender (one per call slot).
	Buffer int
	// FlushAge is the longest an event waits for its batch to fill.
	FlushAge time.Duration
}

// DefaultLakeConfig returns the defaults; URL must still be set.
func DefaultLakeConfig() LakeConfig {
	c := DefaultConfig()
	c.Name = "feedback"
	c.Concurrency = 4
	c.CallTimeout = 5 * time.Second
	c.Retry = retry.Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second, Attempts: 3}
	return LakeConfig{Config: c, Buffer: 10000, FlushAge: 200 * time.Millisecond}
}

// Validate reports every problem with the configuration.
func (c LakeConfig) Validate() error {
	var errs []error
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Buffer < 1 {
		errs = append(errs, errors.New("event buffer must be at least 1"))
	}
	if c.FlushAge <= 0 {
		errs = append(errs, errors.New("event flush age must be positive"))
	}
	return errors.Join(errs...)
}

// LakePublisher publishes lake events (inference logs, verdicts) to the
// feedback queue off the hot path: Publish drops into a bounded buffer and
// returns at once, a background goroutine encodes and sends them in
// batches, and a full buffer drops the event and counts the drop instead
// of slowing a review down. Start it once, Stop it once; Publish is safe
// from any goroutine at any time (after Stop it drops).
type LakePublisher struct {
	cfg  LakeConfig
	s    *sender
	st   *Stream
	ch   chan pipeline.LakeEvent
	done chan struct{}
	// ctx ends the encoder's wait for the stream when Stop's deadline
	// passes.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.RWMutex
	closed bool

	published prometheus.Counter
	dropped   *prometheus.CounterVec
	calls     *prometheus.CounterVec
}

// NewLakePublisher returns a publisher over api; reg may be nil.
func NewLakePublisher(api SendAPI, cfg LakeConfig, reg prometheus.Registerer, opts ...Option) (*LakePublisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sqs: %s: %w", cfg.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &LakePublisher{
		cfg: cfg, ch: make(chan pipeline.LakeEvent, cfg.Buffer), done: make(chan struct{}), ctx: ctx, cancel: cancel,
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_worker_events_published_total", Help: "Lake events accepted by the feedback queue.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_worker_events_dropped_total",
			Help: "Lake events dropped by reason (buffer_full, stopped, too_large, encode, rejected, send_failed).",
		}, []string{"reason"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_worker_events_sqs_calls_total", Help: "SendMessageBatch calls by outcome (ok, partial, error).",
		}, []string{"outcome"}),
	}
	next := cfg.OnCall
	qcfg := cfg.Config
	qcfg.OnCall = func(c Call) {
		switch {
		case c.Err != nil:
			p.calls.WithLabelValues("error").Inc()
		case c.Failed > 0:
			p.calls.WithLabelValues("partial").Inc()
		default:
			p.calls.WithLabelValues("ok").Inc()
		}
		if next != nil {
			next(c)
		}
	}
	c, err := newCore(qcfg, opts)
	if err != nil {
		return nil, err
	}
	p.s = &sender{core: c, api: api}
	if reg != nil {
		depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chatguard_worker_events_buffered", Help: "Lake events waiting to be sent.",
		}, func() float64 { return float64(len(p.ch)) })
		for _, c := range []prometheus.Collector{p.published, p.dropped, p.calls, depth} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("%s: metrics: %w", p.s.prefix, err)
			}
		}
	}
	return p, nil
}

// Start starts the sending goroutine; Stop ends it.
func (p *LakePublisher) Start() {
	p.st = p.s.newStream(StreamConfig{FlushAge: p.cfg.FlushAge}, p.result)
	go p.run()
}

// Publish queues ev without blocking; it returns false (and counts the
// drop) when the buffer is full or the publisher is stopped.
func (p *LakePublisher) Publish(ev pipeline.LakeEvent) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.dropped.WithLabelValues("stopped").Inc()
		return false
	}
	select {
	case p.ch <- ev:
		return true
	default:
		p.dropped.WithLabelValues("buffer_full").Inc()
		return false
	}
}

// Stop stops accepting events and sends what is buffered until ctx ends;
// events still unsent then are counted as dropped (send_failed) and ctx's
// error is returned. Stop must be called once, after Start.
func (p *LakePublisher) Stop(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.ch)
	}
	p.mu.Unlock()
	stop := context.AfterFunc(ctx, p.cancel)
	defer stop()
	<-p.done // quick once ctx ends: every Put then fails at once
	defer p.cancel()
	return p.st.Close(ctx)
}

// run encodes buffered events and hands them to the stream.
func (p *LakePublisher) run() {
	defer close(p.done)
	for ev := range p.ch {
		b, err := json.Marshal(ev)
		if err != nil {
			p.dropped.WithLabelValues("encode").Inc()
			continue
		}
		// The event's own trace context: the stream's context holds no
		// span, the review that produced the event does.
		attrs := pipeline.WithTraceContext(trace.ContextWithSpanContext(p.ctx, ev.Trace), nil)
		if err := p.st.Put(p.ctx, pipeline.OutMessage{Body: b, Attributes: attrs}); err != nil {
			if errors.Is(err, ErrTooLarge) {
				p.dropped.WithLabelValues("too_large").Inc()
			} else {
				p.dropped.WithLabelValues("send_failed").Inc()
			}
		}
	}
}

// result counts an event's final result.
func (p *LakePublisher) result(err error) {
	var ee *EntryError
	switch {
	case err == nil:
		p.published.Inc()
	case errors.As(err, &ee) && ee.SenderFault:
		p.dropped.WithLabelValues("rejected").Inc()
	default:
		p.dropped.WithLabelValues("send_failed").Inc()
	}
}
