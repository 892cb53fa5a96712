package demo

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// queuePair is a queue with its dead-letter queue, created for one run so
// that leftovers of tests on a shared stack never mix in.
type queuePair struct {
	Name, URL, DLQURL string
}

// Depth is what a queue holds: visible, in flight (received, not yet
// deleted) and delayed messages, as SQS approximates them.
type Depth struct {
	Visible, InFlight, Delayed int
}

// Total is every message the queue still holds.
func (d Depth) Total() int { return d.Visible + d.InFlight + d.Delayed }

func (d Depth) String() string {
	return fmt.Sprintf("%d waiting, %d in flight", d.Visible+d.Delayed, d.InFlight)
}

// createQueuePair creates name and name-dlq with a redrive policy after
// maxReceive receives.
func createQueuePair(ctx context.Context, c *sqs.Client, name string, maxReceive int) (queuePair, error) {
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		return queuePair{}, fmt.Errorf("create queue %s-dlq: %w", name, err)
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return queuePair{}, fmt.Errorf("queue %s-dlq arn: %w", name, err)
	}
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String(name),
		Attributes: map[string]string{
			"VisibilityTimeout": "60",
			"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`,
				attrs.Attributes[string(types.QueueAttributeNameQueueArn)], maxReceive),
		},
	})
	if err != nil {
		return queuePair{}, fmt.Errorf("create queue %s: %w", name, err)
	}
	return queuePair{Name: name, URL: aws.ToString(q.QueueUrl), DLQURL: aws.ToString(dlq.QueueUrl)}, nil
}

// deleteQueuePair deletes both queues and returns the first error.
func deleteQueuePair(ctx context.Context, c *sqs.Client, q queuePair) error {
	var first error
	for _, u := range []string{q.URL, q.DLQURL} {
		if u == "" {
			continue
		}
		if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil && first == nil {
			first = fmt.Errorf("delete queue %s: %w", u, err)
		}
	}
	return first
}

// depth reads a queue's approximate counts.
func depth(ctx context.Context, c *sqs.Client, url string) (Depth, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return Depth{}, fmt.Errorf("queue depth: %w", err)
	}
	n := func(k types.QueueAttributeName) int {
		v, _ := strconv.Atoi(out.Attributes[string(k)])
		return v
	}
	return Depth{
		Visible:  n(types.QueueAttributeNameApproximateNumberOfMessages),
		InFlight: n(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible),
		Delayed:  n(types.QueueAttributeNameApproximateNumberOfMessagesDelayed),
	}, nil
}
