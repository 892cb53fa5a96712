package sqspub

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

// flaky forwards SendMessageBatch to the real queue but reports some
// entries as failed without sending them, as SQS does under internal
// errors: entry i of the n-th call fails when fail(n, i) says so.
type flaky struct {
	next API
	fail func(call, entry int) bool

	mu       sync.Mutex
	calls    int
	injected int
}

func (f *flaky) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	f.calls++
	call := f.calls
	var keep []types.SendMessageBatchRequestEntry
	var failed []types.BatchResultErrorEntry
	for i, e := range in.Entries {
		if f.fail(call, i) {
			f.injected++
			failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected"), SenderFault: false})
			continue
		}
		keep = append(keep, e)
	}
	f.mu.Unlock()
	out := &sqs.SendMessageBatchOutput{}
	if len(keep) > 0 {
		fwd := *in
		fwd.Entries = keep
		var err error
		if out, err = f.next.SendMessageBatch(ctx, &fwd, opts...); err != nil {
			return nil, err
		}
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

// drain receives and deletes messages until want arrived or the queue
// stays empty for a few polls, and returns the bodies with their
// attributes.
func drain(t *testing.T, c *sqs.Client, url string, want int) []types.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var got []types.Message
	for empty := 0; len(got) < want && empty < 3; {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		require.NoError(t, err)
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		var del []types.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			got = append(got, m)
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
		}
		_, err = c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del})
		require.NoError(t, err)
	}
	return got
}

func TestPartialFailuresAgainstQueue(t *testing.T) {
	t.Parallel()
	q := stacktest.NewQueue(t, "sqspub", 3, 30*time.Second)
	c := stacktest.SQS(t)
	// The first three calls fail entries 0, 3, 6 and 9; every later call
	// fails its first entry once in two calls, so retries are themselves
	// partly failed.
	f := &flaky{next: c, fail: func(call, entry int) bool {
		if call <= 3 {
			return entry%3 == 0
		}
		return call%2 == 0 && entry == 0
	}}
	p := setup(t, f, func(c *Config) { c.QueueURL = q.URL; c.MaxAttempts = 10 })
	const n = 250
	require.NoError(t, p.Run(context.Background(), events(n)))
	st := p.Stats()
	require.Equal(t, int64(n), st.Published)
	require.Zero(t, st.Failed)
	require.Positive(t, f.injected)
	require.Equal(t, int64(f.injected), st.Retried, "every injected failure was re-sent, nothing else")

	msgs := drain(t, c, q.URL, n)
	rooms := map[string]int{}
	for _, m := range msgs {
		ev, err := pipeline.DecodeReviewEvent([]byte(aws.ToString(m.Body)))
		require.NoError(t, err)
		rooms[ev.RoomID]++
		require.Equal(t, "run-1", aws.ToString(m.MessageAttributes[AttrRunID].StringValue))
		require.Equal(t, "1", aws.ToString(m.MessageAttributes[AttrSchemaVersion].StringValue))
	}
	require.Len(t, rooms, n, "every event arrived")
	for room, k := range rooms {
		require.Equal(t, 1, k, "room %s published once", room)
	}
}

// BenchmarkPublish compares batches of ten with one message per call
// against the local queue. It reports messages per call and messages per
// second; run it with -benchtime=1x:
//
//	go test ./storage/sqspub -run '^$' -bench Publish -benchtime=1x
func BenchmarkPublish(b *testing.B) {
	c := stacktest.SQS(b)
	for _, bc := range []struct {
		name      string
		batchSize int
		events    int
	}{
		{name: "batch10", batchSize: 10, events: 100_000},
		{name: "single", batchSize: 1, events: 10_000},
	} {
		b.Run(fmt.Sprintf("%s/events=%d", bc.name, bc.events), func(b *testing.B) {
			q := stacktest.NewQueue(b, "sqspub-bench", 3, 30*time.Second)
			cfg := DefaultConfig()
			cfg.QueueURL, cfg.BatchSize = q.URL, bc.batchSize
			var last Stats
			var elapsed time.Duration
			b.ResetTimer()
			for range b.N {
				p, err := New(c, cfg)
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if err := p.Run(context.Background(), events(bc.events)); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
				last = p.Stats()
			}
			b.StopTimer()
			b.ReportMetric(last.MessagesPerCall(), "msgs/call")
			b.ReportMetric(float64(bc.events)*float64(b.N)/elapsed.Seconds(), "msgs/s")
		})
	}
}
