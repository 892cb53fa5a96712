package sqspub

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// memQueue is an in-memory SendMessageBatch that records bodies and can
// fail chosen entries a number of times.
type memQueue struct {
	mu       sync.Mutex
	bodies   map[string]int // body -> times accepted
	attrs    []map[string]types.MessageAttributeValue
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	delay    time.Duration
	// failFor decides, per body and attempt, whether an entry fails and
	// whether as a sender fault.
	failFor func(body string, seen int) (fail, sender bool)
	seen    map[string]int
	callErr error
	sizes   []int
}

func newMemQueue() *memQueue {
	return &memQueue{bodies: map[string]int{}, seen: map[string]int{}}
}

func (q *memQueue) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	n := q.inFlight.Add(1)
	defer q.inFlight.Add(-1)
	for {
		m := q.maxSeen.Load()
		if n <= m || q.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	if q.delay > 0 {
		select {
		case <-time.After(q.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if q.callErr != nil {
		return nil, q.callErr
	}
	if len(in.Entries) > MaxBatch {
		return nil, fmt.Errorf("too many entries: %d", len(in.Entries))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sizes = append(q.sizes, len(in.Entries))
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		body := aws.ToString(e.MessageBody)
		q.seen[body]++
		if q.failFor != nil {
			if fail, sender := q.failFor(body, q.seen[body]); fail {
				out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected"), SenderFault: sender})
				continue
			}
		}
		q.bodies[body]++
		q.attrs = append(q.attrs, e.MessageAttributes)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m")})
	}
	return out, nil
}

func setup(t *testing.T, q API, mutate func(*Config)) *Publisher {
	t.Helper()
	cfg := DefaultConfig()
	cfg.QueueURL = "http://queue.local/review"
	cfg.BackoffBase, cfg.BackoffMax = time.Millisecond, 5*time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(q, cfg)
	require.NoError(t, err)
	return p
}

func events(n int) <-chan pipeline.ReviewEvent {
	ch := make(chan pipeline.ReviewEvent, 64)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	go func() {
		defer close(ch)
		for i := range n {
			ch <- pipeline.ReviewEvent{RoomID: "room-" + strconv.Itoa(i), WindowStart: start, WindowEnd: start.Add(time.Hour), RunID: "run-1", SchemaVersion: pipeline.ReviewSchemaVersion}
		}
	}()
	return ch
}

func TestPublishAllInFullBatches(t *testing.T) {
	t.Parallel()
	q := newMemQueue()
	q.delay = 2 * time.Millisecond
	p := setup(t, q, func(c *Config) { c.Concurrency = 4 })
	require.NoError(t, p.Run(context.Background(), events(1005)))
	st := p.Stats()
	require.Equal(t, int64(1005), st.Published)
	require.Zero(t, st.Failed)
	require.Equal(t, int64(101), st.Calls)
	require.Len(t, q.bodies, 1005)
	require.LessOrEqual(t, q.maxSeen.Load(), int32(4), "never more calls in flight than the limit")
	require.Greater(t, q.maxSeen.Load(), int32(1), "calls overlap")
	for body, n := range q.bodies {
		require.Equal(t, 1, n)
		ev, err := pipeline.DecodeReviewEvent([]byte(body))
		require.NoError(t, err)
		require.Equal(t, "run-1", ev.RunID)
		require.False(t, ev.PublishedAt.IsZero())
	}
	for _, a := range q.attrs {
		require.Equal(t, "run-1", aws.ToString(a[AttrRunID].StringValue))
		require.Equal(t, "1", aws.ToString(a[AttrSchemaVersion].StringValue))
		require.Equal(t, "Number", aws.ToString(a[AttrSchemaVersion].DataType))
	}
}

func TestPartialFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		failFor       func(body string, seen int) (bool, bool)
		maxAttempts   int
		wantPublished int64
		wantFailed    int64
		wantErr       string
	}{
		{
			name:          "every third entry fails twice then succeeds",
			failFor:       func(body string, seen int) (bool, bool) { return len(body)%3 == 0 && seen <= 2, false },
			maxAttempts:   3,
			wantPublished: 200,
		},
		{
			name:          "an entry that keeps failing fails the run",
			failFor:       func(body string, _ int) (bool, bool) { return containsRoom(body, "room-7"), false },
			maxAttempts:   4,
			wantPublished: 199,
			wantFailed:    1,
			wantErr:       "after 4 attempts",
		},
		{
			name:          "sender faults are not retried",
			failFor:       func(body string, _ int) (bool, bool) { return containsRoom(body, "room-9"), true },
			maxAttempts:   4,
			wantPublished: 199,
			wantFailed:    1,
			wantErr:       "1 of 200 messages not published",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newMemQueue()
			q.failFor = tc.failFor
			p := setup(t, q, func(c *Config) { c.MaxAttempts = tc.maxAttempts })
			err := p.Run(context.Background(), events(200))
			st := p.Stats()
			require.Equal(t, tc.wantPublished, st.Published)
			require.Equal(t, tc.wantFailed, st.Failed)
			require.Len(t, q.bodies, int(tc.wantPublished))
			for _, n := range q.bodies {
				require.Equal(t, 1, n, "a retry never re-sends an accepted entry")
			}
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.Positive(t, st.Retried)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func containsRoom(body, room string) bool {
	ev, err := pipeline.DecodeReviewEvent([]byte(body))
	return err == nil && ev.RoomID == room
}

func TestInvalidEventCountsAsFailed(t *testing.T) {
	t.Parallel()
	q := newMemQueue()
	p := setup(t, q, nil)
	ch := make(chan pipeline.ReviewEvent, 2)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ch <- pipeline.ReviewEvent{RoomID: "bad/room", WindowStart: start, WindowEnd: start.Add(time.Hour), RunID: "r", SchemaVersion: 1}
	ch <- pipeline.ReviewEvent{RoomID: "good", WindowStart: start, WindowEnd: start.Add(time.Hour), RunID: "r", SchemaVersion: 1}
	close(ch)
	err := p.Run(context.Background(), ch)
	require.ErrorContains(t, err, "reserved character")
	require.Equal(t, Stats{Published: 1, Failed: 1, Calls: 1}, p.Stats())
}

func TestCallErrorFailsBatch(t *testing.T) {
	t.Parallel()
	q := newMemQueue()
	q.callErr = errors.New("connection refused")
	p := setup(t, q, nil)
	err := p.Run(context.Background(), events(25))
	require.ErrorContains(t, err, "25 of 25 messages not published")
	require.ErrorContains(t, err, "connection refused")
}

func TestCancelStopsAndCountsUnsent(t *testing.T) {
	t.Parallel()
	q := newMemQueue()
	q.delay = time.Hour // every call hangs until cancelled
	p := setup(t, q, func(c *Config) { c.Concurrency = 2 })
	ctx, cancel := context.WithCancelCause(context.Background())
	in := make(chan pipeline.ReviewEvent)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, in) }()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 25 {
		in <- pipeline.ReviewEvent{RoomID: fmt.Sprint("r", i), WindowStart: start, WindowEnd: start.Add(time.Hour), RunID: "r", SchemaVersion: 1}
	}
	cancel(errors.New("sigterm"))
	select {
	case err := <-done:
		require.ErrorContains(t, err, "sigterm")
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	st := p.Stats()
	require.Zero(t, st.Published)
	require.Equal(t, int64(25), st.Failed)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	err := Config{BatchSize: 11, BackoffBase: time.Second}.Validate()
	for _, w := range []string{"queue url", "batch size 11", "concurrency 0", "max attempts 0", "backoff"} {
		require.ErrorContains(t, err, w)
	}
	require.NoError(t, func() error { c := DefaultConfig(); c.QueueURL = "q"; return c.Validate() }())
}
