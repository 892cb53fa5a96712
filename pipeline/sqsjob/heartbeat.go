package sqsjob

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// heartbeat keeps in-flight jobs invisible: one goroutine, one batched
// ChangeMessageVisibilityBatch per ten jobs whose visibility ends within two
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

// run extends visibilities every interval until ctx ends.
func (h *heartbeat) run(ctx context.Context) {
	t := time.NewTicker(h.l.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.beat(ctx)
		}
	}
}

// beat extends every job whose visibility ends within two intervals.
func (h *heartbeat) beat(ctx context.Context) {
	now := h.l.now()
	horizon := now.Add(2 * h.l.cfg.HeartbeatInterval)
	h.mu.Lock()
	var due []*job
	for j := range h.jobs {
		if !j.deadline.After(horizon) {
			due = append(due, j)
		}
	}
	h.mu.Unlock()
	for len(due) > 0 {
		n := min(10, len(due))
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
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(live))
	for i, j := range live {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(j.msg.ReceiptHandle), VisibilityTimeout: int32(vis / time.Second),
		}
	}
	cctx, cancel := context.WithTimeout(ctx, h.l.cfg.CallTimeout)
	defer cancel()
	sent := h.l.now()
	out, err := h.l.api.ChangeMessageVisibilityBatch(cctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(h.l.cfg.QueueURL), Entries: entries})
	h.l.m.callTime.WithLabelValues("heartbeat").Observe(h.l.now().Sub(sent).Seconds())
	if err != nil {
		h.l.m.calls.WithLabelValues("heartbeat", "error").Inc()
		h.l.log.Warn("sqsjob: heartbeat failed; retrying next interval", "jobs", len(live), "err", err)
		return
	}
	failed := map[string]bool{}
	for _, f := range out.Failed {
		failed[aws.ToString(f.Id)] = true
	}
	outcome := "ok"
	if len(failed) > 0 {
		outcome = "partial"
	}
	h.l.m.calls.WithLabelValues("heartbeat", outcome).Inc()
	h.mu.Lock()
	for i, j := range live {
		if !failed[strconv.Itoa(i)] {
			j.deadline = sent.Add(vis)
			h.l.m.extended.Inc()
		}
	}
	h.mu.Unlock()
}
