package redislimits

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chatguard/chatguard/internal/stacktest"
)

// BenchmarkLeaseOverhead is what the fleet's primary lease adds to one
// model call: an acquire and a release against the stack's Redis, one call
// after another. It reports the p50 and p99 of the pair.
//
//	go test -run '^$' -bench LeaseOverhead -benchtime 5000x ./storage/redislimits/
func BenchmarkLeaseOverhead(b *testing.B) {
	l := New(stacktest.RedisNode(b).Client(b, nil), stacktest.Unique("bench-fleet")+":")
	ctx := b.Context()
	var pairs []time.Duration
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprint("lease-", i)
		start := time.Now()
		ok, _, err := l.Acquire(ctx, "primary", id, 64, 15*time.Second)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		if err := l.Release(ctx, "primary", id); err != nil {
			b.Fatal(err)
		}
		pairs = append(pairs, time.Since(start))
	}
	slices.Sort(pairs)
	at := func(p float64) float64 {
		return float64(pairs[min(len(pairs)-1, int(p*float64(len(pairs))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
