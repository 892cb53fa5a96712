package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/chatguard/chatguard/internal/stacktest"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// receiveAll long-polls q until want messages arrived or the context ends.
func receiveAll(ctx context.Context, t *testing.T, c *sqs.Client, url string, want int) []types.Message {
	t.Helper()
	var got []types.Message
	for len(got) < want {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 2,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
		})
		require.NoError(t, err)
		got = append(got, out.Messages...)
	}
	return got
}

func TestSQSBatchSendReceiveVisibilityDelete(t *testing.T) {
	t.Parallel()
	c := stacktest.SQS(t)
	q := stacktest.NewQueue(t, "it-sqs", 5, 30*time.Second)
	ctx := ctxFor(t, time.Minute)

	entries := make([]types.SendMessageBatchRequestEntry, 10)
	for i := range entries {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(fmt.Sprintf(`{"n":%d}`, i))}
	}
	sent, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.URL), Entries: entries})
	require.NoError(t, err)
	require.Empty(t, sent.Failed)
	require.Len(t, sent.Successful, 10)

	msgs := receiveAll(ctx, t, c, q.URL, 10)
	require.Len(t, msgs, 10)
	seen := map[int]bool{}
	for _, m := range msgs {
		var body struct{ N int }
		require.NoError(t, json.Unmarshal([]byte(*m.Body), &body))
		seen[body.N] = true
	}
	require.Len(t, seen, 10)

	// Everything is in flight now: a receive finds nothing.
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Empty(t, out.Messages)

	// Handing one back (visibility 0) makes it visible again at once, with
	// its receive count raised.
	_, err = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q.URL), ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 0})
	require.NoError(t, err)
	again := receiveAll(ctx, t, c, q.URL, 1)
	require.Len(t, again, 1)
	require.Equal(t, *msgs[0].MessageId, *again[0].MessageId)
	require.Equal(t, "2", again[0].Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	msgs[0] = again[0] // the newest receipt handle is the valid one

	del := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		del[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	delOut, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.URL), Entries: del})
	require.NoError(t, err)
	require.Empty(t, delOut.Failed)
	require.Len(t, delOut.Successful, 10)

	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	require.NoError(t, err)
	require.Equal(t, "0", attrs.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	require.Equal(t, "0", attrs.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
}

func TestSQSLongPollReturnsMessageSentWhileWaiting(t *testing.T) {
	t.Parallel()
	c := stacktest.SQS(t)
	q := stacktest.NewQueue(t, "it-longpoll", 5, 30*time.Second)
	ctx := ctxFor(t, time.Minute)

	type result struct {
		out *sqs.ReceiveMessageOutput
		err error
	}
	done := make(chan result, 1)
	polling := make(chan struct{})
	go func() {
		close(polling)
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 1, WaitTimeSeconds: 20})
		done <- result{out, err}
	}()
	<-polling
	// Give the poll a moment to reach the server; the assertion below holds
	// either way, since a poll that started late still finds the message.
	time.Sleep(300 * time.Millisecond)
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String("wake")})
	require.NoError(t, err)
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Len(t, r.out.Messages, 1)
		require.Equal(t, "wake", *r.out.Messages[0].Body)
	case <-ctx.Done():
		t.Fatal("the long poll did not return the message")
	}
}

func TestSQSRedriveToDLQAfterMaxReceiveCount(t *testing.T) {
	t.Parallel()
	const maxReceive = 3
	c := stacktest.SQS(t)
	q := stacktest.NewQueue(t, "it-redrive", maxReceive, 30*time.Second)
	ctx := ctxFor(t, time.Minute)

	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String("poison")})
	require.NoError(t, err)
	for i := 1; i <= maxReceive; i++ {
		msgs := receiveAll(ctx, t, c, q.URL, 1)
		require.Len(t, msgs, 1)
		require.Equal(t, strconv.Itoa(i), msgs[0].Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		_, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q.URL), ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 0})
		require.NoError(t, err)
	}
	// The next receive would be number maxReceive+1: the message moves to
	// the DLQ instead.
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 1, WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Empty(t, out.Messages)
	dead := receiveAll(ctx, t, c, q.DLQURL, 1)
	require.Len(t, dead, 1)
	require.Equal(t, "poison", *dead[0].Body)
}

func TestSQSStackQueuesHaveRedrivePolicy(t *testing.T) {
	t.Parallel()
	c := stacktest.SQS(t)
	ctx := ctxFor(t, 30*time.Second)
	want, err := strconv.Atoi(stacktest.Get(t, "CHATGUARD_MAX_RECEIVE_COUNT"))
	require.NoError(t, err)
	for _, pair := range [][2]string{{"CHATGUARD_REVIEW_QUEUE_URL", "CHATGUARD_REVIEW_DLQ_URL"}, {"CHATGUARD_FEEDBACK_QUEUE_URL", "CHATGUARD_FEEDBACK_DLQ_URL"}} {
		q, dlq := stacktest.Get(t, pair[0]), stacktest.Get(t, pair[1])
		dlqAttrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		require.NoError(t, err, pair[1])
		attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy}})
		require.NoError(t, err, pair[0])
		var policy struct {
			DeadLetterTargetArn string          `json:"deadLetterTargetArn"`
			MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"`
		}
		require.NoError(t, json.Unmarshal([]byte(attrs.Attributes[string(types.QueueAttributeNameRedrivePolicy)]), &policy), pair[0])
		require.Equal(t, dlqAttrs.Attributes[string(types.QueueAttributeNameQueueArn)], policy.DeadLetterTargetArn, pair[0])
		n, err := strconv.Atoi(string(policy.MaxReceiveCount))
		if err != nil { // AWS writes it as a number, some emulators as a string
			var s string
			require.NoError(t, json.Unmarshal(policy.MaxReceiveCount, &s))
			n, err = strconv.Atoi(s)
			require.NoError(t, err)
		}
		require.Equal(t, want, n, pair[0])
	}
}

// The batch publisher sends many batches at once; the emulator must keep
// every message, exactly once.
func TestSQSConcurrentBatchSendsLoseNothing(t *testing.T) {
	t.Parallel()
	const n = 2003
	c := stacktest.SQS(t)
	q := stacktest.NewQueue(t, "it-concurrent", 3, 60*time.Second)
	ctx := ctxFor(t, 2*time.Minute)

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for start := 0; start < n; start += 10 {
		g.Go(func() error {
			var entries []types.SendMessageBatchRequestEntry
			for i := start; i < min(start+10, n); i++ {
				entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(strconv.Itoa(i))})
			}
			out, err := c.SendMessageBatch(gctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.URL), Entries: entries})
			if err != nil {
				return err
			}
			if len(out.Failed) > 0 {
				return fmt.Errorf("%d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())

	seen := map[string]int{}
	for len(seen) < n {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
		require.NoError(t, err)
		require.NotEmpty(t, out.Messages, "the queue ran dry after %d of %d messages", len(seen), n)
		del := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			seen[aws.ToString(m.Body)]++
			del[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
		}
		res, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.URL), Entries: del})
		require.NoError(t, err)
		require.Empty(t, res.Failed)
	}
	for body, k := range seen {
		require.Equal(t, 1, k, "message %s received %d times", body, k)
	}
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Empty(t, out.Messages, "nothing beyond what was sent")
}
