// Package live fans the events of on-demand reviews out to their SSE
// clients. Each review is a Stream: the review's goroutine emits events
// without ever blocking, every subscriber has a bounded buffer and is
// dropped (its connection closed; it may resume) when the buffer is full,
// and a writer goroutine per stream copies the events to a
// pipeline.LiveLog so that a client resumes from Last-Event-ID on any pod.
package live

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
)

// Config bounds the hub.
type Config struct {
	// SubscriberBuffer is the events a client may fall behind before it is
	// dropped.
	SubscriberBuffer int
	// LogBuffer is the events a stream may hold for its log writer; when
	// the log is slower, events are dropped from the log (counted), never
	// from live clients.
	LogBuffer int
	// LogBatch bounds the events of one LiveLog.Append.
	LogBatch int
	// LogTimeout bounds one Append.
	LogTimeout time.Duration
}

// DefaultConfig suits a console pod.
func DefaultConfig() Config {
	return Config{SubscriberBuffer: 128, LogBuffer: 1024, LogBatch: 256, LogTimeout: 2 * time.Second}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.SubscriberBuffer < 1 || c.SubscriberBuffer > 1<<16 {
		errs = append(errs, errors.New("live: subscriber buffer must be in 1..65536"))
	}
	if c.LogBuffer < 1 || c.LogBatch < 1 {
		errs = append(errs, errors.New("live: log buffer and batch must be positive"))
	}
	if c.LogTimeout <= 0 {
		errs = append(errs, errors.New("live: log timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Hub owns the streams of the reviews running in this process.
type Hub struct {
	cfg Config
	log pipeline.LiveLog
	m   *metrics

	mu       sync.Mutex
	streams  map[string]*Stream
	draining bool
	drainCh  chan struct{}
	writers  sync.WaitGroup
}

// NewHub returns a hub writing to log (nil keeps nothing: no resume).
// reg may be nil.
func NewHub(cfg Config, log pipeline.LiveLog, reg prometheus.Registerer) (*Hub, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Hub{cfg: cfg, log: log, m: m, streams: map[string]*Stream{}, drainCh: make(chan struct{})}, nil
}

// DroppedCounter is the counter of clients dropped for a full buffer (for
// benchmarks; it is also chatguard_console_live_clients_dropped_total).
func (h *Hub) DroppedCounter() prometheus.Counter { return h.m.dropped }

// ErrDraining is returned by Open while the hub drains.
var ErrDraining = errors.New("live: draining")

// Open starts the stream of review id. The caller emits its events and
// ends it with Close. It returns ErrDraining once Drain was called.
func (h *Hub) Open(id string) (*Stream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.draining {
		return nil, ErrDraining
	}
	s := &Stream{h: h, id: id, subs: map[*Sub]struct{}{}, logCh: make(chan *pipeline.LiveEvent, h.cfg.LogBuffer)}
	h.streams[id] = s
	h.writers.Add(1)
	go s.writeLog()
	h.m.streams.Inc()
	return s, nil
}

// Lookup returns the stream of review id when it runs in this process.
func (h *Hub) Lookup(id string) (*Stream, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.streams[id]
	return s, ok
}

// Draining returns a channel closed when Drain is called: every SSE
// handler selects on it to send its client a reconnect event.
func (h *Hub) Draining() <-chan struct{} { return h.drainCh }

// Drain refuses new streams and tells every connected client to reconnect
// (through Draining). The reviews themselves go on; Wait waits for their
// logs.
func (h *Hub) Drain() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.draining {
		h.draining = true
		close(h.drainCh)
	}
}

// Wait waits until every closed stream's events are written to the log,
// or ctx ends (its error is returned).
func (h *Hub) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { h.writers.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stream is one review's events.
type Stream struct {
	h     *Hub
	id    string
	logCh chan *pipeline.LiveEvent

	mu     sync.Mutex
	seq    uint64
	subs   map[*Sub]struct{}
	closed bool
	// recent keeps the tail of the events so a subscriber that joins late
	// on this pod (a resume that lands here) needs no log read.
	recent []*pipeline.LiveEvent
}

// maxRecent bounds Stream.recent.
const maxRecent = 1024

// ID returns the review id.
func (s *Stream) ID() string { return s.id }

// Emit appends an event of typ with data (JSON) and hands it to every
// subscriber and to the log writer without blocking: a subscriber whose
// buffer is full is dropped. Emit after Close does nothing. A final event
// type closes the stream.
func (s *Stream) Emit(typ pipeline.LiveEventType, data []byte) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.seq++
	ev := &pipeline.LiveEvent{Seq: s.seq, Type: typ, Data: data}
	if len(s.recent) == maxRecent {
		s.recent = append(s.recent[:0], s.recent[maxRecent/2:]...)
	}
	s.recent = append(s.recent, ev)
	for sub := range s.subs {
		select {
		case sub.ch <- ev:
		default:
			// The client stalled: drop it so that neither the review
			// nor the other clients wait for it. It may resume.
			delete(s.subs, sub)
			sub.drop(ErrSlowClient)
			close(sub.ch)
			s.h.m.dropped.Inc()
		}
	}
	select {
	case s.logCh <- ev:
	default:
		s.h.m.logDropped.Inc()
	}
	final := typ.Final()
	if final {
		s.closeLocked()
	}
	s.mu.Unlock()
	s.h.m.events.WithLabelValues(string(typ)).Inc()
}

// Close ends the stream (idempotent): subscribers see their channel
// closed once they have read what it holds.
func (s *Stream) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}

func (s *Stream) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	for sub := range s.subs {
		close(sub.ch)
	}
	s.subs = nil
	close(s.logCh)
	s.h.mu.Lock()
	delete(s.h.streams, s.id)
	s.h.mu.Unlock()
	s.h.m.streams.Dec()
}

// ErrSlowClient is the reason a subscriber was dropped for a full buffer.
var ErrSlowClient = errors.New("live: client fell behind its buffer")

// Subscribe returns a subscriber that receives the events with Seq >
// after: those still in the stream's recent tail at once, then the live
// ones. ok is false when the stream is closed or its tail no longer holds
// the events after `after` (read them from the log instead).
func (s *Stream) Subscribe(after uint64) (sub *Sub, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	var backlog []*pipeline.LiveEvent
	if after < s.seq {
		if len(s.recent) == 0 || s.recent[0].Seq > after+1 {
			return nil, false
		}
		backlog = s.recent[after+1-s.recent[0].Seq:]
	}
	sub = &Sub{ch: make(chan *pipeline.LiveEvent, s.h.cfg.SubscriberBuffer+len(backlog)), dropped: make(chan struct{}), s: s}
	for _, ev := range backlog {
		sub.ch <- ev
	}
	s.subs[sub] = struct{}{}
	return sub, true
}

// writeLog copies the stream's events to the log in batches until the
// stream closes. Its goroutine is owned by the hub (Wait).
func (s *Stream) writeLog() {
	defer s.h.writers.Done()
	batch := make([]pipeline.LiveEvent, 0, s.h.cfg.LogBatch)
	for ev := range s.logCh {
		batch = append(batch[:0], *ev)
	fill:
		for len(batch) < s.h.cfg.LogBatch {
			select {
			case ev, ok := <-s.logCh:
				if !ok {
					break fill
				}
				batch = append(batch, *ev)
			default:
				break fill
			}
		}
		if s.h.log == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.h.cfg.LogTimeout)
		err := s.h.log.Append(ctx, s.id, batch)
		cancel()
		if err != nil {
			s.h.m.logDropped.Add(float64(len(batch)))
		}
	}
}

// Sub is one client's view of a stream.
type Sub struct {
	s       *Stream
	ch      chan *pipeline.LiveEvent
	dropped chan struct{}
	reason  atomic.Value
}

// Events delivers the events (shared by every subscriber: read only); it is closed when the stream ends or the
// client is dropped (then Dropped is closed first).
func (c *Sub) Events() <-chan *pipeline.LiveEvent { return c.ch }

// Dropped is closed when the client was dropped for falling behind.
func (c *Sub) Dropped() <-chan struct{} { return c.dropped }

func (c *Sub) drop(reason error) {
	c.reason.Store(reason)
	close(c.dropped)
}

// Leave unsubscribes (the client went away); idempotent.
func (c *Sub) Leave() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	delete(c.s.subs, c)
}
