package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

// BenchmarkWorkerSlots measures whether one worker at concurrency 256
// keeps its slots full, for the whole worker: its queue on fauxqs, the chat API,
// MySQL claims, lookups and upserts, lake events, around a stand-in engine
// of 4 × 50 ms so that the model is never the limit. A backlog of 32 jobs
// per slot is queued, and the figures are taken over the steady middle of
// the run (after two waves, until two waves before the end), from the
// worker's own metrics:
//
//   - %-slots-busy: jobs in flight (sampled every 20 ms) ÷ slots, i.e. the
//     share of slot-time a slot held a job (from receive to the message's
//     delete);
//   - %-slots-in-models: the slots in the review phase, the model stages
//     the pool is paid for (completions/s × their mean review time);
//   - events/s and %-of-limit, against slots ÷ the mean review time
//     (review-ms: 200 ms with the stand-in);
//   - worker-cpu-ms/event and machine-cpu-%, which say whether the rest
//     of the job's time is the worker's own work or waiting on a machine
//     whose cores the stand-ins share.
//
// With BENCH_SLOTS_ENGINE=sim the review is the real stage engine over two
// simulators answering after 50 ms and 2 ms a token, on the sample rooms
// of the stack's chat API. BENCH_SLOTS_CONCURRENCY (256) and
// BENCH_SLOTS_PREFETCH ("0,64") set the sizes; BENCH_SLOTS_WAVES (32) the backlog. -v logs the phase breakdown.
//
//	go test -run '^$' -bench WorkerSlots -benchtime 1x ./cmd/worker/
func BenchmarkWorkerSlots(b *testing.B) {
	conc := envInt(b, "BENCH_SLOTS_CONCURRENCY", 256)
	waves := envInt(b, "BENCH_SLOTS_WAVES", 32)
	prefetches := []int{0, 64}
	if v := os.Getenv("BENCH_SLOTS_PREFETCH"); v != "" {
		prefetches = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			require.NoError(b, err)
			prefetches = append(prefetches, n)
		}
	}
	engine := os.Getenv("BENCH_SLOTS_ENGINE")
	for _, pf := range prefetches {
		b.Run(fmt.Sprintf("concurrency=%d/prefetch=%d", conc, pf), func(b *testing.B) {
			for b.Loop() {
				benchSlots(b, conc, pf, waves, engine == "sim")
			}
		})
	}
}

// benchSlots runs one backlog through a worker: the stand-in engine over
// hand-made rooms, or with sim the real stage engine over two simulators
// (fixed latencies) and the stack's chat API with the sample rooms.
func benchSlots(b *testing.B, conc, prefetch, waves int, sim bool) {
	const stageLatency, stages = 50 * time.Millisecond, 4
	opts := rigOpts{reviewer: newFakeReviewer(func(ctx context.Context, ev pipeline.ReviewEvent, attempt int) (pipeline.Verdict, error) {
		t := time.NewTimer(stageLatency * stages)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return pipeline.Verdict{}, ctx.Err()
		}
		return cleanVerdict(), nil
	})}
	if sim {
		const fixed = `{"ttft":"50ms","itl":"2ms","jitter":0,"tokens_per_chunk":8,"cache_size":0}`
		_, pURL := simProc(b, "primary", "sim-p", "", fixed)
		_, fURL := simProc(b, "fallback", "sim-f", "k", fixed)
		opts = rigOpts{chatURL: stacktest.ChatAPIURL(b), mut: withSims(pURL, "sim-p", fURL, "sim-f", "k")}
	}
	withSims := opts.mut
	opts.mut = func(c *Config) {
		if withSims != nil {
			withSims(c)
		}
		c.Loop.Concurrency = conc
		c.Loop.Prefetch = prefetch
		// Under MariaDB's default max_connections (151), see docs/operations.md.
		c.MySQL.MaxOpenConns = envInt(b, "BENCH_SLOTS_MYSQL_CONNS", min(conc+4, 64))
		c.LogLevel = "warn"
		c.LLM.Primary.MaxConcurrency, c.LLM.Fallback.MaxConcurrency = conc*4, conc*4
	}
	total := waves * conc
	evs := make([]pipeline.ReviewEvent, total)
	var rooms []pipeline.ReviewEvent
	if sim {
		rooms = sampleReviews(b, 1000, false)
	}
	for j := range evs {
		if sim {
			evs[j] = rooms[j%len(rooms)]
		} else {
			evs[j] = event(fmt.Sprintf("room-%02d", j%40))
		}
		// A distinct window per event keeps every review a new key.
		evs[j].WindowStart = evs[j].WindowStart.Add(-time.Duration(j+1) * time.Microsecond)
	}
	// The backlog is queued before the worker starts, so that the sender
	// never races the worker for the machine's cores.
	opts.beforeStart = func(r *rig) { r.sendEvents(b, evs...) }
	r := startRig(b, opts)

	// The window: from two waves done to two waves before the end, while
	// the queue still holds more than the slots and the prefetch can take.
	from, to := 2*conc, total-2*conc-prefetch
	require.Greater(b, to, from, "too few waves for a steady window")
	a := waitJobs(b, r, from, nil)
	var inflight []float64
	z := waitJobs(b, r, to, &inflight)
	window := z.at.Sub(a.at).Seconds()
	d := func(name string) float64 { return z.m[name] - a.m[name] }
	done := d(`chatguard_worker_jobs_total{outcome="done"}`)
	mean := 0.0
	for _, v := range inflight {
		mean += v / float64(len(inflight))
	}
	// Little's law for the model share: completions per second × the mean
	// time their jobs spent in the review phase = slots in that phase.
	review := d(`chatguard_worker_job_phase_seconds_sum{phase="review"}`) / max(d(`chatguard_worker_job_phase_seconds_count{phase="review"}`), 1)
	inModels := done / window * review
	// The model-bound limit: every slot in the models all the time.
	limit := float64(conc) / review
	b.ReportMetric(100*mean/float64(conc), "%-slots-busy")
	b.ReportMetric(100*inModels/float64(conc), "%-slots-in-models")
	b.ReportMetric(done/window, "events/s")
	b.ReportMetric(100*done/window/limit, "%-of-limit")
	b.ReportMetric(10*(z.cpu.self-a.cpu.self)/max(done, 1), "worker-cpu-ms/event")
	b.ReportMetric(100*(z.cpu.busy-a.cpu.busy)/max(z.cpu.total-a.cpu.total, 1), "machine-cpu-%")
	b.ReportMetric(1000*review, "review-ms")
	b.ReportMetric(0, "ns/op")
	if testing.Verbose() {
		for _, p := range []string{"admit", "chat", "review", "save", "release", "settle"} {
			sum := d(fmt.Sprintf(`chatguard_worker_job_phase_seconds_sum{phase=%q}`, p))
			n := d(fmt.Sprintf(`chatguard_worker_job_phase_seconds_count{phase=%q}`, p))
			b.Logf("phase %-8s mean %6.1f ms over %.0f jobs", p, 1000*sum/max(n, 1), n)
		}
		b.Logf("window %.1fs: %.0f jobs done, receive calls %.0f", window, done, d(`chatguard_worker_sqs_calls_total{op="receive",outcome="ok"}`))
	}
	// Let the rest finish so that the rig stops on an empty queue.
	waitJobs(b, r, total, nil)
}

// jobsSnapshot is the worker's metrics and the CPU counters at one moment.
type jobsSnapshot struct {
	at  time.Time
	m   map[string]float64
	cpu cpuTicks
}

// waitJobs polls the worker's metrics every 20 ms until n jobs are done
// (bounded), appending each poll's jobs in flight to inflight when it is
// not nil.
func waitJobs(b *testing.B, r *rig, n int, inflight *[]float64) jobsSnapshot {
	b.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		s := jobsSnapshot{at: time.Now(), cpu: readCPU(b), m: map[string]float64{}}
		_, body := r.get(b, "/metrics")
		for _, line := range strings.Split(body, "\n") {
			if i := strings.LastIndexByte(line, ' '); i > 0 && !strings.HasPrefix(line, "#") {
				v, err := strconv.ParseFloat(line[i+1:], 64)
				if err == nil {
					s.m[line[:i]] = v
				}
			}
		}
		if inflight != nil {
			*inflight = append(*inflight, s.m["chatguard_worker_inflight_jobs"])
		}
		if s.m[`chatguard_worker_jobs_total{outcome="done"}`] >= float64(n) {
			return s
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %.0f of %d jobs done after 3 minutes", s.m[`chatguard_worker_jobs_total{outcome="done"}`], n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, name)
	return n
}

// cpuTicks are this process's and the machine's CPU time, in clock ticks.
type cpuTicks struct{ self, busy, total float64 }

func readCPU(b *testing.B) cpuTicks {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	self := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e7 // ticks of 10 ms
	raw, err := os.ReadFile("/proc/stat")
	require.NoError(b, err)
	fields := strings.Fields(strings.SplitN(string(raw), "\n", 2)[0])[1:]
	var busy, total float64
	for i, f := range fields {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return cpuTicks{self: self, busy: busy, total: total}
}
