// Package queuetest holds test support for queues: Fake, an in-memory
// pipeline.Queue with SQS's semantics for unit tests of the engines, and
// Run, the conformance suite that the SQS adapter (against the local
// stack's fauxqs) and Fake both pass, so that a test on the fake means what
// it would mean on SQS.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.Queue = (*Fake)(nil)

// Op names a queue operation, for fault injection and the call log.
type Op string

// The operations of a Fake.
const (
	OpReceive          Op = "receive"
	OpSend             Op = "send"
	OpDelete           Op = "delete"
	OpChangeVisibility Op = "change_visibility"
)

// Errors of entries the queue refuses, as SQS's SenderFault answers; each
// comes wrapped in a *pipeline.PermanentError, as the adapter reports them.
var (
	ErrReceiptInvalid = errors.New("ReceiptHandleIsInvalid: the receipt handle is invalid or stale")
	ErrInvalidMessage = errors.New("InvalidMessageContents: characters outside the allowed set")
)

// Config tunes a Fake.
type Config struct {
	// MaxReceive is the redrive policy's maxReceiveCount: a message that
	// has been received this many times moves to DLQ instead of being
	// delivered again. Zero disables redrive.
	MaxReceive int
	// DLQ receives redriven messages; nil drops them (still counted).
	DLQ *Fake
	// Clock is the queue's clock (nil: the wall clock); Fake.Advance
	// moves the queue's time on past it.
	Clock clock.Clock
	// MaxWait caps a long poll in real time (default 50 ms), so that an
	// engine polling an empty fake spins slowly but tests stay quick, even
	// on a Clock that never moves.
	MaxWait time.Duration
	// Visibility is the queue's default visibility timeout, for a receive
	// that asks for none (default 30 s).
	Visibility time.Duration
}

// Fault decides whether one entry of an operation fails, and with what
// error; for OpReceive it is asked once per call with an empty Entry and
// fails the whole call. A nil error lets the entry through.
type Fault func(op Op, e Entry) error

// Entry is what a Fault sees of an entry.
type Entry struct {
	// ID is the message's id (empty for a send, or an unknown receipt).
	ID         string
	Receipt    string
	Visibility time.Duration
}

// VisibilityChange is one entry of a ChangeVisibility that took effect.
type VisibilityChange struct {
	ID         string
	Visibility time.Duration
}

// Stats counts what a Fake holds and has done.
type Stats struct {
	// Held counts messages not deleted (visible or in flight).
	Held int
	// Visible counts messages a receive could return now.
	Visible int
	// Deleted counts deletes; Redriven messages moved to the DLQ.
	Deleted, Redriven int
	// Received counts deliveries, redeliveries included.
	Received int
	// Calls counts calls by operation.
	Calls map[Op]int
}

// MessageState is what a Fake knows of one message.
type MessageState struct {
	ID         string
	Body       []byte
	Attributes map[string]pipeline.Attribute
	Receives   int
	VisibleAt  time.Time
	Deleted    bool
	SentAt     time.Time
}

// Fake is an in-memory standard queue: visibility timeouts, receive
// counts, fresh receipt handles on each delivery (only the latest one
// deletes or changes visibility), redrive to a DLQ after MaxReceive
// receives, batch results per entry, and an injectable clock. It is safe
// for concurrent use.
type Fake struct {
	cfg Config

	mu      sync.Mutex
	offset  time.Duration
	byID    map[string]*fakeMsg
	order   []*fakeMsg // in send order; order[:next] were delivered at least once
	next    int
	held    map[*fakeMsg]struct{} // delivered and not deleted
	ids     int
	seq     int
	changed chan struct{} // closed and replaced on every change a poll may wait for
	fault   Fault
	stats   Stats
	asks    []int
	vis     []VisibilityChange
}

type fakeMsg struct {
	MessageState
	receipt string
}

// NewFake returns an empty queue.
func NewFake(cfg Config) *Fake {
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 50 * time.Millisecond
	}
	if cfg.Visibility <= 0 {
		cfg.Visibility = 30 * time.Second
	}
	return &Fake{cfg: cfg, byID: map[string]*fakeMsg{}, held: map[*fakeMsg]struct{}{}, changed: make(chan struct{}), stats: Stats{Calls: map[Op]int{}}}
}

// Now is the queue's time: Config.Clock's plus every Advance.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now()
}

func (f *Fake) now() time.Time { return f.cfg.Clock.Now().Add(f.offset) }

// Advance moves the queue's clock on by d: messages whose visibility ends
// within d become visible.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset += d
	f.wake()
}

// SetFault installs fault (nil removes it).
func (f *Fake) SetFault(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fault
}

func (f *Fake) wake() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Enqueue sends bodies without attributes and returns their ids.
func (f *Fake) Enqueue(bodies ...[]byte) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, len(bodies))
	for i, b := range bodies {
		ids[i] = f.add(pipeline.OutMessage{Body: b})
	}
	f.wake()
	return ids
}

func (f *Fake) add(m pipeline.OutMessage) string {
	f.ids++
	id := "msg-" + strconv.Itoa(f.ids)
	fm := &fakeMsg{MessageState: MessageState{ID: id, Body: slices.Clone(m.Body), Attributes: cloneAttrs(m.Attributes), SentAt: f.now()}}
	f.byID[id] = fm
	f.order = append(f.order, fm)
	return id
}

func cloneAttrs(a map[string]pipeline.Attribute) map[string]pipeline.Attribute {
	if len(a) == 0 {
		return nil
	}
	out := make(map[string]pipeline.Attribute, len(a))
	for k, v := range a {
		out[k] = v
	}
	return out
}

// Receive returns up to req.Max visible messages, hiding them for
// req.Visibility; their bodies are shared with the queue (do not modify). With none visible it waits for one up to req.Wait, or
// Config.MaxWait if shorter, in real time; it returns ctx's cause when ctx
// ends first.
func (f *Fake) Receive(ctx context.Context, req pipeline.ReceiveRequest) ([]pipeline.Message, error) {
	if req.Max < 1 || req.Max > pipeline.MaxReceive {
		return nil, fmt.Errorf("queuetest: receive: max %d must be within 1..%d", req.Max, pipeline.MaxReceive)
	}
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("queuetest: receive: %w", err)
	}
	if req.Visibility <= 0 {
		req.Visibility = f.cfg.Visibility
	}
	f.mu.Lock()
	f.stats.Calls[OpReceive]++
	f.asks = append(f.asks, req.Max)
	if f.fault != nil {
		if err := f.fault(OpReceive, Entry{}); err != nil {
			f.mu.Unlock()
			return nil, fmt.Errorf("queuetest: receive: %w", err)
		}
	}
	f.mu.Unlock()
	var timeout <-chan time.Time
	for {
		f.mu.Lock()
		out, next := f.take(req)
		changed := f.changed
		// A message comes back by itself when the clock passes its
		// visibility; a clock advanced by hand wakes us through Advance.
		// The wait is on real time, as the long poll's cap is: a test
		// that shares Clock with the code under test counts that code's
		// waiters on it, not the fake queue's.
		var due <-chan time.Time
		stopDue := func() bool { return false }
		if !next.IsZero() {
			t := clock.Real().NewTimer(next.Sub(f.now()))
			due, stopDue = t.Chan(), t.Stop
		}
		f.mu.Unlock()
		if len(out) > 0 {
			stopDue()
			return out, nil
		}
		if timeout == nil {
			t := clock.Real().NewTimer(min(req.Wait, f.cfg.MaxWait))
			defer t.Stop()
			timeout = t.Chan()
		}
		select {
		case <-ctx.Done():
			stopDue()
			return nil, fmt.Errorf("queuetest: receive: %w", context.Cause(ctx))
		case <-timeout:
			stopDue()
			return nil, nil
		case <-changed:
		case <-due:
		}
		stopDue()
	}
}

// take delivers up to req.Max visible messages: never-delivered ones
// first, from a cursor, so that a deep queue costs O(1) per message; then
// redeliveries. next is when the first held message becomes visible (zero
// if none is held hidden).
func (f *Fake) take(req pipeline.ReceiveRequest) (out []pipeline.Message, next time.Time) {
	now := f.now()
	for f.next < len(f.order) && len(out) < req.Max {
		m := f.order[f.next]
		f.next++
		if !m.Deleted {
			out = append(out, f.deliver(m, now, req.Visibility))
		}
	}
	if len(out) == req.Max || len(f.held) == 0 {
		return out, time.Time{}
	}
	var due []*fakeMsg
	for m := range f.held {
		switch {
		case !m.VisibleAt.After(now):
			due = append(due, m)
		case next.IsZero() || m.VisibleAt.Before(next):
			next = m.VisibleAt
		}
	}
	// Oldest first, as far as a standard queue has an order.
	slices.SortFunc(due, func(a, b *fakeMsg) int { return a.SentAt.Compare(b.SentAt) })
	for _, m := range due {
		if len(out) == req.Max {
			break
		}
		if f.cfg.MaxReceive > 0 && m.Receives >= f.cfg.MaxReceive {
			f.redrive(m)
			continue
		}
		out = append(out, f.deliver(m, now, req.Visibility))
	}
	return out, next
}

func (f *Fake) deliver(m *fakeMsg, now time.Time, vis time.Duration) pipeline.Message {
	m.Receives++
	f.seq++
	m.receipt = m.ID + "#" + strconv.Itoa(f.seq)
	m.VisibleAt = now.Add(vis)
	f.held[m] = struct{}{}
	f.stats.Received++
	return pipeline.Message{ID: m.ID, ReceiptHandle: m.receipt, Body: m.Body, ReceiveCount: m.Receives, SentAt: m.SentAt, Attributes: cloneAttrs(m.Attributes)}
}

func (f *Fake) redrive(m *fakeMsg) {
	f.remove(m)
	f.stats.Redriven++
	if f.cfg.DLQ != nil {
		f.cfg.DLQ.mu.Lock()
		f.cfg.DLQ.add(pipeline.OutMessage{Body: m.Body, Attributes: m.Attributes})
		f.cfg.DLQ.wake()
		f.cfg.DLQ.mu.Unlock()
	}
}

func (f *Fake) remove(m *fakeMsg) {
	m.Deleted = true
	delete(f.byID, m.ID)
	delete(f.held, m)
}

// lookup finds the message of a receipt when it is the latest one.
func (f *Fake) lookup(receipt string) *fakeMsg {
	id, _, _ := strings.Cut(receipt, "#")
	if m := f.byID[id]; m != nil && m.receipt == receipt && m.receipt != "" {
		return m
	}
	return nil
}

// entries runs one batched operation: each entry through the fault, then
// apply; it returns nil or a *pipeline.BatchError.
func (f *Fake) entries(op Op, receipts []string, vis time.Duration, apply func(m *fakeMsg)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Calls[op]++
	errs := make([]error, len(receipts))
	failed := false
	for i, r := range receipts {
		m := f.lookup(r)
		e := Entry{Receipt: r, Visibility: vis}
		if m != nil {
			e.ID = m.ID
		}
		if f.fault != nil {
			if err := f.fault(op, e); err != nil {
				errs[i], failed = fmt.Errorf("queuetest: %s: %w", op, err), true
				continue
			}
		}
		if m == nil {
			errs[i], failed = pipeline.Permanent(fmt.Errorf("queuetest: %s: %w", op, ErrReceiptInvalid)), true
			continue
		}
		apply(m)
	}
	f.wake()
	if failed {
		return &pipeline.BatchError{Errs: errs}
	}
	return nil
}

// Delete deletes the messages of the latest receipts; a stale or unknown
// receipt fails its entry with ErrReceiptInvalid.
func (f *Fake) Delete(ctx context.Context, receipts []string) error {
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("queuetest: delete: %w", err)
	}
	return f.entries(OpDelete, receipts, 0, func(m *fakeMsg) {
		f.remove(m)
		f.stats.Deleted++
	})
}

// ChangeVisibility hides the messages of the latest receipts for
// visibility from now (0: visible at once); a stale or unknown receipt
// fails its entry with ErrReceiptInvalid.
func (f *Fake) ChangeVisibility(ctx context.Context, receipts []string, visibility time.Duration) error {
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("queuetest: change visibility: %w", err)
	}
	return f.entries(OpChangeVisibility, receipts, visibility, func(m *fakeMsg) {
		m.VisibleAt = f.now().Add(visibility)
		f.vis = append(f.vis, VisibilityChange{ID: m.ID, Visibility: visibility})
	})
}

// Send enqueues msgs; a body that SQS would refuse (characters outside
// XML's) fails its entry with ErrInvalidMessage, a *pipeline.PermanentError
// as the adapter reports SQS's sender-fault entries.
func (f *Fake) Send(ctx context.Context, msgs []pipeline.OutMessage) error {
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("queuetest: send: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Calls[OpSend]++
	errs := make([]error, len(msgs))
	failed := false
	for i, m := range msgs {
		if f.fault != nil {
			if err := f.fault(OpSend, Entry{}); err != nil {
				errs[i], failed = fmt.Errorf("queuetest: send: %w", err), true
				continue
			}
		}
		if !validBody(m.Body) {
			errs[i], failed = pipeline.Permanent(fmt.Errorf("queuetest: send: %w", ErrInvalidMessage)), true
			continue
		}
		f.add(m)
	}
	f.wake()
	if failed {
		return &pipeline.BatchError{Errs: errs}
	}
	return nil
}

// validBody applies SQS's rule: #x9 | #xA | #xD | #x20 to #xD7FF | #xE000
// to #xFFFD | #x10000 to #x10FFFF.
func validBody(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

// Stats returns the counts so far.
func (f *Fake) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.Calls = make(map[Op]int, len(f.stats.Calls))
	for k, v := range f.stats.Calls {
		s.Calls[k] = v
	}
	s.Held = len(f.byID)
	now := f.now()
	for _, m := range f.byID {
		if !m.VisibleAt.After(now) {
			s.Visible++
		}
	}
	return s
}

// Received counts deliveries so far, redeliveries included (cheaper than
// Stats, for polling).
func (f *Fake) Received() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats.Received
}

// Message returns what the queue knows of the message with id, deleted
// or not; ok is false for an id it never held.
func (f *Fake) Message(id string) (MessageState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.order {
		if m.ID == id {
			return m.MessageState, true
		}
	}
	return MessageState{}, false
}

// Messages returns the messages not deleted, in send order.
func (f *Fake) Messages() []MessageState {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []MessageState
	for _, m := range f.order {
		if !m.Deleted {
			out = append(out, m.MessageState)
		}
	}
	return out
}

// ReceiveAsks returns the Max of every receive so far, in order.
func (f *Fake) ReceiveAsks() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asks)
}

// VisibilityChanges returns every visibility change that took effect, in
// order.
func (f *Fake) VisibilityChanges() []VisibilityChange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.vis)
}
