package consumer_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/chatguard/chatguard/consumer"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// BenchmarkConsumer drains a queue of mixed events into Parquet through the
// whole engine (decode, validate, buffer, encode, write, delete) with an
// in-memory queue and store. Run with -cpu 1 for events/s per core.
func BenchmarkConsumer(b *testing.B) {
	const n = 20000
	evs := s3laketest.Events(n, 9, t0, 2)
	bodies := make([][]byte, n)
	for i, ev := range evs {
		bodies[i] = s3laketest.Body(b, ev)
	}
	cfg := testConfig()
	cfg.FlushAge = time.Hour // flush by rows or at shutdown, as a busy consumer does
	cfg.FlushRows = 5000
	cfg.FlushBytes = 64 << 20
	cfg.MaxBufferedBytes = 256 << 20
	cfg.MaxBufferedEvents = 100_000
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		q, st := newQueue(), newMemStore()
		enqueue(q, bodies...)
		c, err := consumer.New(cfg, q, newLake(st), consumer.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ctx, release := drain.After(ctx, nil, cfg.DrainTimeout)
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		for received(q) < n {
			time.Sleep(time.Millisecond)
		}
		cancel()
		err = <-done
		release()
		if err != nil {
			b.Fatal(err)
		}
		if left, _ := queueStats(q); left != 0 {
			b.Fatalf("%d messages left", left)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(n)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
}

// cpuTime is the process's user plus system CPU time: events per CPU
// second is the per-core figure whatever else the machine runs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
