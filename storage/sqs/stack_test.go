package sqs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

// flaky forwards SendMessageBatch to the real queue but reports some
// entries as failed without sending them, as SQS does under internal
// errors: entry i of the n-th call fails when fail(n, i) says so.
type flaky struct {
	next SendAPI
	fail func(call, entry int) bool

	mu       sync.Mutex
	calls    int
	injected int
}

func (f *flaky) SendMessageBatch(ctx context.Context, in *awssqs.SendMessageBatchInput, opts ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error) {
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
	out := &awssqs.SendMessageBatchOutput{}
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

// The drain's queue settings. A receive can be lost in transit: the queue
// hands the messages out, the SDK fails reading the 200's body ("use of
// closed network connection", seen under -race on a loaded machine) and
// retries, and the lost messages stay in flight until their visibility
// timeout ends, as they would in real SQS. So the test queue's visibility
// timeout is short, the drain waits well beyond it before it gives up, and
// it counts a message once however often it comes. The generous redrive
// keeps a message that is lost more than once out of the DLQ.
const (
	drainVisibility = 3 * time.Second
	drainIdle       = 4 * drainVisibility
	drainMaxReceive = 10
)

// drain receives and deletes messages until at least want distinct ones
// have come and the queue holds nothing, visible or in flight; or, should
// that never happen, until nothing new has come for drainIdle. It returns
// one message per distinct message id, with its attributes: a redelivery
// of a message whose receive was lost is not a second message, a second
// publish is.
func drain(t *testing.T, c *awssqs.Client, url string, want int) []types.Message {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	seen := map[string]bool{}
	var got []types.Message
	redelivered := 0
	// Each long poll (1s) ends well before ctx does, so no poll is cut off
	// while the queue answers it.
	for idle := time.Now(); time.Since(idle) < drainIdle && time.Until(deadline) > 10*time.Second; {
		out, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		require.NoError(t, err)
		if r, ok := awsretry.GetAttemptResults(out.ResultMetadata); ok && len(r.Results) > 1 {
			t.Logf("drain: the SDK retried a receive after: %v", r.Results[0].Err)
		}
		if len(out.Messages) == 0 {
			if v, f := queueDepth(t, ctx, c, url); len(got) >= want && v == "0" && f == "0" {
				break
			}
			continue
		}
		var del []types.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
			id := aws.ToString(m.MessageId)
			if seen[id] {
				redelivered++
				continue
			}
			seen[id] = true
			idle = time.Now()
			got = append(got, m)
		}
		// An entry may fail when the SDK retried a delete whose answer was
		// lost; the depth check below proves that everything is gone.
		_, err = c.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del})
		require.NoError(t, err)
	}
	if redelivered > 0 {
		t.Logf("drain: %d redelivered messages counted once", redelivered)
	}
	v, f := queueDepth(t, ctx, c, url)
	require.Equal(t, [2]string{"0", "0"}, [2]string{v, f}, "the drain leaves nothing visible or in flight (%d distinct received, %d wanted)", len(got), want)
	return got
}

// queueDepth returns how many messages the queue holds visible and in
// flight. fauxqs counts exactly, so zero and zero means everything sent was
// received and deleted.
func queueDepth(t *testing.T, ctx context.Context, c *awssqs.Client, url string) (visible, inflight string) {
	t.Helper()
	out, err := c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	require.NoError(t, err)
	return out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)],
		out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]
}

func TestPartialFailuresAgainstQueue(t *testing.T) {
	t.Parallel()
	q := stacktest.NewQueue(t, "review", drainMaxReceive, drainVisibility)
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
	p := reviewPublisher(t, f, func(c *Config) { c.URL = q.URL; c.Retry.Attempts = 10 })
	const n = 250
	require.NoError(t, p.Run(context.Background(), reviewEvents(n)))
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

// BenchmarkReviewPublish compares batches of ten with one message per call
// against the local queue. It reports messages per call and messages per
// second; run it with -benchtime=1x:
//
//	go test ./storage/sqs -run '^$' -bench ReviewPublish -benchtime=1x
func BenchmarkReviewPublish(b *testing.B) {
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
			q := stacktest.NewQueue(b, "review-bench", 3, 30*time.Second)
			cfg := DefaultReviewConfig()
			cfg.URL, cfg.BatchSize = q.URL, bc.batchSize
			var last ReviewStats
			var elapsed time.Duration
			b.ResetTimer()
			for range b.N {
				p, err := NewReviewPublisher(c, cfg)
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if err := p.Run(context.Background(), reviewEvents(bc.events)); err != nil {
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
