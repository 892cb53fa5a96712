package jobloop

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
)

// slowInbox adds a fixed round trip to every receive, as SQS has.
type slowInbox struct {
	*queuetest.Fake
	rtt time.Duration
}

func (s slowInbox) Receive(ctx context.Context, req pipeline.ReceiveRequest) ([]pipeline.Message, error) {
	t := time.NewTimer(s.rtt)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Fake.Receive(ctx, req)
}

// BenchmarkSlotOccupancy measures whether the worker's slots stay full, at
// the loop alone: concurrency 256, jobs of 200 ms, a queue that always has
// messages and answers a receive after rtt. It reports the share of slots
// running a job, averaged over the run, without and with prefetch.
//
//	go test -run '^$' -bench SlotOccupancy -benchtime 1x ./pipeline/jobloop/
func BenchmarkSlotOccupancy(b *testing.B) {
	const conc, job, run = 256, 200 * time.Millisecond, 3 * time.Second
	for _, rtt := range []time.Duration{5 * time.Millisecond, 20 * time.Millisecond} {
		for _, pf := range []int{0, 32} {
			b.Run(fmt.Sprintf("rtt=%s/prefetch=%d", rtt, pf), func(b *testing.B) {
				for b.Loop() {
					q := queuetest.NewFake(queuetest.Config{})
					for range 20000 {
						q.Enqueue([]byte(`{}`))
					}
					var running atomic.Int64
					h := HandlerFunc(func(ctx context.Context, _ Message) Outcome {
						running.Add(1)
						defer running.Add(-1)
						t := time.NewTimer(job)
						defer t.Stop()
						select {
						case <-t.C:
						case <-ctx.Done():
						}
						return Outcome{Action: Delete, Label: "done"}
					})
					cfg := DefaultConfig()
					cfg.Concurrency, cfg.Prefetch = conc, pf
					l, err := New(cfg, slowInbox{q, rtt}, queuetest.NewFake(queuetest.Config{}), h, nil, NewMetrics(prometheus.NewRegistry()), nil)
					if err != nil {
						b.Fatal(err)
					}
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() { done <- l.Run(ctx) }()
					time.Sleep(time.Second) // fill up
					sum, n := 0.0, 0
					for end := time.Now().Add(run); time.Now().Before(end); n++ {
						sum += float64(running.Load())
						time.Sleep(5 * time.Millisecond)
					}
					cancel()
					if err := <-done; err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(100*sum/float64(n)/conc, "%-slots-busy")
				}
			})
		}
	}
}
