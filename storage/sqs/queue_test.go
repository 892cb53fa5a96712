package sqs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

func testQueue(t *testing.T, api API, mutate func(*Config), opts ...Option) (*Queue, *waits) {
	t.Helper()
	w := &waits{}
	cfg := DefaultConfig()
	cfg.Name, cfg.URL = "test", "http://q.local/test"
	if mutate != nil {
		mutate(&cfg)
	}
	q, err := New(api, cfg, append([]Option{w.record()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, q.Close(ctx))
	})
	return q, w
}

func receiptList(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r%02d", i)
	}
	return out
}

// failedKeys returns the receipts whose entries failed, sorted.
func failedKeys(keys []string, err error) []string {
	var out []string
	for i, e := range pipeline.EntryErrors(err, len(keys)) {
		if e != nil {
			out = append(out, keys[i])
		}
	}
	slices.Sort(out)
	return out
}

func TestBatchesOfTenReportFailedEntries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		fail       func(op Op, key string, seen int) (bool, bool)
		callErr    func(op Op, n int, keys []string) error
		wantFailed []string
		wantSizes  []int
		wantErr    string
	}{
		{name: "all ok", wantSizes: []int{5, 10, 10}},
		{
			name:       "sender faults are reported and not retried",
			fail:       func(_ Op, k string, _ int) (bool, bool) { return k == "r03" || k == "r17", true },
			wantFailed: []string{"r03", "r17"}, wantSizes: []int{5, 10, 10}, wantErr: "ReceiptHandleIsInvalid",
		},
		{
			name:      "other entry failures are retried alone",
			fail:      func(_ Op, k string, seen int) (bool, bool) { return (k == "r03" || k == "r17") && seen == 1, false },
			wantSizes: []int{1, 1, 5, 10, 10},
		},
		{
			name: "a call that keeps failing fails its batch after the last attempt",
			callErr: func(_ Op, _ int, keys []string) error {
				if slices.Contains(keys, "r12") {
					return errors.New("connection reset")
				}
				return nil
			},
			wantFailed: receiptList(20)[10:20], wantSizes: []int{5, 10, 10, 10, 10}, wantErr: "after 3 attempts",
		},
		{
			name: "a call that is the sender's fault is not retried",
			callErr: func(_ Op, _ int, keys []string) error {
				if slices.Contains(keys, "r12") {
					return &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue", Message: "no queue", Fault: smithy.FaultClient}
				}
				return nil
			},
			wantFailed: receiptList(20)[10:20], wantSizes: []int{5, 10, 10}, wantErr: "NonExistentQueue",
		},
		{
			name: "throttling is retried",
			callErr: func(_ Op, _ int, keys []string) error {
				return &smithy.GenericAPIError{Code: "RequestThrottled", Message: "slow down", Fault: smithy.FaultClient}
			},
			wantFailed: receiptList(25), wantSizes: []int{5, 5, 5, 10, 10, 10, 10, 10, 10}, wantErr: "after 3 attempts",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, op := range []Op{OpDelete, OpChangeVisibility} {
				api := newScriptAPI()
				api.fail, api.callErr = tc.fail, tc.callErr
				q, _ := testQueue(t, api, nil)
				keys := receiptList(25)
				var err error
				if op == OpDelete {
					err = q.Delete(context.Background(), keys)
				} else {
					err = q.ChangeVisibility(context.Background(), keys, 90*time.Second)
				}
				require.Equal(t, tc.wantFailed, failedKeys(keys, err), op)
				if tc.wantErr != "" {
					var be *pipeline.BatchError
					require.ErrorAs(t, err, &be, op)
					require.ErrorContains(t, err, tc.wantErr, op)
				} else {
					require.NoError(t, err, op)
				}
				require.Equal(t, tc.wantSizes, api.sortedSizes(op), "%s: ten entries a call", op)
				for _, v := range api.vis {
					require.Equal(t, int32(90), v)
				}
			}
		})
	}
}

func TestRetryRoundsBackOffWithThePolicy(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	api.fail = func(_ Op, k string, seen int) (bool, bool) { return k == "r00" && seen <= 3, false }
	pol := retry.Policy{Initial: 100 * time.Millisecond, Max: 300 * time.Millisecond, Attempts: 5}
	q, w := testQueue(t, api, func(c *Config) { c.Retry = pol })
	require.NoError(t, q.Delete(context.Background(), []string{"r00", "r01"}))
	require.Equal(t, []int{1, 1, 1, 2}, api.sortedSizes(OpDelete), "only the failed entry is retried")
	got := w.all()
	require.Len(t, got, 3)
	for i, d := range got {
		require.LessOrEqual(t, d, pol.Ceiling(i+1), "wait %d", i+1)
	}
}

func TestAbortDuringBackoffReportsTheCause(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	api.callErr = func(Op, int, []string) error { return errors.New("connection refused") }
	waiting := make(chan struct{}, 1)
	// A wait that lasts until its context ends, like a long backoff.
	longBackoff := func(c *core) {
		c.sleep = func(ctx context.Context, _ time.Duration) error {
			waiting <- struct{}{}
			<-ctx.Done()
			return context.Cause(ctx)
		}
	}
	q, _ := testQueue(t, api, func(c *Config) { c.Retry.Attempts = 100 }, longBackoff)
	res := make(chan error, 1)
	go func() { res <- q.Delete(context.Background(), []string{"r1"}) }()
	<-waiting
	stop := errors.New("drain deadline")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(stop)
	require.Error(t, q.Close(ctx))
	err := pipeline.EntryErrors(<-res, 1)[0]
	require.ErrorIs(t, err, stop)
	require.ErrorContains(t, err, "connection refused", "the last failure is kept")
	require.Equal(t, 1, api.callCount(OpDelete), "no call after the wait was cut short")
}

func TestMissingEntriesAreRetried(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	api.omit = func(_ Op, k string, seen int) bool { return k == "r01" && seen == 1 }
	q, _ := testQueue(t, api, nil)
	require.NoError(t, q.Delete(context.Background(), []string{"r00", "r01"}))
	require.Equal(t, []int{1, 2}, api.sortedSizes(OpDelete))
}

func TestLingerSharesCallsBetweenCallers(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	api.block = make(chan struct{})
	api.started = make(chan Op, 100)
	q, _ := testQueue(t, api, func(c *Config) { c.Linger = 5 * time.Millisecond; c.Concurrency = 1 })
	var wg sync.WaitGroup
	errs := make([]error, 40)
	wg.Go(func() { errs[0] = q.Delete(context.Background(), []string{"r00"}) })
	<-api.started // the first delete is on the wire, holding the one call slot
	for i := 1; i < 40; i++ {
		wg.Go(func() { errs[i] = q.Delete(context.Background(), []string{fmt.Sprintf("r%02d", i)}) })
	}
	close(api.block)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	sizes := api.sortedSizes(OpDelete)
	require.Less(t, len(sizes), 40, "deletes of concurrent callers share calls: %v", sizes)
	require.LessOrEqual(t, sizes[len(sizes)-1], MaxBatch)
	require.Greater(t, sizes[len(sizes)-1], 1)
}

func TestVisibilityIsWholeSecondsRoundedUp(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	q, _ := testQueue(t, api, nil)
	for _, d := range []time.Duration{0, time.Millisecond, 1500 * time.Millisecond, 24 * time.Hour} {
		require.NoError(t, q.ChangeVisibility(context.Background(), []string{"r"}, d))
	}
	require.Equal(t, []int32{0, 1, 2, 43200}, api.vis)
}

func TestSendMapsMessagesAndAttributes(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	q, _ := testQueue(t, api, nil)
	var msgs []pipeline.OutMessage
	for i := range 23 {
		msgs = append(msgs, pipeline.OutMessage{Body: fmt.Appendf(nil, "body-%d", i), Attributes: map[string]pipeline.Attribute{
			"run_id": pipeline.StringAttribute("r"), "n": pipeline.NumberAttribute(int64(i)),
		}})
	}
	require.NoError(t, q.Send(context.Background(), msgs))
	require.Equal(t, []int{3, 10, 10}, api.sortedSizes(OpSend))
	require.Len(t, api.accepted, 23)
	a := api.attrs["body-7"]
	require.Equal(t, "String", aws.ToString(a["run_id"].DataType))
	require.Equal(t, "r", aws.ToString(a["run_id"].StringValue))
	require.Equal(t, "Number", aws.ToString(a["n"].DataType))
	require.Equal(t, "7", aws.ToString(a["n"].StringValue))
	require.Equal(t, []string{"http://q.local/test", "http://q.local/test", "http://q.local/test"}, api.urls)
}

func TestSendKeepsCallsUnderTheSizeLimit(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	q, _ := testQueue(t, api, nil)
	big := strings.Repeat("x", 100<<10)
	msgs := []pipeline.OutMessage{
		{Body: []byte("a" + big)}, {Body: []byte("b" + big)}, {Body: []byte(strings.Repeat("y", MaxMessageBytes+1))}, {Body: []byte("c" + big)},
	}
	err := q.Send(context.Background(), msgs)
	errs := pipeline.EntryErrors(err, len(msgs))
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], ErrTooLarge, "too large alone, never sent")
	require.ErrorAs(t, errs[2], new(*pipeline.PermanentError), "resending cannot make it smaller")
	require.NoError(t, errs[3])
	require.Equal(t, []int{1, 2}, api.sortedSizes(OpSend), "two of 100 KiB fit a call, three do not")
	require.Len(t, api.accepted, 3)
}

func TestReceiveAsksForWhatTheEnginesNeed(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	sent := time.Date(2026, 11, 3, 4, 5, 6, 789e6, time.UTC)
	api.receive = func(in *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		if in.MaxNumberOfMessages != 7 || in.WaitTimeSeconds != 20 || in.VisibilityTimeout != 300 ||
			aws.ToString(in.QueueUrl) != "http://q.local/test" || !slices.Equal(in.MessageAttributeNames, []string{"All"}) ||
			!slices.Contains(in.MessageSystemAttributeNames, types.MessageSystemAttributeNameApproximateReceiveCount) ||
			!slices.Contains(in.MessageSystemAttributeNames, types.MessageSystemAttributeNameSentTimestamp) {
			return nil, fmt.Errorf("unexpected input %+v", in)
		}
		return &awssqs.ReceiveMessageOutput{Messages: []types.Message{
			{MessageId: aws.String("m1"), ReceiptHandle: aws.String("r1"), Body: aws.String(`{}`), Attributes: map[string]string{
				"ApproximateReceiveCount": "3", "SentTimestamp": fmt.Sprint(sent.UnixMilli()),
			}, MessageAttributes: map[string]types.MessageAttributeValue{
				"n": {DataType: aws.String("Number.int"), StringValue: aws.String("4")},
				"s": {DataType: aws.String("String"), StringValue: aws.String("v")},
				"b": {DataType: aws.String("Binary"), BinaryValue: []byte{1}},
			}},
			{MessageId: aws.String("m2"), ReceiptHandle: aws.String("r2"), Body: aws.String(`x`)},
		}}, nil
	}
	q, _ := testQueue(t, api, nil)
	msgs, err := q.Receive(context.Background(), pipeline.ReceiveRequest{Max: 7, Wait: 20 * time.Second, Visibility: 5 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, []pipeline.Message{
		{ID: "m1", ReceiptHandle: "r1", Body: []byte(`{}`), ReceiveCount: 3, SentAt: sent, Attributes: map[string]pipeline.Attribute{
			"n": pipeline.NumberAttribute(4), "s": pipeline.StringAttribute("v"),
		}},
		{ID: "m2", ReceiptHandle: "r2", Body: []byte(`x`), ReceiveCount: 1},
	}, msgs)
	for _, n := range []int{0, 11} {
		_, err := q.Receive(context.Background(), pipeline.ReceiveRequest{Max: n})
		require.ErrorContains(t, err, "within 1..10")
	}
	require.Equal(t, 1, api.callCount(OpReceive), "a bad request makes no call")
}

func TestReceiveErrorsNameTheCause(t *testing.T) {
	t.Parallel()
	api := newScriptAPI()
	api.receive = func(*awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
		return nil, errors.New("connection refused")
	}
	q, _ := testQueue(t, api, nil)
	_, err := q.Receive(context.Background(), pipeline.ReceiveRequest{Max: 1})
	require.ErrorContains(t, err, "sqs: test: receive: connection refused")

	api.block = make(chan struct{})
	stop := errors.New("draining")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(stop)
	_, err = q.Receive(ctx, pipeline.ReceiveRequest{Max: 1})
	require.ErrorIs(t, err, stop)
}

func TestCloseFinishesCallsAndRefusesMore(t *testing.T) {
	t.Parallel()
	t.Run("drains", func(t *testing.T) {
		t.Parallel()
		api := newScriptAPI()
		api.delay = 5 * time.Millisecond
		q, err := New(api, func() Config { c := DefaultConfig(); c.URL = "q"; return c }())
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- q.Delete(context.Background(), receiptList(30)) }()
		require.NoError(t, <-done)
		require.NoError(t, q.Close(context.Background()))
		require.ErrorIs(t, q.Delete(context.Background(), []string{"r"}), ErrClosed)
		require.ErrorIs(t, q.Send(context.Background(), []pipeline.OutMessage{{Body: []byte("x")}}), ErrClosed)
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		api := newScriptAPI()
		api.block = make(chan struct{}) // never released: only the abort ends the call
		api.started = make(chan Op, 1)
		q, err := New(api, func() Config { c := DefaultConfig(); c.URL = "q"; return c }())
		require.NoError(t, err)
		res := make(chan error, 1)
		go func() { res <- q.Delete(context.Background(), []string{"r"}) }()
		<-api.started
		ctx, cancel := context.WithCancelCause(context.Background())
		stop := errors.New("drain deadline")
		cancel(stop)
		require.ErrorIs(t, q.Close(ctx), context.Canceled)
		err = <-res
		require.ErrorIs(t, pipeline.EntryErrors(err, 1)[0], stop, "the entry fails with the cause")
	})
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	err := Config{Name: "review", BatchSize: 11, Linger: -1, Retry: retry.Policy{Initial: time.Second}}.Validate()
	for _, w := range []string{"review queue url is required", "batch size 11", "concurrency 0", "max attempts 0", "backoff", "linger", "call timeout"} {
		require.ErrorContains(t, err, w)
	}
	c := DefaultConfig()
	c.URL = "q"
	require.NoError(t, c.Validate())
	_, err = New(newScriptAPI(), Config{Name: "feedback"})
	require.ErrorContains(t, err, "sqs: feedback: feedback queue url is required")
}
