// Command fleetbench measures the fleet-wide capacity limits
// (docs/state-machines.md, "Fleet capacity"): several worker-like processes, each with many
// concurrent stage calls through its own llm.Router, against one simulated
// vLLM pool limited to a few running sequences and one simulated managed
// API with a requests-per-minute limit, with static per-process limits and
// with adaptive + Redis-shared limits in the same run. It prints a table.
//
//	make bench-fleet
//	go run ./deploy/local/cmd/fleetbench --procs 4 --concurrency 256 --max-running 64
//
// The simulators run in this process; each replica is a child process
// (this binary with --child), so replicas share nothing but Redis and the
// simulators, as pods do.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/deploy/local/benchload"
	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/storage/redislimits"
)

// opts are the flags, shared by the parent and its children.
type opts struct {
	procs, conc, maxRunning, reserved, rpm, headroom int
	warmup, dur                                      time.Duration
	redisAddr                                        string
	only                                             string

	// child only
	child                bool
	mode, primary, fb    string
	metricsURL, prefix   string
	startAt, endAt       int64
	fleetLimit, fleetRPM int
}

func main() {
	var o opts
	flag.IntVar(&o.procs, "procs", 4, "worker-like processes")
	flag.IntVar(&o.conc, "concurrency", 256, "concurrent stage calls per process (the worker's --concurrency)")
	flag.IntVar(&o.maxRunning, "max-running", 64, "the simulated vLLM's max running sequences")
	flag.IntVar(&o.reserved, "reserved", 2, "fleet leases reserved for interactive calls")
	flag.IntVar(&o.headroom, "headroom", 0, "fleet leases above max-running: the short queue that keeps the batch full")
	flag.IntVar(&o.rpm, "rpm", 600, "the simulated managed API's requests per minute")
	flag.DurationVar(&o.warmup, "warmup", 4*time.Second, "load before each measurement")
	flag.DurationVar(&o.dur, "duration", 12*time.Second, "measurement per scenario")
	flag.StringVar(&o.redisAddr, "redis", envOr("CHATGUARD_REDIS_ADDR", "127.0.0.1:6379"), "Redis for the shared limits")
	flag.StringVar(&o.only, "only", "", "run only the scenarios whose mode is in this comma-separated list (static,shared,fb-naive,fb-shared)")
	flag.BoolVar(&o.child, "child", false, "internal: run one replica")
	flag.StringVar(&o.mode, "mode", "", "internal: static|shared|fb-naive|fb-shared")
	flag.StringVar(&o.primary, "primary", "", "internal")
	flag.StringVar(&o.fb, "fallback", "", "internal")
	flag.StringVar(&o.metricsURL, "metrics-url", "", "internal")
	flag.StringVar(&o.prefix, "prefix", "", "internal")
	flag.Int64Var(&o.startAt, "start-at", 0, "internal")
	flag.Int64Var(&o.endAt, "end-at", 0, "internal")
	flag.IntVar(&o.fleetLimit, "fleet-limit", 0, "internal")
	flag.IntVar(&o.fleetRPM, "fleet-rpm", 0, "internal")
	flag.Parse()
	var err error
	if o.child {
		err = runChild(o)
	} else {
		err = runParent(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// result is what a child reports.
type result struct {
	OK, Failed   int
	TokensIn     int
	TokensOut    int
	TTFTms       []float64
	AcquireMS    []float64
	ReleaseMS    []float64
	Attempts     int
	FallbackCall int
	Limit        float64 // the primary's local limit at the end
	FirstErr     string
	StoreErrors  float64
	Degraded     float64
}

// timedStore records how long each lease call takes.
type timedStore struct {
	*redislimits.Limits
	mu               sync.Mutex
	acquire, release []float64
}

func (s *timedStore) Acquire(ctx context.Context, name, id string, limit int, ttl time.Duration) (bool, int, error) {
	t := time.Now()
	ok, n, err := s.Limits.Acquire(ctx, name, id, limit, ttl)
	s.mu.Lock()
	s.acquire = append(s.acquire, benchload.Ms(time.Since(t)))
	s.mu.Unlock()
	return ok, n, err
}

func (s *timedStore) Release(ctx context.Context, name, id string) error {
	t := time.Now()
	err := s.Limits.Release(ctx, name, id)
	s.mu.Lock()
	s.release = append(s.release, benchload.Ms(time.Since(t)))
	s.mu.Unlock()
	return err
}

func runChild(o opts) error {
	cfg := llm.Config{
		Primary: llm.PoolConfig{BaseURL: o.primary, Model: llmsim.DefaultModel, MaxConcurrency: o.conc},
	}
	var store *timedStore
	if strings.HasPrefix(o.mode, "fb-") {
		cfg.Fallback = llm.PoolConfig{BaseURL: o.fb, Model: llmsim.DefaultModel, MaxConcurrency: o.conc}
	}
	if o.mode == "static" {
		cfg.Primary.MaxConcurrency = o.maxRunning // the pre-fleet default: a static share per pod
	}
	if o.mode == "shared" || o.mode == "fb-shared" {
		rdb := redis.NewClient(&redis.Options{Addr: o.redisAddr, PoolSize: 64, MinIdleConns: 8, ContextTimeoutEnabled: true})
		defer rdb.Close()
		store = &timedStore{Limits: redislimits.New(rdb, o.prefix)}
		cfg.Fleet = llm.FleetConfig{Leases: store, Budget: store, Name: "fleetbench", Replicas: o.procs,
			PrimaryLimit: o.fleetLimit, PrimaryReserved: o.reserved, FallbackRPM: o.fleetRPM}
	}
	if o.mode == "shared" {
		cfg.Primary.Adaptive = llm.AdaptiveConfig{Enabled: true, Min: 2, Initial: 4, MetricsURL: o.metricsURL}
	}
	reg := prometheus.NewRegistry()
	r, err := llm.New(cfg, reg)
	if err != nil {
		return err
	}
	// Cancelled at the end, without a deadline: each call has its own, as
	// a worker's job has, so the router does not give up on a call because
	// the run is about to end.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopAtEnd := time.AfterFunc(time.Until(time.Unix(0, o.endAt)), cancel)
	defer stopAtEnd.Stop()
	// A replica that has not finished 10 s after the end says where it is.
	watchdog := time.AfterFunc(time.Until(time.Unix(0, o.endAt).Add(10*time.Second)), func() {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		_ = os.WriteFile(fmt.Sprintf("%s/fleetbench-replica-%d.stack", os.TempDir(), os.Getpid()), buf[:n], 0o600)
		fmt.Fprintf(os.Stderr, "replica stuck; stacks in %s\n", os.TempDir())
		os.Exit(3)
	})
	defer watchdog.Stop()
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	var mu sync.Mutex
	var res result
	start, end := time.Unix(0, o.startAt), time.Unix(0, o.endAt)
	for w := range o.conc {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				cctx, ccancel := context.WithTimeout(ctx, time.Minute)
				resp, err := r.Complete(cctx, benchload.StageRequest(w*100000+i, pipeline.ClassBatch))
				ccancel()
				now := time.Now()
				if now.Before(start) || now.After(end) {
					continue
				}
				mu.Lock()
				res.Attempts += resp.Attempts
				if err == nil {
					res.OK++
					res.TokensOut += resp.TokensOut
					res.TokensIn += resp.TokensIn
					res.TTFTms = append(res.TTFTms, benchload.Ms(resp.TTFT))
					if resp.Pool == pipeline.PoolFallback {
						res.FallbackCall++
					}
				} else if ctx.Err() == nil {
					res.Failed++
					if res.FirstErr == "" {
						res.FirstErr = err.Error()
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if store != nil {
		res.AcquireMS, res.ReleaseMS = store.acquire, store.release
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			switch mf.GetName() {
			case "chatguard_llm_concurrency_limit":
				if m.GetLabel()[0].GetValue() == "primary" {
					res.Limit = v
				}
			case "chatguard_llm_fleet_store_errors_total":
				res.StoreErrors = v
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func fallbackConfig(rpm int) llmsim.Config {
	c := llmsim.DefaultConfig()
	c.Name = "fallback"
	c.TTFT, c.ITL, c.Jitter = 100*time.Millisecond, 2*time.Millisecond, 0.1
	c.TokensPerChunk = 16
	c.MaxRunning, c.MaxWaiting, c.QueueFullStatus = 1024, 100000, 429
	c.RPM, c.RateWindow = rpm, time.Second
	return c
}

// scenario is one run of the children.
type scenario struct {
	name, mode           string
	fleetLimit, fleetRPM int
}

// outcome is a scenario's merged figures.
type outcome struct {
	res        result
	waiting    []float64
	fbTotal    int64 // fallback requests within the measurement
	fbLimited  int64 // of them refused over the RPM limit
	interTTFT  []float64
	interFails int
}

func runParent(o opts) error {
	ctx := context.Background()
	prim, err := llmsim.Start(ctx, "127.0.0.1:0", benchload.PrimaryConfig(o.maxRunning))
	if err != nil {
		return err
	}
	defer prim.Stop(context.Background())
	fb, err := llmsim.Start(ctx, "127.0.0.1:0", fallbackConfig(o.rpm))
	if err != nil {
		return err
	}
	defer fb.Stop(context.Background())
	self, err := os.Executable()
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("fleetbench:%d:", time.Now().UnixNano())

	// The unloaded TTFT: one caller alone, and the interactive baseline.
	idle, err := interactiveProbe(prim, o, prefix, time.Now().Add(3*time.Second), nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "unloaded TTFT p95 %.1f ms over %d calls\n", benchload.Percentile(idle.ttft, 95), len(idle.ttft))

	scenarios := []scenario{
		{name: "static: --primary-concurrency 64 per process", mode: "static"},
		{name: fmt.Sprintf("adaptive + fleet leases (L=%d, R=%d)", o.maxRunning+o.headroom, o.reserved), mode: "shared", fleetLimit: o.maxRunning + o.headroom},
		{name: "fallback, no shared budget", mode: "fb-naive"},
		{name: fmt.Sprintf("fallback, shared GCRA %d/min", o.rpm*97/100), mode: "fb-shared", fleetRPM: o.rpm * 97 / 100},
	}
	if o.only != "" {
		scenarios = slices.DeleteFunc(scenarios, func(sc scenario) bool { return !slices.Contains(strings.Split(o.only, ","), sc.mode) })
	}
	outs := make([]outcome, len(scenarios))
	for i, sc := range scenarios {
		fmt.Fprintf(os.Stderr, "running %s ...\n", sc.name)
		if strings.HasPrefix(sc.mode, "fb-") {
			// The primary refuses every call for longer than the run: all
			// the work goes to the fallback.
			_ = prim.Server.UpdateConfig(func(c *llmsim.Config) { c.Faults.Status503 = 1; c.RetryAfter = time.Hour })
		}
		prim.Server.ResetStats()
		fb.Server.ResetStats()
		// Let the managed API's bucket refill after the last scenario.
		time.Sleep(2 * time.Second)
		out, err := runScenario(o, sc, self, prim, fb, prefix+sc.mode+":")
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		outs[i] = out
	}
	printTable(o, idle.ttft, scenarios, outs, benchload.PrimaryConfig(o.maxRunning))
	return nil
}

type probe struct {
	ttft  []float64
	fails int
}

// interactiveProbe makes sequential interactive calls until end, as a
// moderator's on-demand review would, through a router that shares the
// fleet's leases when shared is set.
func interactiveProbe(prim *llmsim.Running, o opts, prefix string, end time.Time, shared *redislimits.Limits) (probe, error) {
	cfg := llm.Config{Primary: llm.PoolConfig{BaseURL: prim.URL, Model: llmsim.DefaultModel, MaxConcurrency: 4}}
	if shared != nil {
		cfg.Fleet = llm.FleetConfig{Leases: shared, Name: "fleetbench", PrimaryLimit: o.maxRunning + o.headroom, PrimaryReserved: o.reserved, Replicas: o.procs}
	}
	r, err := llm.New(cfg, nil)
	if err != nil {
		return probe{}, err
	}
	var p probe
	for i := 0; time.Now().Before(end); i++ {
		ctx, cancel := context.WithDeadline(context.Background(), end.Add(10*time.Second))
		resp, err := r.Complete(ctx, benchload.StageRequest(i, pipeline.ClassInteractive))
		cancel()
		if err != nil {
			p.fails++
			continue
		}
		p.ttft = append(p.ttft, benchload.Ms(resp.TTFT))
	}
	return p, nil
}

func runScenario(o opts, sc scenario, self string, prim, fb *llmsim.Running, prefix string) (outcome, error) {
	start := time.Now().Add(o.warmup)
	end := start.Add(o.dur)
	ctx, cancel := context.WithDeadline(context.Background(), end.Add(30*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	results := make([]result, o.procs)
	errs := make([]error, o.procs)
	for i := range o.procs {
		args := []string{"--child", "--mode", sc.mode, "--primary", prim.URL, "--fallback", fb.URL,
			"--metrics-url", prim.Root + "/metrics", "--prefix", prefix, "--redis", o.redisAddr,
			"--procs", fmt.Sprint(o.procs), "--concurrency", fmt.Sprint(o.conc), "--max-running", fmt.Sprint(o.maxRunning),
			"--reserved", fmt.Sprint(o.reserved), "--start-at", fmt.Sprint(start.UnixNano()), "--end-at", fmt.Sprint(end.UnixNano()),
			"--fleet-limit", fmt.Sprint(sc.fleetLimit), "--fleet-rpm", fmt.Sprint(sc.fleetRPM)}
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, self, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("replica %d: %w: %s", i, err, lastBytes(stderr.String(), 6000))
				return
			}
			errs[i] = json.NewDecoder(bufio.NewReader(&stdout)).Decode(&results[i])
			fmt.Fprintf(os.Stderr, "  replica %d: ok %d failed %d limit %.0f store errors %.0f %s\n", i, results[i].OK, results[i].Failed, results[i].Limit, results[i].StoreErrors, results[i].FirstErr)
		})
	}
	// Sample the primary's waiting queue through the measurement.
	var out outcome
	var stopSampling atomic.Bool
	var fbAtStart llmsim.Stats
	wg.Go(func() {
		time.Sleep(time.Until(start))
		fbAtStart = fb.Server.Stats()
		for time.Now().Before(end) && !stopSampling.Load() {
			out.waiting = append(out.waiting, float64(prim.Server.Stats().Waiting))
			time.Sleep(50 * time.Millisecond)
		}
		fbAtEnd := fb.Server.Stats()
		out.fbTotal = fbAtEnd.ChatRequests("") - fbAtStart.ChatRequests("")
		out.fbLimited = fbAtEnd.ChatRequests(llmsim.OutcomeRateLimited) - fbAtStart.ChatRequests(llmsim.OutcomeRateLimited)
	})
	var inter probe
	var interErr error
	if sc.mode == "shared" {
		rdb := redis.NewClient(&redis.Options{Addr: o.redisAddr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		wg.Go(func() {
			time.Sleep(time.Until(start))
			inter, interErr = interactiveProbe(prim, o, prefix, end, redislimits.New(rdb, prefix))
		})
	}
	wg.Wait()
	stopSampling.Store(true)
	if err := errors.Join(append(errs, interErr)...); err != nil {
		return out, err
	}
	for _, r := range results {
		out.res.OK += r.OK
		out.res.Failed += r.Failed
		out.res.TokensOut += r.TokensOut
		out.res.TokensIn += r.TokensIn
		out.res.Attempts += r.Attempts
		out.res.FallbackCall += r.FallbackCall
		out.res.TTFTms = append(out.res.TTFTms, r.TTFTms...)
		out.res.AcquireMS = append(out.res.AcquireMS, r.AcquireMS...)
		out.res.ReleaseMS = append(out.res.ReleaseMS, r.ReleaseMS...)
	}
	out.interTTFT, out.interFails = inter.ttft, inter.fails
	return out, nil
}

func printTable(o opts, idle []float64, scs []scenario, outs []outcome, pc llmsim.Config) {
	secs := o.dur.Seconds()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	defer tw.Flush()
	idleP95 := benchload.Percentile(idle, 95)
	fmt.Fprintf(tw, "%d processes x concurrency %d; primary max running %d; fallback %d req/min; %s per scenario\t\n", o.procs, o.conc, o.maxRunning, o.rpm, o.dur)
	// The static run keeps the simulator's queue full: its rate is what
	// the simulator reaches on this machine, timers' lateness included.
	saturated := math.NaN()
	for i, sc := range scs {
		if sc.mode == "static" {
			saturated = float64(outs[i].res.OK) / secs
		}
	}
	fmt.Fprintln(tw, "scenario\tok/s\tgoodput % of sim max\t% of saturated sim\tprimary waiting p95\tTTFT p95 ms\tTTFT p95 / unloaded\tinteractive TTFT p95 / idle\tinteractive refused\tlease acquire p99 ms\tlease release p99 ms\t")
	for i, sc := range scs {
		out := outs[i]
		if strings.HasPrefix(sc.mode, "fb-") {
			continue
		}
		okps := float64(out.res.OK) / secs
		meanOut := float64(out.res.TokensOut) / math.Max(float64(out.res.OK), 1)
		meanIn := float64(out.res.TokensIn) / math.Max(float64(out.res.OK), 1)
		maxg := pc.MaxGoodput(int(math.Round(meanIn)), int(math.Round(meanOut)))
		inter, refused := "-", "-"
		if out.interTTFT != nil || out.interFails > 0 {
			inter = fmt.Sprintf("%.2f (%d calls)", benchload.Percentile(out.interTTFT, 95)/benchload.Percentile(idle, 95), len(out.interTTFT))
			refused = fmt.Sprint(out.interFails)
		}
		acq, rel := "-", "-"
		if len(out.res.AcquireMS) > 0 {
			acq, rel = fmt.Sprintf("%.2f", benchload.Percentile(out.res.AcquireMS, 99)), fmt.Sprintf("%.2f", benchload.Percentile(out.res.ReleaseMS, 99))
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t\n", sc.name, okps, 100*okps/maxg, 100*okps/saturated,
			benchload.Percentile(out.waiting, 95), benchload.Percentile(out.res.TTFTms, 95), benchload.Percentile(out.res.TTFTms, 95)/idleP95, inter, refused, acq, rel)
	}
	fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t\t")
	fmt.Fprintln(tw, "scenario\tfallback requests\t429 share %\tachieved % of limit\tok/s\t\t\t\t\t\t")
	for i, sc := range scs {
		out := outs[i]
		if !strings.HasPrefix(sc.mode, "fb-") {
			continue
		}
		total, limited := out.fbTotal, out.fbLimited
		okps := float64(out.res.OK) / secs
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.1f\t%.2f\t\t\t\t\t\t\n", sc.name, total, 100*float64(limited)/math.Max(float64(total), 1),
			100*okps/(float64(o.rpm)/60), okps)
	}
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
