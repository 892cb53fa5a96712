// Command classbench measures the traffic classes (docs/scaling.md,
// "Traffic classes"): with a sweep backlog saturating the primary pool,
// how long a real-time review and a moderator's on-demand review wait,
// against the same calls on an idle pool, and what share of the pool the
// backlog still gets, for four set-ups: no classes, the fleet's class
// reserves only, the model server's priority queue only, and both. It
// prints one table.
//
//	make bench-classes
//	go run ./deploy/local/cmd/classbench --max-running 64 --batch 128 --realtime-rps 1
//
// The simulated vLLM runs in this process; the calls go through two real
// llm.Routers, the worker's (batch and real-time reviews) and the
// console's (interactive), which share the fleet's leases in Redis as the
// deployed processes do. Every call carries its class the way a review
// does: pipeline.WithClass on the context, read back with
// pipeline.ClassFrom into the request.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/deploy/local/benchload"
	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/storage/redislimits"
)

// opts are the flags.
type opts struct {
	maxRunning, batch, fleetLimit, reserved, reservedRT int
	realtimeRPS                                         float64
	ttft, itl, warmup, dur                              time.Duration
	redisAddr                                           string
}

func main() {
	var o opts
	flag.IntVar(&o.maxRunning, "max-running", 64, "the simulated vLLM's max running sequences")
	flag.IntVar(&o.batch, "batch", 128, "concurrent sweep (batch) calls: the backlog, more than max-running")
	flag.IntVar(&o.fleetLimit, "fleet-limit", 0, "the fleet's primary limit L with gates on; 0 means max-running")
	flag.IntVar(&o.reserved, "reserved", 2, "leases reserved for interactive calls (--fleet-primary-reserved)")
	flag.IntVar(&o.reservedRT, "reserved-realtime", 1, "leases reserved for realtime calls (--fleet-primary-reserved-realtime)")
	flag.Float64Var(&o.realtimeRPS, "realtime-rps", 1, "real-time reviews arriving per second")
	flag.DurationVar(&o.ttft, "ttft", 200*time.Millisecond, "the simulator's time to first token")
	flag.DurationVar(&o.itl, "itl", 50*time.Millisecond, "the simulator's time per output token")
	flag.DurationVar(&o.warmup, "warmup", 5*time.Second, "load before each measurement")
	flag.DurationVar(&o.dur, "duration", 30*time.Second, "measurement per set-up")
	flag.StringVar(&o.redisAddr, "redis", envOr("CHATGUARD_REDIS_ADDR", "127.0.0.1:6379"), "Redis for the fleet's leases")
	flag.Parse()
	if o.fleetLimit == 0 {
		o.fleetLimit = o.maxRunning
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "classbench:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// setup is one row: which of the two mechanisms is on.
type setup struct {
	name            string
	gates, priority bool
	batch           bool // false: no backlog (the idle baseline)
	mixed           bool // false: batch only (the capacity run)
}

// outcome is what one set-up measured.
type outcome struct {
	batchOK, allOK        int
	batchFailed, rtFailed int
	interRefused          int
	interTTFT, rtLatency  []float64
	tokensIn, tokensOut   int
}

func run(ctx context.Context, o opts) error {
	cfg := simConfig(o)
	sim, err := llmsim.Start(ctx, "127.0.0.1:0", cfg)
	if err != nil {
		return err
	}
	defer sim.Stop(context.Background())
	rdb := redis.NewClient(&redis.Options{Addr: o.redisAddr, PoolSize: 32, ContextTimeoutEnabled: true})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", o.redisAddr, err)
	}
	prefix := fmt.Sprintf("classbench:%d:", time.Now().UnixNano())
	setups := []setup{
		{name: "idle (no backlog)", mixed: true},
		{name: "capacity (backlog only)", batch: true},
		{name: "no classes", batch: true, mixed: true},
		{name: "fleet gates only", gates: true, batch: true, mixed: true},
		{name: "server priority only", priority: true, batch: true, mixed: true},
		{name: "both", gates: true, priority: true, batch: true, mixed: true},
	}
	outs := make([]outcome, len(setups))
	for i, s := range setups {
		fmt.Fprintf(os.Stderr, "running %s ...\n", s.name)
		if err := sim.Server.UpdateConfig(func(c *llmsim.Config) { c.PriorityScheduling = s.priority }); err != nil {
			return err
		}
		out, err := measure(ctx, o, s, sim, redislimits.New(rdb, fmt.Sprintf("%s%d:", prefix, i)))
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		outs[i] = out
	}
	printTable(o, cfg, setups, outs)
	return nil
}

// simConfig is the primary pool: benchload's, slowed so that a call takes
// about a second and a quarter, which keeps the timers' lateness on a loaded
// machine small against what is measured, and with a flat inter-token
// latency so the table shows queueing alone.
func simConfig(o opts) llmsim.Config {
	c := benchload.PrimaryConfig(o.maxRunning)
	c.TTFT, c.ITL = o.ttft, o.itl
	c.PrefillPerToken = 10 * c.PrefillPerToken
	c.BatchSlowdown = 0
	return c
}

// routers are the worker's and the console's, as deployed: the gates on
// means both share one fleet-wide lease semaphore; priority on means both
// send the class's priority.
func routers(o opts, s setup, url string, leases *redislimits.Limits) (worker, console *llm.Router, err error) {
	pool := func(n int) llm.PoolConfig {
		return llm.PoolConfig{BaseURL: url, Model: llmsim.DefaultModel, MaxConcurrency: n, ServerPriority: s.priority}
	}
	var fleet llm.FleetConfig
	if s.gates {
		fleet = llm.FleetConfig{Leases: leases, Name: "classbench", Replicas: 2,
			PrimaryLimit: o.fleetLimit, PrimaryReserved: o.reserved, PrimaryReservedRealtime: o.reservedRT}
	}
	worker, err = llm.New(llm.Config{Primary: pool(4 * (o.batch + o.maxRunning)), Fleet: fleet}, nil)
	if err != nil {
		return nil, nil, err
	}
	console, err = llm.New(llm.Config{Primary: pool(4), Fleet: fleet}, nil)
	return worker, console, err
}

// measure runs one set-up: the backlog, the real-time arrivals and the
// moderator's sequential on-demand calls, warmed up, then measured for
// o.dur. Every goroutine it starts has returned when it returns.
func measure(ctx context.Context, o opts, s setup, sim *llmsim.Running, leases *redislimits.Limits) (outcome, error) {
	worker, console, err := routers(o, s, sim.URL, leases)
	if err != nil {
		return outcome{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()
	bg.Go(func() { _ = worker.Run(ctx) })
	bg.Go(func() { _ = console.Run(ctx) })

	start := time.Now().Add(o.warmup)
	end := start.Add(o.dur)
	w := window{start: start, end: end}
	var wg sync.WaitGroup
	if s.batch {
		loadCtx, stopLoad := context.WithCancel(pipeline.WithClass(ctx, pipeline.ClassBatch))
		defer stopLoad()
		stopAtEnd := time.AfterFunc(time.Until(end), stopLoad)
		defer stopAtEnd.Stop()
		for c := range o.batch {
			wg.Go(func() { w.backlog(loadCtx, worker, c) })
		}
	}
	if s.mixed {
		wg.Go(func() { w.realtime(pipeline.WithClass(ctx, pipeline.ClassRealtime), worker, o.realtimeRPS) })
		wg.Go(func() { w.interactive(pipeline.WithClass(ctx, pipeline.ClassInteractive), console) })
	}
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.mixed && len(w.out.interTTFT) == 0 {
		return w.out, errors.New("no interactive call answered in the measurement")
	}
	return w.out, nil
}

// window collects what completes within [start, end).
type window struct {
	start, end time.Time
	mu         sync.Mutex
	out        outcome
}

func (w *window) in(t time.Time) bool { return !t.Before(w.start) && t.Before(w.end) }

// call makes one call with the class ctx carries, as a review does.
func call(ctx context.Context, r *llm.Router, i int, timeout time.Duration) (llm.Response, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return r.Complete(cctx, benchload.StageRequest(i, pipeline.ClassFrom(ctx, pipeline.ClassBatch)))
}

// backlog is one sweep caller: calls back to back until ctx ends.
func (w *window) backlog(ctx context.Context, r *llm.Router, c int) {
	for i := 0; ctx.Err() == nil; i++ {
		resp, err := call(ctx, r, 1_000_000+c*100_000+i, 2*time.Minute)
		if now := time.Now(); !w.in(now) || ctx.Err() != nil {
			continue
		}
		w.mu.Lock()
		if err != nil {
			w.out.batchFailed++
		} else {
			w.out.batchOK++
			w.out.allOK++
			w.out.tokensIn += resp.TokensIn
			w.out.tokensOut += resp.TokensOut
		}
		w.mu.Unlock()
	}
}

// realtime starts a real-time review every 1/rps until the window ends
// (open loop: a slow pool does not slow the arrivals) and waits for each;
// its latency is from arrival to answer, lease wait included.
func (w *window) realtime(ctx context.Context, r *llm.Router, rps float64) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rps))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case arrived := <-tick.C:
			if !arrived.Before(w.end) {
				return
			}
			wg.Go(func() {
				_, err := call(ctx, r, 2_000_000+i, time.Minute)
				done := time.Now()
				if !w.in(arrived) {
					return
				}
				w.mu.Lock()
				defer w.mu.Unlock()
				if err != nil {
					w.out.rtFailed++
					return
				}
				w.out.allOK++
				w.out.rtLatency = append(w.out.rtLatency, benchload.Ms(done.Sub(arrived)))
			})
		}
	}
}

// interactive is one moderator asking for on-demand reviews back to back
// until the window ends; a refused call (the pool or the fleet full)
// counts, as the console shows the moderator an error at once.
func (w *window) interactive(ctx context.Context, r *llm.Router) {
	for i := 0; time.Now().Before(w.end) && ctx.Err() == nil; i++ {
		asked := time.Now()
		resp, err := call(ctx, r, 3_000_000+i, 30*time.Second)
		if !w.in(asked) {
			continue
		}
		w.mu.Lock()
		if err != nil {
			w.out.interRefused++
		} else {
			w.out.allOK++
			w.out.interTTFT = append(w.out.interTTFT, benchload.Ms(resp.TTFT))
		}
		w.mu.Unlock()
	}
}

func printTable(o opts, cfg llmsim.Config, setups []setup, outs []outcome) {
	secs := o.dur.Seconds()
	idle, capacity := outs[0], outs[1]
	idleTTFT, idleRT := benchload.Percentile(idle.interTTFT, 95), benchload.Percentile(idle.rtLatency, 95)
	capOKps := float64(capacity.batchOK) / secs
	meanIn := benchload.Ratio(float64(capacity.tokensIn), float64(capacity.batchOK))
	meanOut := benchload.Ratio(float64(capacity.tokensOut), float64(capacity.batchOK))
	fmt.Printf("primary max running %d, TTFT %s, %s/token (flat); backlog %d sweep calls; %.2g real-time reviews/s; 1 moderator; gates L=%d R=%d Rr=%d; %s per set-up\n",
		o.maxRunning, o.ttft, o.itl, o.batch, o.realtimeRPS, o.fleetLimit, o.reserved, o.reservedRT, o.dur)
	fmt.Printf("idle: interactive TTFT p95 %.0f ms, real-time latency p95 %.0f ms; capacity %.2f calls/s measured (%.0f %% of the simulator's maximum %.2f; %.0f prompt + %.0f output tokens a call)\n\n",
		idleTTFT, idleRT, capOKps, 100*benchload.Ratio(capOKps, cfg.MaxGoodput(int(math.Round(meanIn)), int(math.Round(meanOut)))),
		cfg.MaxGoodput(int(math.Round(meanIn)), int(math.Round(meanOut))), meanIn, meanOut)
	fmt.Println("| set-up | interactive TTFT p95 ms | / idle (goal ≤ 1.2) | real-time latency p95 ms | / idle (goal ≤ 1.5) | batch % of capacity (goal ≥ 90) | all classes % of capacity | interactive calls (refused) | real-time reviews (failed) | batch failed |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for i, s := range setups[2:] {
		out := outs[i+2]
		ttft, rt := benchload.Percentile(out.interTTFT, 95), benchload.Percentile(out.rtLatency, 95)
		fmt.Printf("| %s | %.0f | %.2f | %.0f | %.2f | %.1f | %.1f | %d (%d) | %d (%d) | %d |\n", s.name,
			ttft, benchload.Ratio(ttft, idleTTFT), rt, benchload.Ratio(rt, idleRT),
			100*benchload.Ratio(float64(out.batchOK)/secs, capOKps), 100*benchload.Ratio(float64(out.allOK)/secs, capOKps),
			len(out.interTTFT), out.interRefused, len(out.rtLatency), out.rtFailed, out.batchFailed)
	}
}
