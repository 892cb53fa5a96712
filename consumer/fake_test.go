package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatguard/chatguard/consumer"
)

// fakeQueue mimics SQS's visibility semantics: a received message is hidden
// for the visibility timeout under a fresh receipt, only the latest receipt
// deletes or extends it, and it comes back when its timeout runs out.
type fakeQueue struct {
	mu       sync.Mutex
	msgs     map[string]*fakeMsg
	order    []string
	next     int // order[:next] were received at least once
	seq      int
	deleted  int
	receives atomic.Int64 // messages handed out, redeliveries included
	// failExtend makes every visibility change fail, so that held messages
	// are redelivered when their timeout runs out.
	failExtend atomic.Bool
}

type fakeMsg struct {
	body      []byte
	visibleAt time.Time
	receipt   string
	received  int
}

func newFakeQueue() *fakeQueue { return &fakeQueue{msgs: map[string]*fakeMsg{}} }

func (q *fakeQueue) send(bodies ...[]byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bodies {
		q.seq++
		id := fmt.Sprintf("msg-%06d", q.seq)
		q.msgs[id] = &fakeMsg{body: b}
		q.order = append(q.order, id)
	}
}

func (q *fakeQueue) Receive(ctx context.Context, max int, vis time.Duration) ([]consumer.Message, error) {
	deadline := time.Now().Add(100 * time.Millisecond)
	for {
		if out := q.take(max, vis); len(out) > 0 {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (q *fakeQueue) take(max int, vis time.Duration) []consumer.Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	var out []consumer.Message
	hand := func(id string, m *fakeMsg) bool {
		q.seq++
		m.receipt = fmt.Sprintf("%s#%d", id, q.seq)
		m.visibleAt = now.Add(vis)
		m.received++
		q.receives.Add(1)
		out = append(out, consumer.Message{ID: id, ReceiptHandle: m.receipt, Body: m.body})
		return len(out) == max
	}
	// Never-received messages first, from a cursor, so that a deep queue
	// costs O(1) per receive; then redeliveries, by a scan.
	for q.next < len(q.order) {
		id := q.order[q.next]
		q.next++
		if m := q.msgs[id]; m != nil && hand(id, m) {
			return out
		}
	}
	for _, id := range q.order[:q.next] {
		m := q.msgs[id]
		if m == nil || m.received == 0 || now.Before(m.visibleAt) {
			continue
		}
		if hand(id, m) {
			break
		}
	}
	return out
}

func (q *fakeQueue) lookup(receipt string) (string, *fakeMsg) {
	id, _, _ := strings.Cut(receipt, "#")
	m := q.msgs[id]
	if m == nil || m.receipt != receipt {
		return id, nil
	}
	return id, m
}

func (q *fakeQueue) Delete(_ context.Context, receipts []string) ([]string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var failed []string
	for _, r := range receipts {
		id, m := q.lookup(r)
		if m == nil {
			failed = append(failed, r)
			continue
		}
		delete(q.msgs, id)
		q.deleted++
	}
	if len(failed) > 0 {
		return failed, errors.New("ReceiptHandleIsInvalid")
	}
	return nil, nil
}

func (q *fakeQueue) ChangeVisibility(_ context.Context, receipts []string, vis time.Duration) ([]string, error) {
	if q.failExtend.Load() && vis > 0 {
		return receipts, errors.New("injected: visibility change failed")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var failed []string
	for _, r := range receipts {
		_, m := q.lookup(r)
		if m == nil {
			failed = append(failed, r)
			continue
		}
		m.visibleAt = time.Now().Add(vis)
	}
	if len(failed) > 0 {
		return failed, errors.New("ReceiptHandleIsInvalid")
	}
	return nil, nil
}

// stats returns the messages left (visible or not) and deleted so far.
func (q *fakeQueue) stats() (left, deleted int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs), q.deleted
}

// visible counts the messages that a receive would return now.
func (q *fakeQueue) visible() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, m := range q.msgs {
		if !time.Now().Before(m.visibleAt) {
			n++
		}
	}
	return n
}

// memStore is an in-memory object store that can be made to fail.
type memStore struct {
	mu      sync.Mutex
	objs    map[string][]byte
	puts    map[string]int
	failing atomic.Bool
	fails   atomic.Int64
}

func newMemStore() *memStore { return &memStore{objs: map[string][]byte{}, puts: map[string]int{}} }

func (s *memStore) Put(ctx context.Context, key string, body []byte, _ string) error {
	if s.failing.Load() {
		s.fails.Add(1)
		return errors.New("503 SlowDown")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs[key] = slices.Clone(body)
	s.puts[key]++
	return nil
}

func (s *memStore) List(_ context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.objs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

func (s *memStore) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objs[key]
	if !ok {
		return nil, fmt.Errorf("no object %s", key)
	}
	return b, nil
}

func (s *memStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objs)
}
