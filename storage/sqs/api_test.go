package sqs

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// scriptAPI is a scripted SQS API for the adapter's unit tests: it
// answers batch calls entry by entry as fail and callErr say, records what
// it was sent, and can hold calls (delay, block). It has no queue
// semantics; pipeline/queuetest.Fake is the queue fake.
type scriptAPI struct {
	// fail decides whether an entry fails, and whether as a sender
	// fault; key is the body (send) or receipt, seen how often that key
	// was sent before, this time included.
	fail func(op Op, key string, seen int) (fail, sender bool)
	// callErr, when it returns an error, fails the whole n-th call of op
	// (1-based) carrying keys.
	callErr func(op Op, n int, keys []string) error
	// omit drops an entry from the answer altogether (a malformed answer).
	omit func(op Op, key string, seen int) bool
	// delay holds every call; block holds calls until closed. Both honour
	// ctx.
	delay   time.Duration
	block   chan struct{}
	started chan Op // when set, told about every call as it starts
	receive func(in *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error)

	inFlight, maxSeen atomic.Int32

	mu       sync.Mutex
	calls    map[Op]int
	sizes    map[Op][]int
	seen     map[string]int
	accepted map[string]int // send body -> times accepted
	attrs    map[string]map[string]types.MessageAttributeValue
	vis      []int32
	urls     []string
}

func newScriptAPI() *scriptAPI {
	return &scriptAPI{calls: map[Op]int{}, sizes: map[Op][]int{}, seen: map[string]int{}, accepted: map[string]int{}, attrs: map[string]map[string]types.MessageAttributeValue{}}
}

func (a *scriptAPI) hold(ctx context.Context, op Op) error {
	n := a.inFlight.Add(1)
	defer a.inFlight.Add(-1)
	for {
		m := a.maxSeen.Load()
		if n <= m || a.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	if a.started != nil {
		a.started <- op
	}
	if a.delay > 0 {
		select {
		case <-time.After(a.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if a.block != nil {
		select {
		case <-a.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// answer records a batch call over keys and returns the ids that
// succeeded and the failed entries.
func (a *scriptAPI) answer(ctx context.Context, op Op, url string, keys []string, ids []*string) ([]string, []types.BatchResultErrorEntry, error) {
	if err := a.hold(ctx, op); err != nil {
		return nil, nil, err
	}
	if len(keys) > MaxBatch {
		return nil, nil, fmt.Errorf("too many entries: %d", len(keys))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls[op]++
	a.sizes[op] = append(a.sizes[op], len(keys))
	a.urls = append(a.urls, url)
	if a.callErr != nil {
		if err := a.callErr(op, a.calls[op], keys); err != nil {
			return nil, nil, err
		}
	}
	var ok []string
	var failed []types.BatchResultErrorEntry
	for i, k := range keys {
		a.seen[string(op)+k]++
		seen := a.seen[string(op)+k]
		if a.omit != nil && a.omit(op, k, seen) {
			continue
		}
		if a.fail != nil {
			if fail, sender := a.fail(op, k, seen); fail {
				code := "InternalError"
				if sender {
					code = "ReceiptHandleIsInvalid"
				}
				failed = append(failed, types.BatchResultErrorEntry{Id: ids[i], Code: aws.String(code), Message: aws.String("injected"), SenderFault: sender})
				continue
			}
		}
		ok = append(ok, aws.ToString(ids[i]))
	}
	return ok, failed, nil
}

func (a *scriptAPI) SendMessageBatch(ctx context.Context, in *awssqs.SendMessageBatchInput, _ ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error) {
	keys := make([]string, len(in.Entries))
	ids := make([]*string, len(in.Entries))
	for i, e := range in.Entries {
		keys[i], ids[i] = aws.ToString(e.MessageBody), e.Id
	}
	ok, failed, err := a.answer(ctx, OpSend, aws.ToString(in.QueueUrl), keys, ids)
	if err != nil {
		return nil, err
	}
	out := &awssqs.SendMessageBatchOutput{Failed: failed}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ok {
		for _, e := range in.Entries {
			if aws.ToString(e.Id) == id {
				a.accepted[aws.ToString(e.MessageBody)]++
				a.attrs[aws.ToString(e.MessageBody)] = e.MessageAttributes
			}
		}
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: aws.String(id), MessageId: aws.String("m-" + id)})
	}
	return out, nil
}

func (a *scriptAPI) DeleteMessageBatch(ctx context.Context, in *awssqs.DeleteMessageBatchInput, _ ...func(*awssqs.Options)) (*awssqs.DeleteMessageBatchOutput, error) {
	keys := make([]string, len(in.Entries))
	ids := make([]*string, len(in.Entries))
	for i, e := range in.Entries {
		keys[i], ids[i] = aws.ToString(e.ReceiptHandle), e.Id
	}
	ok, failed, err := a.answer(ctx, OpDelete, aws.ToString(in.QueueUrl), keys, ids)
	if err != nil {
		return nil, err
	}
	out := &awssqs.DeleteMessageBatchOutput{Failed: failed}
	for _, id := range ok {
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: aws.String(id)})
	}
	return out, nil
}

func (a *scriptAPI) ChangeMessageVisibilityBatch(ctx context.Context, in *awssqs.ChangeMessageVisibilityBatchInput, _ ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityBatchOutput, error) {
	keys := make([]string, len(in.Entries))
	ids := make([]*string, len(in.Entries))
	a.mu.Lock()
	for i, e := range in.Entries {
		keys[i], ids[i] = aws.ToString(e.ReceiptHandle), e.Id
		a.vis = append(a.vis, e.VisibilityTimeout)
	}
	a.mu.Unlock()
	ok, failed, err := a.answer(ctx, OpChangeVisibility, aws.ToString(in.QueueUrl), keys, ids)
	if err != nil {
		return nil, err
	}
	out := &awssqs.ChangeMessageVisibilityBatchOutput{Failed: failed}
	for _, id := range ok {
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: aws.String(id)})
	}
	return out, nil
}

func (a *scriptAPI) ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, _ ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	if err := a.hold(ctx, OpReceive); err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.calls[OpReceive]++
	a.mu.Unlock()
	if a.receive == nil {
		return &awssqs.ReceiveMessageOutput{}, nil
	}
	return a.receive(in)
}

func (a *scriptAPI) callCount(op Op) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[op]
}

func (a *scriptAPI) sortedSizes(op Op) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := slices.Clone(a.sizes[op])
	slices.Sort(s)
	return s
}

// waits records the backoff of every retry round instead of waiting, so
// that no test sleeps.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return context.Cause(ctx)
}

// record is the option that makes a queue or publisher wait on w.
func (w *waits) record() Option { return func(c *core) { c.sleep = w.sleep } }

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.d)
}
