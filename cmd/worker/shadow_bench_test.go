package main

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

// BenchmarkShadowCPU measures what shadow traffic costs the live path: the
// worker (in this process; the simulators and the stack are other
// processes) reviews the same sample rooms at 0 %, 10 % and 100 % shadow
// rate, and reports this process's CPU per live review and the p99 of the
// live reviews' time in their stages (the sum of a verdict's stage
// latencies: the model calls, stream included, with this machine's CPU
// shared with the candidate's). Run it with -benchtime=1x (make
// bench-shadow); the LLM simulator stands in for both endpoints.
func BenchmarkShadowCPU(b *testing.B) {
	for _, rate := range []float64{0, 0.1, 1} {
		b.Run(fmt.Sprintf("shadow-rate=%g", rate), func(b *testing.B) {
			b.StopTimer()
			const fixed = `{"ttft":"100ms","itl":"2ms","jitter":0,"tokens_per_chunk":8,"cache_size":0}`
			live, _ := simProc(b, "primary", "sim-p", "", fixed)
			_, cURL := simProc(b, "shadow", "cand-large", "cand-key", fixed)
			const conc = 16
			r := startRig(b, rigOpts{chatURL: stacktest.ChatAPIURL(b), mut: func(c *Config) {
				withShadow(live, cURL, conc, time.Minute)(c)
				c.Shadow.Rate = rate
				c.Loop.Concurrency = conc
				c.MySQL.MaxOpenConns = conc + 4
				c.LLM.Primary.MaxConcurrency = conc * 4
				c.LogLevel = "warn"
			}})
			const perIter = 200
			all := sampleReviews(b, 1000, false)
			done := 0
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				var evs []pipeline.ReviewEvent
				for j := range perIter {
					ev := all[(i*perIter+j)%len(all)]
					ev.WindowStart = ev.WindowStart.Add(-time.Duration(i*perIter+j/len(all)+1) * time.Microsecond)
					evs = append(evs, ev)
				}
				before := processCPU(b)
				b.StartTimer()
				r.sendEvents(b, evs...)
				waitDone(b, r, done+perIter, 5*time.Minute)
				b.StopTimer()
				cpu += processCPU(b) - before
				done += perIter
			}
			rows, err := r.db.Query(`SELECT SUM(s.latency_ms) FROM verdict_stages s JOIN verdicts v ON v.id = s.verdict_id
				WHERE v.status = 'done' GROUP BY v.id`)
			require.NoError(b, err)
			var ms []float64
			for rows.Next() {
				var total float64
				require.NoError(b, rows.Scan(&total))
				ms = append(ms, total)
			}
			require.NoError(b, rows.Err())
			rows.Close()
			slices.Sort(ms)
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(done), "cpu-ms/review")
			b.ReportMetric(ms[len(ms)*99/100], "stage-p99-ms")
			b.ReportMetric(r.metric(b, `chatguard_worker_shadow_reviews_total{outcome="ok"}`), "shadow-ok")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// processCPU is this process's user and system CPU so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
