package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"
)

// SQSAPI is the part of the SQS client the queue adapter uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// SQSQueue is the "feedback" queue over SQS. Batch calls go out ten
// entries at a time, a few calls in parallel.
type SQSQueue struct {
	client SQSAPI
	url    string
	// WaitTime is the long-poll wait of Receive (SQS allows up to 20 s).
	WaitTime time.Duration
}

var _ Queue = (*SQSQueue)(nil)

// NewSQSQueue returns the queue at url, long-polling 20 s.
func NewSQSQueue(client SQSAPI, url string) *SQSQueue {
	return &SQSQueue{client: client, url: url, WaitTime: 20 * time.Second}
}

// Receive long-polls for up to max (at most 10) messages and hides them for
// visibility. It returns ctx's error when ctx ends during the poll.
func (q *SQSQueue) Receive(ctx context.Context, max int, visibility time.Duration) ([]Message, error) {
	out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(q.url),
		MaxNumberOfMessages: int32(min(max, 10)),
		WaitTimeSeconds:     int32(q.WaitTime / time.Second),
		VisibilityTimeout:   int32(visibility / time.Second),
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("sqs: receive: %w", err)
	}
	msgs := make([]Message, 0, len(out.Messages))
	for _, m := range out.Messages {
		msgs = append(msgs, Message{ID: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: []byte(aws.ToString(m.Body))})
	}
	return msgs, nil
}

// Delete deletes the messages of receipts with DeleteMessageBatch. It
// returns the receipts whose deletion failed (entry failures and failed
// calls alike); err joins the causes.
func (q *SQSQueue) Delete(ctx context.Context, receipts []string) ([]string, error) {
	return q.batches(ctx, receipts, func(ctx context.Context, chunk []string) ([]string, error) {
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, r := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r)}
		}
		out, err := q.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
		if err != nil {
			return chunk, fmt.Errorf("sqs: delete batch: %w", err)
		}
		return failedEntries(chunk, out.Failed, "delete")
	})
}

// ChangeVisibility sets the visibility timeout of the messages of receipts
// (0 hands them back at once). It returns the receipts that failed.
func (q *SQSQueue) ChangeVisibility(ctx context.Context, receipts []string, visibility time.Duration) ([]string, error) {
	return q.batches(ctx, receipts, func(ctx context.Context, chunk []string) ([]string, error) {
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, r := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r), VisibilityTimeout: int32(visibility / time.Second)}
		}
		out, err := q.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
		if err != nil {
			return chunk, fmt.Errorf("sqs: change visibility batch: %w", err)
		}
		return failedEntries(chunk, out.Failed, "change visibility")
	})
}

func failedEntries(chunk []string, failed []types.BatchResultErrorEntry, op string) ([]string, error) {
	if len(failed) == 0 {
		return nil, nil
	}
	var (
		out  []string
		errs []error
	)
	for _, f := range failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(chunk) {
			continue
		}
		out = append(out, chunk[i])
		errs = append(errs, fmt.Errorf("sqs: %s entry: %s: %s", op, aws.ToString(f.Code), aws.ToString(f.Message)))
	}
	return out, errors.Join(errs...)
}

// batches runs call over chunks of ten receipts, four calls at a time, and
// gathers the failed receipts and errors of all of them.
func (q *SQSQueue) batches(ctx context.Context, receipts []string, call func(context.Context, []string) ([]string, error)) ([]string, error) {
	var (
		mu     sync.Mutex
		failed []string
		errs   []error
		g      errgroup.Group
	)
	g.SetLimit(4)
	for start := 0; start < len(receipts); start += 10 {
		chunk := receipts[start:min(start+10, len(receipts))]
		g.Go(func() error {
			f, err := call(ctx, chunk)
			mu.Lock()
			defer mu.Unlock()
			failed = append(failed, f...)
			if err != nil {
				errs = append(errs, err)
			}
			return nil
		})
	}
	_ = g.Wait()
	return failed, errors.Join(errs...)
}
