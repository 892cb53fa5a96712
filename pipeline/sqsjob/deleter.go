package sqsjob

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
)

// deleter batches deletes from concurrent jobs into DeleteMessageBatch
// calls of up to ten and retries entries that failed on the server's side.
// A job waits for its own entry's result, so a drained loop has no deletes
// left in flight.
type deleter struct {
	l   *Loop
	req chan delReq
}

type delReq struct {
	receipt string
	done    chan error
}

// flushers bounds concurrent DeleteMessageBatch calls.
const flushers = 4

func newDeleter(l *Loop) *deleter {
	return &deleter{l: l, req: make(chan delReq, l.cfg.Concurrency)}
}

// delete deletes one message; it returns when the batch carrying it has
// settled or ctx ends.
func (d *deleter) delete(ctx context.Context, receipt string) error {
	r := delReq{receipt: receipt, done: make(chan error, 1)}
	select {
	case d.req <- r:
	case <-ctx.Done():
		return fmt.Errorf("sqsjob: delete: %w", ctx.Err())
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("sqsjob: delete: %w", ctx.Err())
	}
}

// run collects requests into batches until ctx ends, then waits for the
// batches it started.
func (d *deleter) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, flushers)
	for {
		var first delReq
		select {
		case <-ctx.Done():
			return
		case first = <-d.req:
		}
		batch := []delReq{first}
		linger := time.NewTimer(d.l.cfg.DeleteLinger)
	collect:
		for len(batch) < 10 {
			select {
			case r := <-d.req:
				batch = append(batch, r)
			case <-linger.C:
				break collect
			}
		}
		linger.Stop()
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			d.flush(batch)
		}()
	}
}

// flush deletes the batch, retrying entries that failed without the
// sender's fault up to three times.
func (d *deleter) flush(batch []delReq) {
	pending := batch
	var lastErr error
	for attempt := 1; attempt <= 3 && len(pending) > 0; attempt++ {
		if attempt > 1 {
			time.Sleep(backoff(50*time.Millisecond, time.Second, attempt))
		}
		entries := make([]types.DeleteMessageBatchRequestEntry, len(pending))
		for i, r := range pending {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.receipt)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), d.l.cfg.CallTimeout)
		start := time.Now()
		out, err := d.l.api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(d.l.cfg.QueueURL), Entries: entries})
		cancel()
		d.l.m.callTime.WithLabelValues("delete").Observe(time.Since(start).Seconds())
		if err != nil {
			d.l.m.calls.WithLabelValues("delete", "error").Inc()
			lastErr = fmt.Errorf("sqsjob: delete batch: %w", err)
			continue
		}
		failed := map[string]types.BatchResultErrorEntry{}
		for _, f := range out.Failed {
			failed[aws.ToString(f.Id)] = f
		}
		if len(failed) == 0 {
			d.l.m.calls.WithLabelValues("delete", "ok").Inc()
		} else {
			d.l.m.calls.WithLabelValues("delete", "partial").Inc()
		}
		var retry []delReq
		for i, r := range pending {
			f, bad := failed[strconv.Itoa(i)]
			switch {
			case !bad:
				d.l.m.deleted.Inc()
				r.done <- nil
			case f.SenderFault:
				r.done <- fmt.Errorf("sqsjob: delete: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
			default:
				lastErr = fmt.Errorf("sqsjob: delete: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
				retry = append(retry, r)
			}
		}
		pending = retry
	}
	if lastErr == nil {
		lastErr = errors.New("sqsjob: delete: gave up")
	}
	for _, r := range pending {
		r.done <- lastErr
	}
}
