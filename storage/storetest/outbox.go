package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.OutboxStore = (*Memory)(nil)

// outbox is Memory's outbox: the MySQL table's semantics in a slice.
type outbox struct {
	mu   sync.Mutex
	rows []*outboxRow
	next int64
	// failErr, when set, is returned by every outbox call instead of
	// doing the work.
	failErr error
}

type outboxRow struct {
	pipeline.OutboxRow
	availableAt, sentAt time.Time
	lastError           string
}

// insert writes msgs at at, keeping a row whose destination and event id
// are already held. The caller has validated them.
func (o *outbox) insert(at time.Time, msgs []pipeline.OutboxMessage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	at = usUTC(at)
	for _, m := range msgs {
		if slices.ContainsFunc(o.rows, func(r *outboxRow) bool {
			return r.Destination == m.Destination && r.EventID == m.EventID
		}) {
			continue
		}
		o.next++
		m.Body = slices.Clone(m.Body)
		m.Attributes = maps.Clone(m.Attributes)
		o.rows = append(o.rows, &outboxRow{OutboxRow: pipeline.OutboxRow{ID: o.next, OutboxMessage: m, CreatedAt: at}, availableAt: at})
	}
}

func checkOutbox(msgs []pipeline.OutboxMessage) error {
	for _, m := range msgs {
		if err := m.Validate(); err != nil {
			return pipeline.Permanent(fmt.Errorf("memory: outbox: %w", err))
		}
	}
	return nil
}

// FailOutbox makes every outbox call fail with err (nil: work again), to
// inject an outage of the outbox's database.
func (m *Memory) FailOutbox(err error) {
	m.out.mu.Lock()
	defer m.out.mu.Unlock()
	m.out.failErr = err
}

// Enqueue implements pipeline.OutboxStore.
func (m *Memory) Enqueue(ctx context.Context, now time.Time, msgs []pipeline.OutboxMessage) error {
	if err := m.outboxCall(ctx); err != nil {
		return err
	}
	if now.IsZero() {
		return pipeline.Permanent(errors.New("memory: outbox: enqueue: no time"))
	}
	if err := checkOutbox(msgs); err != nil {
		return err
	}
	m.out.insert(now, msgs)
	return nil
}

func (m *Memory) outboxCall(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.out.mu.Lock()
	defer m.out.mu.Unlock()
	if m.out.failErr != nil {
		return fmt.Errorf("memory: outbox: %w", m.out.failErr)
	}
	return nil
}

// Claim implements pipeline.OutboxStore.
func (m *Memory) Claim(ctx context.Context, dests []pipeline.OutboxDestination, now time.Time, lease time.Duration, limit int) ([]pipeline.OutboxRow, error) {
	if err := m.outboxCall(ctx); err != nil {
		return nil, err
	}
	if limit < 1 || len(dests) == 0 || lease <= 0 {
		return nil, pipeline.Permanent(errors.New("memory: outbox: claim: needs destinations, a positive lease and limit"))
	}
	o := &m.out
	o.mu.Lock()
	defer o.mu.Unlock()
	now = usUTC(now)
	var due []*outboxRow
	for _, r := range o.rows {
		if r.sentAt.IsZero() && !r.availableAt.After(now) && slices.Contains(dests, r.Destination) {
			due = append(due, r)
		}
	}
	slices.SortStableFunc(due, func(a, b *outboxRow) int { return a.availableAt.Compare(b.availableAt) })
	due = due[:min(len(due), limit)]
	slices.SortFunc(due, func(a, b *outboxRow) int { return int(a.ID - b.ID) })
	out := make([]pipeline.OutboxRow, len(due))
	for i, r := range due {
		r.availableAt = usUTC(now.Add(lease))
		r.Attempts++
		out[i] = r.OutboxRow
		out[i].Body = slices.Clone(r.Body)
		out[i].Attributes = maps.Clone(r.Attributes)
	}
	return out, nil
}

// MarkSent implements pipeline.OutboxStore.
func (m *Memory) MarkSent(ctx context.Context, now time.Time, ids []int64) error {
	if err := m.outboxCall(ctx); err != nil {
		return err
	}
	m.out.mu.Lock()
	defer m.out.mu.Unlock()
	for _, r := range m.out.rows {
		if r.sentAt.IsZero() && slices.Contains(ids, r.ID) {
			r.sentAt = usUTC(now)
		}
	}
	return nil
}

// MarkFailed implements pipeline.OutboxStore.
func (m *Memory) MarkFailed(ctx context.Context, failures []pipeline.OutboxFailure) error {
	if err := m.outboxCall(ctx); err != nil {
		return err
	}
	m.out.mu.Lock()
	defer m.out.mu.Unlock()
	for _, f := range failures {
		for _, r := range m.out.rows {
			if r.ID == f.ID && r.sentAt.IsZero() {
				r.availableAt, r.lastError = usUTC(f.RetryAt), pipeline.ClipRunes(f.Error, 500)
			}
		}
	}
	return nil
}

// Backlog implements pipeline.OutboxStore.
func (m *Memory) Backlog(ctx context.Context) (map[pipeline.OutboxDestination]pipeline.OutboxBacklog, error) {
	if err := m.outboxCall(ctx); err != nil {
		return nil, err
	}
	m.out.mu.Lock()
	defer m.out.mu.Unlock()
	out := map[pipeline.OutboxDestination]pipeline.OutboxBacklog{}
	for _, r := range m.out.rows {
		if !r.sentAt.IsZero() {
			continue
		}
		b := out[r.Destination]
		if b.Pending == 0 || r.CreatedAt.Before(b.Oldest) {
			b.Oldest = r.CreatedAt
		}
		b.Pending++
		out[r.Destination] = b
	}
	return out, nil
}

// PurgeSent implements pipeline.OutboxStore.
func (m *Memory) PurgeSent(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	if err := m.outboxCall(ctx); err != nil {
		return 0, err
	}
	if limit < 1 {
		return 0, pipeline.Permanent(errors.New("memory: outbox: purge: limit must be positive"))
	}
	m.out.mu.Lock()
	defer m.out.mu.Unlock()
	n := 0
	m.out.rows = slices.DeleteFunc(m.out.rows, func(r *outboxRow) bool {
		if n < limit && !r.sentAt.IsZero() && r.sentAt.Before(cutoff) {
			n++
			return true
		}
		return false
	})
	return n, nil
}

// OutboxMessages returns every outbox message written and not purged,
// sent or not, in the order written: what a test of a producer reads.
func (m *Memory) OutboxMessages() []pipeline.OutboxMessage {
	m.out.mu.Lock()
	defer m.out.mu.Unlock()
	out := make([]pipeline.OutboxMessage, len(m.out.rows))
	for i, r := range m.out.rows {
		out[i] = r.OutboxMessage
	}
	return out
}
