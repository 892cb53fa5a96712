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

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// newQueue returns the fake feedback queue; long polls on an empty queue
// end after 100 ms so that receivers notice shutdown quickly.
func newQueue() *queuetest.Fake {
	return queuetest.NewFake(queuetest.Config{MaxWait: 100 * time.Millisecond})
}

// queueStats returns the messages left (visible or not) and deleted so far.
func queueStats(q *queuetest.Fake) (left, deleted int) {
	st := q.Stats()
	return st.Held, st.Deleted
}

// received counts deliveries, redeliveries included.
func received(q *queuetest.Fake) int64 { return int64(q.Received()) }

// failExtend makes every visibility change that hides messages fail, so
// that held messages are redelivered when their timeout runs out.
func failExtend(q *queuetest.Fake) {
	q.SetFault(func(op queuetest.Op, e queuetest.Entry) error {
		if op == queuetest.OpChangeVisibility && e.Visibility > 0 {
			return errors.New("injected: visibility change failed")
		}
		return nil
	})
}

func enqueue(q *queuetest.Fake, bodies ...[]byte) { q.Enqueue(bodies...) }

var _ pipeline.Inbox = (*queuetest.Fake)(nil)

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

// newLake writes the lake under the default prefixes to store, as
// cmd/consumer does to S3.
func newLake(store s3lake.Putter) *s3lake.Lake {
	l, err := s3lake.NewLake(store, s3lake.DefaultEventsPrefix, s3lake.DefaultErrorsPrefix)
	if err != nil {
		panic(err) // the default prefixes are valid
	}
	return l
}
