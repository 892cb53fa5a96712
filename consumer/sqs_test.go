package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/consumer"
)

// batchAPI records batch calls; receipts named in failEntry fail as
// entries, and a batch holding callFail fails as a whole.
type batchAPI struct {
	mu        sync.Mutex
	sizes     []int
	vis       []int32
	failEntry map[string]bool
	callFail  string
}

func (a *batchAPI) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if in.MaxNumberOfMessages > 10 || in.WaitTimeSeconds != 20 || in.VisibilityTimeout != 300 {
		return nil, fmt.Errorf("unexpected input %+v", in)
	}
	return &sqs.ReceiveMessageOutput{Messages: []types.Message{{MessageId: aws.String("m1"), ReceiptHandle: aws.String("r1"), Body: aws.String(`{}`)}}}, nil
}

func (a *batchAPI) record(receipts []string) (failed []types.BatchResultErrorEntry, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sizes = append(a.sizes, len(receipts))
	for i, r := range receipts {
		if r == a.callFail {
			return nil, errors.New("connection reset")
		}
		if a.failEntry[r] {
			failed = append(failed, types.BatchResultErrorEntry{Id: aws.String(fmt.Sprint(i)), Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("stale")})
		}
	}
	return failed, nil
}

func (a *batchAPI) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	var rs []string
	for _, e := range in.Entries {
		rs = append(rs, aws.ToString(e.ReceiptHandle))
	}
	failed, err := a.record(rs)
	if err != nil {
		return nil, err
	}
	return &sqs.DeleteMessageBatchOutput{Failed: failed}, nil
}

func (a *batchAPI) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	var rs []string
	for _, e := range in.Entries {
		rs = append(rs, aws.ToString(e.ReceiptHandle))
		a.mu.Lock()
		a.vis = append(a.vis, e.VisibilityTimeout)
		a.mu.Unlock()
	}
	failed, err := a.record(rs)
	if err != nil {
		return nil, err
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{Failed: failed}, nil
}

func receipts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r%02d", i)
	}
	return out
}

func TestSQSQueueBatchesAndReportsFailedReceipts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		failEntry  map[string]bool
		callFail   string
		wantFailed []string
	}{
		{"all ok", nil, "", nil},
		{"entry failures map to their receipts", map[string]bool{"r03": true, "r17": true}, "", []string{"r03", "r17"}},
		{"a failed call fails its whole batch", nil, "r12", receipts(20)[10:20]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, op := range []string{"delete", "visibility"} {
				api := &batchAPI{failEntry: tc.failEntry, callFail: tc.callFail}
				q := consumer.NewSQSQueue(api, "http://q")
				var (
					failed []string
					err    error
				)
				if op == "delete" {
					failed, err = q.Delete(context.Background(), receipts(25))
				} else {
					failed, err = q.ChangeVisibility(context.Background(), receipts(25), 90*time.Second)
				}
				sort.Strings(failed)
				require.Equal(t, tc.wantFailed, failed, op)
				require.Equal(t, len(tc.wantFailed) > 0, err != nil, op)
				sort.Ints(api.sizes)
				require.Equal(t, []int{5, 10, 10}, api.sizes, "%s: ten entries a call", op)
				for _, v := range api.vis {
					require.Equal(t, int32(90), v)
				}
			}
		})
	}
}

func TestSQSQueueReceive(t *testing.T) {
	t.Parallel()
	q := consumer.NewSQSQueue(&batchAPI{}, "http://q")
	msgs, err := q.Receive(context.Background(), 50, 5*time.Minute)
	require.NoError(t, err)
	require.Equal(t, []consumer.Message{{ID: "m1", ReceiptHandle: "r1", Body: []byte(`{}`)}}, msgs)
}
