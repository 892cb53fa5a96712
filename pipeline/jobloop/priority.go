package jobloop

import (
	"context"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// realtimePrefix marks the receipt handles of the first queue of a
// Prioritized inbox, so that settling routes each receipt to its queue
// without keeping a table of them.
const realtimePrefix = "first:"

// DefaultFirstWait is how long Prioritized long-polls its first queue
// before it looks at the second: the most a first-queue message waits
// while the second queue keeps the poller busy.
const DefaultFirstWait = time.Second

// Prioritized is one inbox over two queues where the first always goes
// first: every receive long-polls the first queue for up to firstWait and
// only when it has nothing asks the second, without waiting (when both are
// empty a poller cycles every firstWait). The
// worker puts review-realtime first and review second, so a batch or sweep
// backlog never delays real time.
type Prioritized struct {
	first, second pipeline.Inbox
	firstWait     time.Duration
}

var _ pipeline.Inbox = (*Prioritized)(nil)

// NewPrioritized returns the inbox; a firstWait of zero or less takes
// DefaultFirstWait.
func NewPrioritized(first, second pipeline.Inbox, firstWait time.Duration) *Prioritized {
	if firstWait <= 0 {
		firstWait = DefaultFirstWait
	}
	return &Prioritized{first: first, second: second, firstWait: firstWait}
}

// Receive implements pipeline.Receiver.
func (p *Prioritized) Receive(ctx context.Context, req pipeline.ReceiveRequest) ([]pipeline.Message, error) {
	freq := req
	freq.Wait = min(req.Wait, p.firstWait)
	msgs, err := p.first.Receive(ctx, freq)
	if err != nil || len(msgs) > 0 {
		for i := range msgs {
			msgs[i].ReceiptHandle = realtimePrefix + msgs[i].ReceiptHandle
		}
		return msgs, err
	}
	// The first queue's long poll was this receive's wait: a long poll of
	// the second would keep a first-queue message waiting behind it.
	sreq := req
	sreq.Wait = 0
	return p.second.Receive(ctx, sreq)
}

// split routes receipts to their queues, keeping each one's position.
func split(receipts []string) (first, second []string, firstIdx, secondIdx []int) {
	for i, r := range receipts {
		if h, ok := strings.CutPrefix(r, realtimePrefix); ok {
			first, firstIdx = append(first, h), append(firstIdx, i)
		} else {
			second, secondIdx = append(second, r), append(secondIdx, i)
		}
	}
	return first, second, firstIdx, secondIdx
}

// settle runs op on each queue's receipts and joins the results back into
// one answer in the callers' order, as pipeline.Acker reports them.
func (p *Prioritized) settle(receipts []string, op func(q pipeline.Inbox, rs []string) error) error {
	first, second, fi, si := split(receipts)
	errs := make([]error, len(receipts))
	failed := false
	for _, part := range []struct {
		q   pipeline.Inbox
		rs  []string
		idx []int
	}{{p.first, first, fi}, {p.second, second, si}} {
		if len(part.rs) == 0 {
			continue
		}
		for j, err := range pipeline.EntryErrors(op(part.q, part.rs), len(part.rs)) {
			errs[part.idx[j]] = err
			failed = failed || err != nil
		}
	}
	if !failed {
		return nil
	}
	if len(receipts) == 1 {
		return errs[0]
	}
	return &pipeline.BatchError{Errs: errs}
}

// Delete implements pipeline.Acker.
func (p *Prioritized) Delete(ctx context.Context, receipts []string) error {
	return p.settle(receipts, func(q pipeline.Inbox, rs []string) error { return q.Delete(ctx, rs) })
}

// ChangeVisibility implements pipeline.Acker.
func (p *Prioritized) ChangeVisibility(ctx context.Context, receipts []string, visibility time.Duration) error {
	return p.settle(receipts, func(q pipeline.Inbox, rs []string) error { return q.ChangeVisibility(ctx, rs, visibility) })
}
