package sqsjob

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// fakeSQS is an in-memory standard queue with visibility timeouts, receive
// counts and a redrive policy, enough to exercise the loop without a
// server. Long polls are shortened to keep tests fast.
type fakeSQS struct {
	mu         sync.Mutex
	msgs       []*fakeMsg
	dlq        []types.Message
	maxReceive int
	seq        int

	receiveAsks   []int32
	receiveErrs   int // fail this many receives first
	deleteFaults  int // fail this many delete entries (server side) first
	visChanges    []visChange
	heartbeats    int
	deleteCalls   int
	deletedIDs    []string
	maxLongPollMs int
}

type fakeMsg struct {
	id, body, receipt string
	receives          int
	visibleAt         time.Time
	sentAt            time.Time
	deleted           bool
}

type visChange struct {
	id  string
	vis int32
}

func newFakeSQS(maxReceive int) *fakeSQS {
	return &fakeSQS{maxReceive: maxReceive, maxLongPollMs: 50}
}

func (f *fakeSQS) send(body string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	id := "msg-" + strconv.Itoa(f.seq)
	f.msgs = append(f.msgs, &fakeMsg{id: id, body: body, sentAt: time.Now()})
	return id
}

func (f *fakeSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	f.receiveAsks = append(f.receiveAsks, in.MaxNumberOfMessages)
	if f.receiveErrs > 0 {
		f.receiveErrs--
		f.mu.Unlock()
		return nil, errors.New("fake: receive unavailable")
	}
	f.mu.Unlock()
	deadline := time.Now().Add(min(time.Duration(in.WaitTimeSeconds)*time.Second, time.Duration(f.maxLongPollMs)*time.Millisecond))
	for {
		if out := f.take(in); len(out) > 0 {
			return &sqs.ReceiveMessageOutput{Messages: out}, nil
		}
		if time.Now().After(deadline) {
			return &sqs.ReceiveMessageOutput{}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (f *fakeSQS) take(in *sqs.ReceiveMessageInput) []types.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	var out []types.Message
	for _, m := range f.msgs {
		if len(out) >= int(in.MaxNumberOfMessages) {
			break
		}
		if m.deleted || m.visibleAt.After(now) {
			continue
		}
		if f.maxReceive > 0 && m.receives >= f.maxReceive {
			m.deleted = true
			f.dlq = append(f.dlq, types.Message{MessageId: aws.String(m.id), Body: aws.String(m.body)})
			continue
		}
		m.receives++
		f.seq++
		m.receipt = m.id + "#" + strconv.Itoa(f.seq)
		m.visibleAt = now.Add(time.Duration(in.VisibilityTimeout) * time.Second)
		out = append(out, types.Message{
			MessageId: aws.String(m.id), ReceiptHandle: aws.String(m.receipt), Body: aws.String(m.body),
			Attributes: map[string]string{
				"ApproximateReceiveCount": strconv.Itoa(m.receives),
				"SentTimestamp":           strconv.FormatInt(m.sentAt.UnixMilli(), 10),
			},
		})
	}
	return out
}

func (f *fakeSQS) byReceipt(r string) *fakeMsg {
	for _, m := range f.msgs {
		if m.receipt == r && !m.deleted {
			return m
		}
	}
	return nil
}

func (f *fakeSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleteCalls++
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		if f.deleteFaults > 0 {
			f.deleteFaults--
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), SenderFault: false})
			continue
		}
		m := f.byReceipt(aws.ToString(e.ReceiptHandle))
		if m == nil {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true})
			continue
		}
		m.deleted = true
		f.deletedIDs = append(f.deletedIDs, m.id)
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.byReceipt(aws.ToString(in.ReceiptHandle))
	if m == nil {
		return nil, errors.New("fake: ReceiptHandleIsInvalid")
	}
	m.visibleAt = time.Now().Add(time.Duration(in.VisibilityTimeout) * time.Second)
	f.visChanges = append(f.visChanges, visChange{id: m.id, vis: in.VisibilityTimeout})
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeats++
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		m := f.byReceipt(aws.ToString(e.ReceiptHandle))
		if m == nil {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true})
			continue
		}
		m.visibleAt = time.Now().Add(time.Duration(e.VisibilityTimeout) * time.Second)
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	id := "dlq-" + strconv.Itoa(f.seq)
	f.dlq = append(f.dlq, types.Message{MessageId: aws.String(id), Body: in.MessageBody, MessageAttributes: in.MessageAttributes})
	return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
}

func (f *fakeSQS) msg(id string) fakeMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.msgs {
		if m.id == id {
			return *m
		}
	}
	return fakeMsg{}
}

func (f *fakeSQS) snapshot() (dlq []types.Message, vis []visChange, asks []int32, heartbeats int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]types.Message(nil), f.dlq...), append([]visChange(nil), f.visChanges...), append([]int32(nil), f.receiveAsks...), f.heartbeats
}

func (f *fakeSQS) remaining() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.msgs {
		if !m.deleted {
			n++
		}
	}
	return n
}
