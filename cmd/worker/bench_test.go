package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

// benchThroughput runs perIter fresh events per iteration through a worker
// and reports events per second next to the model-bound limit.
func benchThroughput(b *testing.B, concurrency int, rev pipeline.Reviewer, chatURL string, rooms []string, stageLatency time.Duration, stages int) {
	b.Helper()
	b.StopTimer()
	r := startRig(b, rigOpts{reviewer: rev, chatURL: chatURL, mut: func(c *Config) {
		c.Loop.Concurrency = concurrency
		if v := os.Getenv("BENCH_POLLERS"); v != "" {
			c.Loop.Pollers, _ = strconv.Atoi(v)
		}
		if v := os.Getenv("BENCH_PREFETCH"); v != "" {
			c.Loop.Prefetch, _ = strconv.Atoi(v)
		}
		// Bounded below the server's max_connections (151 by default).
		c.MySQL.MaxOpenConns = min(concurrency+4, 64)
		c.LogLevel = "warn"
		c.LLM.Primary.MaxConcurrency, c.LLM.Fallback.MaxConcurrency = concurrency*4, concurrency*4
	}})
	// Enough events per iteration to keep every slot busy for a while:
	// the share of the limit is then the share of slots kept busy.
	perIter := max(200, 4*concurrency)
	done := 0
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		var evs []pipeline.ReviewEvent
		for j := range perIter {
			room := rooms[j%len(rooms)]
			evs = append(evs, event(room, func(e *pipeline.ReviewEvent) {
				// A distinct window per event keeps every review a new key.
				e.WindowStart = e.WindowStart.Add(time.Duration(i*perIter+j) * time.Microsecond)
			}))
		}
		start := time.Now()
		b.StartTimer()
		r.sendEvents(b, evs...)
		if testing.Verbose() {
			b.Logf("sent %d in %s", perIter, time.Since(start))
		}
		for deadline := time.Now().Add(2 * time.Minute); ; {
			n := r.countRows(b, "SELECT COUNT(*) FROM verdicts WHERE status = 'done'")
			if n >= done+perIter {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d events done after 2 minutes", n-done, perIter)
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.StopTimer()
		elapsed += time.Since(start)
		done += perIter
	}
	if testing.Verbose() {
		b.Logf("receive time: sum %.1fs count %.0f; delete time: sum %.1fs count %.0f",
			r.metric(b, `chatguard_worker_sqs_call_duration_seconds_sum{op="receive"}`), r.metric(b, `chatguard_worker_sqs_call_duration_seconds_count{op="receive"}`),
			r.metric(b, `chatguard_worker_sqs_call_duration_seconds_sum{op="delete"}`), r.metric(b, `chatguard_worker_sqs_call_duration_seconds_count{op="delete"}`))
		b.Logf("job duration: sum %.1fs count %.0f; receive calls %.0f; received %.0f; deletes %.0f",
			r.metric(b, "chatguard_worker_job_duration_seconds_sum"), r.metric(b, "chatguard_worker_job_duration_seconds_count"),
			r.metric(b, `chatguard_worker_sqs_calls_total{op="receive",outcome="ok"}`), r.metric(b, "chatguard_worker_messages_received_total"),
			r.metric(b, `chatguard_worker_sqs_calls_total{op="delete",outcome="ok"}`))
	}
	tput := float64(done) / elapsed.Seconds()
	limit := float64(concurrency) / (stageLatency * time.Duration(stages)).Seconds()
	b.ReportMetric(tput, "events/s")
	b.ReportMetric(limit, "limit-events/s")
	b.ReportMetric(100*tput/limit, "%-of-limit")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLoopThroughput measures the job loop, SQS, the chat API and
// MySQL around a stand-in engine with a fixed model-bound latency (4 stages
// of 50 ms), next to the model-bound limit concurrency / 200 ms; the share
// of the limit is the share of slots kept busy. BENCH_LOOP_CONCURRENCY
// replaces the concurrencies, BENCH_PREFETCH sets --prefetch. For 256
// slots and the time per job phase, BenchmarkWorkerSlots measures the
// steady state instead (its backlog is queued before the worker starts).
func BenchmarkLoopThroughput(b *testing.B) {
	concs := []int{8, 32}
	if v := os.Getenv("BENCH_LOOP_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err)
		concs = []int{n}
	}
	for _, conc := range concs {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			const stageLatency, stages = 50 * time.Millisecond, 4
			rev := newFakeReviewer(func(ctx context.Context, ev pipeline.ReviewEvent, attempt int) (pipeline.Verdict, error) {
				select {
				case <-time.After(stageLatency * stages):
				case <-ctx.Done():
					return pipeline.Verdict{}, ctx.Err()
				}
				return cleanVerdict(), nil
			})
			var rooms []string
			for i := range 40 {
				rooms = append(rooms, fmt.Sprintf("room-%02d", i))
			}
			benchThroughput(b, conc, rev, "", rooms, stageLatency, stages)
		})
	}
}

// BenchmarkSimThroughput measures the whole worker (queue, chat API, the
// real stage engine over the simulator at a fixed latency, MySQL, lake
// events) and reports events/s next to the model-bound limit: concurrency
// divided by the mean total stage latency of the verdicts it produced.
func BenchmarkSimThroughput(b *testing.B) {
	for _, conc := range []int{16, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			b.StopTimer()
			const fixed = `{"ttft":"100ms","itl":"2ms","jitter":0,"tokens_per_chunk":8,"cache_size":0}`
			_, pURL := simProc(b, "primary", "sim-p", "", fixed)
			_, fURL := simProc(b, "fallback", "sim-f", "k", fixed)
			r := startRig(b, rigOpts{chatURL: stacktest.ChatAPIURL(b), mut: func(c *Config) {
				withSims(pURL, "sim-p", fURL, "sim-f", "k")(c)
				c.Loop.Concurrency = conc
				c.MySQL.MaxOpenConns = conc + 4
				c.LLM.Primary.MaxConcurrency, c.LLM.Fallback.MaxConcurrency = conc*4, conc*4
				c.LogLevel = "warn"
			}})
			const perIter = 200
			all := sampleReviews(b, 1000, false)
			done := 0
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				var evs []pipeline.ReviewEvent
				for j := range perIter {
					ev := all[(i*perIter+j)%len(all)]
					// A fresh key per event: shift the window start by a microsecond.
					ev.WindowStart = ev.WindowStart.Add(-time.Duration(i*perIter+j/len(all)+1) * time.Microsecond)
					evs = append(evs, ev)
				}
				start := time.Now()
				b.StartTimer()
				r.sendEvents(b, evs...)
				waitDone(b, r, done+perIter, 5*time.Minute)
				b.StopTimer()
				elapsed += time.Since(start)
				done += perIter
			}
			var stageMs float64
			require.NoError(b, r.db.QueryRow(`SELECT AVG(t) FROM (SELECT SUM(s.latency_ms) AS t FROM verdict_stages s
				JOIN verdicts v ON v.id = s.verdict_id WHERE v.status = 'done' GROUP BY v.id) x`).Scan(&stageMs))
			var stagesPer float64
			require.NoError(b, r.db.QueryRow(`SELECT COUNT(*) / COUNT(DISTINCT verdict_id) FROM verdict_stages`).Scan(&stagesPer))
			tput := float64(done) / elapsed.Seconds()
			limit := float64(conc) / (stageMs / 1000)
			b.ReportMetric(tput, "events/s")
			b.ReportMetric(limit, "limit-events/s")
			b.ReportMetric(100*tput/limit, "%-of-limit")
			b.ReportMetric(stageMs, "stage-ms/event")
			b.ReportMetric(stagesPer, "stages/event")
			b.ReportMetric(0, "ns/op")
		})
	}
}
