package jobloop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
)

// opaqueInbox hides a Prioritized from the loop, which then receives
// through Prioritized.Receive alone: how the worker received before each
// queue had its own pollers (the first long-polled for a second, the
// second short-polled).
type opaqueInbox struct{ pipeline.Inbox }

// BenchmarkIdleReceives prints the receive calls one idle worker (both
// queues empty, default concurrency) makes per second with one poller
// over both queues as before and with each queue on its own long-polled
// pollers: what an idle worker bills. It runs in real time (the fake
// queues' long polls last the 20 s asked for), about a minute and a half:
//
//	go test -run '^$' -bench IdleReceives -benchtime 1x ./pipeline/jobloop/
func BenchmarkIdleReceives(b *testing.B) {
	const window = 41 * time.Second
	fmt.Printf("%-22s %12s %22s\n", "receive", "receives", "receives/worker-second")
	for _, mode := range []string{"one-poller-short", "a-lane-per-queue"} {
		b.Run(mode, func(b *testing.B) {
			clk := clock.Real()
			qc := queuetest.Config{Clock: clk, MaxWait: 20 * time.Second}
			rt, batch := queuetest.NewFake(qc), queuetest.NewFake(qc)
			var in pipeline.Inbox = NewPrioritized(Queue{Name: "review-realtime", Inbox: rt}, Queue{Name: "review", Inbox: batch})
			if mode == "one-poller-short" {
				in = opaqueInbox{in}
			}
			cfg := DefaultConfig()
			l, err := New(cfg, in, queuetest.NewFake(queuetest.Config{Clock: clk}), HandlerFunc(func(context.Context, Message) Outcome {
				return Outcome{Action: Delete}
			}), clk, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(drain.WithHard(context.Background(), context.Background()))
			ran := make(chan error, 1)
			go func() { ran <- l.Run(ctx) }()
			_ = clock.Sleep(context.Background(), clk, window)
			calls := rt.Stats().Calls[queuetest.OpReceive] + batch.Stats().Calls[queuetest.OpReceive]
			cancel()
			<-ran
			per := float64(calls) / window.Seconds()
			b.ReportMetric(per, "receives/worker-s")
			fmt.Printf("%-22s %12d %22.3f\n", mode, calls, per)
		})
	}
}
