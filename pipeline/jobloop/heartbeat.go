package jobloop

import (
	"context"
	"sync"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// heartbeatGroup is how many jobs one visibility change extends (one SQS
// batch call); only their locks are held during the call.
const heartbeatGroup = 10

// heartbeat keeps in-flight jobs invisible: one goroutine, one
// ChangeVisibility per ten jobs whose visibility ends within two
// intervals, instead of a timer and a call per job.
type heartbeat struct {
	l    *Loop
	mu   sync.Mutex
	jobs map[*job]struct{}
}

func newHeartbeat(l *Loop) *heartbeat { return &heartbeat{l: l, jobs: map[*job]struct{}{}} }

func (h *heartbeat) add(j *job) {
	h.mu.Lock()
	h.jobs[j] = struct{}{}
	h.mu.Unlock()
}

// remove ends a job's heartbeats. It waits for an extension of this job
// that is already on the wire, so the caller's next visibility change
// (backoff, hand-back) is the last one.
func (h *heartbeat) remove(j *job) {
	j.mu.Lock()
	j.ended = true
	j.mu.Unlock()
	h.mu.Lock()
	delete(h.jobs, j)
	h.mu.Unlock()
}

func (h *heartbeat) size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.jobs)
}

// run extends visibilities every interval until ctx ends. It keeps a
// ticker's schedule with a timer set again after each beat, so that a test
// on a fake clock sees a beat end when the next one waits.
func (h *heartbeat) run(ctx context.Context) {
	every := h.l.cfg.HeartbeatInterval
	due := h.l.clk.Now().Add(every)
	next := h.l.clk.NewTimer(every)
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-next.Chan():
			h.beat(ctx)
			var wait time.Duration
			due, wait = nextBeat(due, h.l.clk.Now(), every)
			next.Reset(wait)
		}
	}
}

// nextBeat is when the beat after the one due at due comes, as a ticker
// of period every would give it, and how long until then from now: the
// next boundary of the schedule; at once when a slow beat overran it (a
// ticker's one buffered tick), the boundaries passed meanwhile dropped.
func nextBeat(due, now time.Time, every time.Duration) (time.Time, time.Duration) {
	due = due.Add(every)
	if due.After(now) {
		return due, due.Sub(now)
	}
	for !due.Add(every).After(now) {
		due = due.Add(every)
	}
	return due, 0
}

// beat extends every job whose visibility ends within two intervals, and
// cancels those whose visibility has ended or, after a failed extension,
// ends before the next beat (see lost).
func (h *heartbeat) beat(ctx context.Context) {
	now := h.l.clk.Now()
	horizon := now.Add(2 * h.l.cfg.HeartbeatInterval)
	h.mu.Lock()
	var due []*job
	for j := range h.jobs {
		// Past its end the lease may already be another pod's; short of
		// it, an extension is tried first (a late beat is not a failure).
		if !j.deadline.After(now) {
			h.loseLocked(j)
			continue
		}
		if !j.deadline.After(horizon) {
			due = append(due, j)
		}
	}
	h.mu.Unlock()
	for len(due) > 0 {
		n := min(heartbeatGroup, len(due))
		h.extend(ctx, due[:n])
		due = due[n:]
	}
}

func (h *heartbeat) extend(ctx context.Context, batch []*job) {
	live := batch[:0:0]
	for _, j := range batch {
		j.mu.Lock()
		if j.ended {
			j.mu.Unlock()
			continue
		}
		live = append(live, j)
	}
	defer func() {
		for _, j := range live {
			j.mu.Unlock()
		}
	}()
	if len(live) == 0 {
		return
	}
	vis := h.l.cfg.VisibilityTimeout
	receipts := make([]string, len(live))
	for i, j := range live {
		receipts[i] = j.msg.ReceiptHandle
	}
	cctx, cancel := context.WithTimeout(ctx, h.l.cfg.CallTimeout)
	defer cancel()
	sent := h.l.clk.Now()
	err := h.l.q.ChangeVisibility(cctx, receipts, vis)
	h.l.m.callTime.WithLabelValues("heartbeat").Observe(h.l.clk.Since(sent).Seconds())
	h.l.m.calls.WithLabelValues("heartbeat", outcome(err, len(live))).Inc()
	errs := pipeline.EntryErrors(err, len(live))
	if err != nil {
		h.l.log.Warn("jobloop: heartbeat failed for some jobs; retrying next interval", "jobs", len(live), "err", err)
	}
	h.mu.Lock()
	now := h.l.clk.Now()
	for i, j := range live {
		if errs[i] == nil {
			j.deadline = sent.Add(vis)
			h.l.m.extended.Inc()
		} else if h.lost(j, now) {
			h.loseLocked(j)
		}
	}
	h.mu.Unlock()
}

// lost reports whether a job's visibility ends before the next beat could
// extend it: the job must stop now, while its lease still holds, rather
// than call a model after another pod may have received the message.
// Called with h.mu held.
func (h *heartbeat) lost(j *job, now time.Time) bool {
	return !j.deadline.After(now.Add(h.l.cfg.HeartbeatInterval))
}

// loseLocked cancels a job whose lease cannot be kept and stops beating for
// it. Called with h.mu held.
func (h *heartbeat) loseLocked(j *job) {
	delete(h.jobs, j)
	h.l.m.leaseLost.Inc()
	h.l.log.Warn("jobloop: lease lost; cancelling the job and leaving its message alone", "message_id", j.msg.ID, "visibility_ends", j.deadline.UTC().Format(time.RFC3339))
	j.lose(ErrLeaseLost)
}
