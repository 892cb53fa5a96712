package jobloop

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// realtimePrefix marks the receipt handles of the first queue of a
// Prioritized inbox, so that settling routes each receipt to its queue
// without keeping a table of them.
const realtimePrefix = "first:"

// Queue is one queue of a Prioritized inbox; Name labels the loop's
// per-queue metrics (chatguard_worker_receives_total) and logs.
type Queue struct {
	Name  string
	Inbox pipeline.Inbox
}

// Prioritized is one inbox over two queues where the first always goes
// first. The job loop serves each queue on its own (see Loop.Run): its
// own pollers, each long-polling its queue and backing off on its own
// errors, all drawing on one pool of slots in which a waiting poller of
// the first queue takes the next free slot before any poller of the
// second. So an error on one queue (deleted, a lost permission,
// throttling) never stops the other, neither queue is short-polled, and a
// batch or sweep backlog never delays real time by more than one job. The
// worker puts review-realtime first and review second.
type Prioritized struct {
	first, second Queue
}

var _ pipeline.Inbox = (*Prioritized)(nil)

// NewPrioritized returns the inbox.
func NewPrioritized(first, second Queue) *Prioritized {
	return &Prioritized{first: first, second: second}
}

// firstQuickWait is how long Receive long-polls the first queue before it
// looks at the second.
const firstQuickWait = time.Second

// Receive implements pipeline.Receiver for callers other than the job
// loop, which receives each queue on its own lanes instead: it asks the
// first queue for up to a second and, when that has nothing or fails, the
// second without waiting. It fails only when both failed.
func (p *Prioritized) Receive(ctx context.Context, req pipeline.ReceiveRequest) ([]pipeline.Message, error) {
	freq := req
	freq.Wait = min(req.Wait, firstQuickWait)
	msgs, ferr := p.first.Inbox.Receive(ctx, freq)
	if ferr == nil && len(msgs) > 0 {
		markFirst(msgs)
		return msgs, nil
	}
	sreq := req
	sreq.Wait = 0
	msgs, serr := p.second.Inbox.Receive(ctx, sreq)
	if serr != nil && ferr != nil {
		return nil, errors.Join(ferr, serr)
	}
	return msgs, serr
}

// markFirst marks the receipts of first-queue messages for settling.
func markFirst(msgs []pipeline.Message) {
	for i := range msgs {
		msgs[i].ReceiptHandle = realtimePrefix + msgs[i].ReceiptHandle
	}
}

// lane is one queue the loop polls on its own: first lanes take free
// slots before the others and mark their receipts.
type lane struct {
	name  string
	q     pipeline.Receiver
	first bool
}

// lanes are the queues the loop polls: each of a Prioritized inbox's on
// its own, or the one queue of any other inbox.
func (l *Loop) lanes() []lane {
	if p, ok := l.q.(*Prioritized); ok {
		return []lane{{name: p.first.Name, q: p.first.Inbox, first: true}, {name: p.second.Name, q: p.second.Inbox}}
	}
	return []lane{{name: "queue", q: l.q}}
}

// lanePollers is how many pollers a lane gets out of the loop's pollers:
// a first lane of several gets half (at least one), since each of its
// pollers holds a slot while it long-polls an empty queue.
func lanePollers(ln lane, lanes, pollers int) int {
	if ln.first && lanes > 1 {
		return max(pollers/2, 1)
	}
	return pollers
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
	}{{p.first.Inbox, first, fi}, {p.second.Inbox, second, si}} {
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
