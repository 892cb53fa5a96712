//go:build consolebench

package main

// The console's SSE figures (make bench-console): memory per idle stream,
// delivery lag of active streams, a stalled client, and a drain with
// resumes through Redis Streams. They print a table; nothing here asserts a
// speed.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/console"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/live"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/storage/redislimits"
	"github.com/chatguard/chatguard/storage/redislive"
)

func raiseFDLimit(t testing.TB) {
	var l syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l))
	l.Cur = l.Max
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l))
}

// benchServer serves the console app over hub and log on real TCP; the
// benchmarks use only GET /v1/reviews/{id}/events, signed in as the auth
// proxy signs moderators in (benchIdentity), so the other dependencies
// are left empty.
func benchServer(t testing.TB, hub *live.Hub, log pipeline.LiveLog) *httptest.Server {
	cfg := console.DefaultConfig()
	cfg.TrustedProxies = "127.0.0.1/32"
	app, err := console.New(cfg, console.Deps{Store: struct{ moderation.Store }{}, Feedback: struct{ console.FeedbackSender }{},
		Chat: struct{ pipeline.ChatSource }{}, Reviewer: struct{ pipeline.Reviewer }{}, Hub: hub, LiveLog: log,
		Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ts := httptest.NewUnstartedServer(app.Handler())
	ts.Config.ErrorLog = nil
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// benchIdentity is the auth proxy's header line naming the moderator.
const benchIdentity = "X-Forwarded-Email: bench@example.com\r\n"

// openRaw opens an SSE request on a raw connection and reads its headers
// with a small buffer; the caller owns the connection.
func openRaw(addr, path, lastID string) (net.Conn, *bufio.Reader, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	req := "GET " + path + " HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n" + benchIdentity
	if lastID != "" {
		req += "Last-Event-ID: " + lastID + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		c.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(c, 512)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		if line == "\r\n" {
			return c, br, nil
		}
	}
}

// TestConsoleBenchClient is the idle-stream client, run as a child process
// so that its sockets are not counted in the server's memory (and each
// process stays under the descriptor limit).
func TestConsoleBenchClient(t *testing.T) {
	addr, path := os.Getenv("BENCH_CLIENT_ADDR"), os.Getenv("BENCH_CLIENT_PATH")
	if addr == "" {
		t.Skip("run by TestConsoleBench")
	}
	raiseFDLimit(t)
	n, _ := strconv.Atoi(os.Getenv("BENCH_CLIENT_N"))
	conns := make([]net.Conn, 0, n)
	for range n {
		c, _, err := openRaw(addr, path, "")
		require.NoError(t, err)
		conns = append(conns, c)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	for _, c := range conns {
		c.Close()
	}
}

func memNow() (heapStack uint64, rss uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			rss = kb * 1024
		}
	}
	return m.HeapInuse + m.StackInuse, rss
}

type row struct{ what, value, goal string }

// ttftUnderBacklog measures the interactive class's time to first token
// with the primary idle and while a worker's batch backlog keeps it busy:
// one simulator (16 requests running at most, like a vLLM server's
// max_num_seqs), a worker router of batch calls and the console's router
// of interactive calls, two processes' routers sharing one server. Three
// backlogs: the batch router using all 16 server slots on its own; the
// same router (--primary-concurrency 16) with both routers taking the
// fleet-wide primary leases in Redis as production is configured
// (--fleet-primary-limit 16 --fleet-primary-reserved 4 on the worker and
// the console); and, for comparison, a batch router simply configured to
// 12.
func ttftUnderBacklog(t *testing.T) []row {
	sim := standin.StartLLM(t, standin.LLMOptions{Name: "primary", Model: "sim",
		Config: `{"ttft":"40ms","itl":"4ms","jitter":0,"tokens_per_chunk":4,"max_running":16,"max_waiting":10000}`})
	rdb := redis.NewClient(&redis.Options{Addr: stacktest.Get(t, "CHATGUARD_REDIS_ADDR"), PoolSize: 128})
	t.Cleanup(func() { rdb.Close() })
	store := redislimits.New(rdb, "")
	fleet := llm.FleetConfig{Leases: store, Budget: store, PrimaryLimit: 16, PrimaryReserved: 4, Replicas: 2,
		Name: stacktest.Unique("bench-fleet") + ":"}
	router := func(conc int, withFleet bool) *llm.Router {
		cfg := llm.Config{Primary: llm.PoolConfig{BaseURL: sim.BaseURL, Model: sim.Model, MaxConcurrency: conc,
			AttemptTimeout: 30 * time.Second}, MaxAttempts: 1}
		if withFleet {
			cfg.Fleet = fleet
		}
		r, err := llm.New(cfg, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return r
	}
	req := func(c pipeline.Class) llm.Request {
		return llm.Request{Stage: pipeline.StageTriage, Class: c, MaxTokens: 120, Messages: []llm.Message{
			{Role: llm.RoleSystem, Text: "Review the chat."}, {Role: llm.RoleUser, Text: "buyer: 안녕하세요\nseller: 계좌이체로 선입금 부탁해요"}}}
	}
	p95 := func(console *llm.Router) (time.Duration, int) {
		var ds []time.Duration
		refused := 0
		for range 40 {
			resp, err := console.Complete(context.Background(), req(pipeline.ClassInteractive))
			if err != nil {
				refused++ // the interactive class is refused at once, never queued
				continue
			}
			ds = append(ds, resp.TTFT)
		}
		return pct(ds, 0.95), refused
	}
	idle, _ := p95(router(4, false))
	backlog := func(conc int, withFleet bool) (time.Duration, int) {
		worker, console := router(conc, withFleet), router(4, withFleet)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 48 { // a queue backlog: more jobs than slots
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					_, _ = worker.Complete(ctx, req(pipeline.ClassBatch))
				}
			}()
		}
		time.Sleep(time.Second) // let the backlog fill the server before measuring
		got, refused := p95(console)
		cancel()
		wg.Wait()
		return got, refused
	}
	full, _ := backlog(16, false)
	leased, leasedRefused := backlog(16, true)
	reserved, _ := backlog(12, false)
	ratio := func(d time.Duration) string { return fmt.Sprintf("%.2f×", float64(d)/float64(idle)) }
	return []row{
		{"interactive TTFT p95, primary idle", idle.Round(100 * time.Microsecond).String(), "-"},
		{"… while a batch backlog uses all 16 server slots (no fleet limit)", fmt.Sprintf("%s (%s idle)", full.Round(100*time.Microsecond), ratio(full)), "≤ 1.2× idle"},
		{"… the same backlog (batch --primary-concurrency 16) through the fleet leases, --fleet-primary-limit 16 --fleet-primary-reserved 4",
			fmt.Sprintf("%s (%s idle; %d of 40 refused)", leased.Round(100*time.Microsecond), ratio(leased), leasedRefused), "≤ 1.2× idle"},
		{"… while the batch router is configured to 12 (no fleet limit)", fmt.Sprintf("%s (%s idle)", reserved.Round(100*time.Microsecond), ratio(reserved)), "≤ 1.2× idle"},
	}
}

// TestConsoleBenchTTFT runs only the TTFT rows (make bench-console-ttft).
func TestConsoleBenchTTFT(t *testing.T) {
	rows := ttftUnderBacklog(t)
	fmt.Printf("\n| figure | measured | goal |\n| --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s |\n", r.what, r.value, r.goal)
	}
	fmt.Printf("\n(%d CPUs, GOMAXPROCS %d, %s)\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
}

// TestConsoleBenchDrain runs only the drain row.
func TestConsoleBenchDrain(t *testing.T) {
	raiseFDLimit(t)
	for _, r := range drainResume(t, 100, 10) {
		fmt.Printf("| %s | %s | %s |\n", r.what, r.value, r.goal)
	}
}

func TestConsoleBench(t *testing.T) {
	raiseFDLimit(t)
	var rows []row
	rows = append(rows, idleStreams(t, 10000)...)
	rows = append(rows, activeStreams(t, 1000, 20, 10*time.Second)...)
	rows = append(rows, stalledClient(t)...)
	rows = append(rows, drainResume(t, 100, 10)...)
	rows = append(rows, ttftUnderBacklog(t)...)
	fmt.Printf("\n| figure | measured | goal |\n| --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s |\n", r.what, r.value, r.goal)
	}
	fmt.Printf("\n(%d CPUs, GOMAXPROCS %d, %s)\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
}

func idleStreams(t *testing.T, n int) []row {
	hub, err := live.NewHub(live.DefaultConfig(), nil, nil)
	require.NoError(t, err)
	id := uuid.NewString()
	st, err := hub.Open(id)
	require.NoError(t, err)
	defer st.Close()
	ts := benchServer(t, hub, nil)
	heap0, rss0 := memNow()
	child := exec.Command(os.Args[0], "-test.run=^TestConsoleBenchClient$", "-test.count=1")
	child.Env = append(os.Environ(), "BENCH_CLIENT_ADDR="+ts.Listener.Addr().String(), "BENCH_CLIENT_PATH=/v1/reviews/"+id+"/events", "BENCH_CLIENT_N="+strconv.Itoa(n))
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	child.Stderr = os.Stderr
	require.NoError(t, child.Start())
	sc := bufio.NewScanner(stdout)
	ready := false
	for sc.Scan() {
		if sc.Text() == "ready" {
			ready = true
			break
		}
	}
	require.True(t, ready, "the client process did not open its streams")
	heap1, rss1 := memNow()
	// One event to every idle stream, to show they are live.
	st.Emit(pipeline.LiveToken, []byte(`{"text":"x"}`))
	stdin.Close()
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	_ = child.Wait()
	per := func(a, b uint64) string { return fmt.Sprintf("%.1f KB", float64(int64(b)-int64(a))/float64(n)/1024) }
	return []row{
		{fmt.Sprintf("%d idle SSE streams: Go heap+stacks per stream", n), per(heap0, heap1), "≤ 8 KB"},
		{fmt.Sprintf("%d idle SSE streams: process RSS per stream", n), per(rss0, rss1), "≤ 8 KB (JVM service: 13–15 KB)"},
	}
}

// lagClient reads one stream and records each event's delivery lag (the
// event's data carries its emit time).
func lagClient(br *bufio.Reader, lags *[]time.Duration, mu *sync.Mutex) {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		if strings.HasPrefix(line, "data: {\"t\":") {
			num := strings.TrimPrefix(line, "data: {\"t\":")
			if i := strings.IndexAny(num, ",}"); i >= 0 {
				num = num[:i]
			}
			ns, _ := strconv.ParseInt(num, 10, 64)
			d := time.Since(time.Unix(0, ns))
			mu.Lock()
			*lags = append(*lags, d)
			mu.Unlock()
		}
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

func activeStreams(t *testing.T, n, rate int, dur time.Duration) []row {
	reg := prometheus.NewRegistry()
	hub, err := live.NewHub(live.DefaultConfig(), nil, reg)
	require.NoError(t, err)
	ts := benchServer(t, hub, nil)
	addr := ts.Listener.Addr().String()
	streams := make([]*live.Stream, n)
	var (
		mu   sync.Mutex
		lags []time.Duration
	)
	var conns []net.Conn
	for i := range n {
		id := uuid.NewString()
		streams[i], err = hub.Open(id)
		require.NoError(t, err)
		c, br, err := openRaw(addr, "/v1/reviews/"+id+"/events", "")
		require.NoError(t, err)
		conns = append(conns, c)
		go lagClient(br, &lags, &mu)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(dur)
	emitted := 0
	for now := range tick.C {
		if now.After(end) {
			break
		}
		for _, st := range streams {
			st.Emit(pipeline.LiveToken, []byte(`{"t":`+strconv.FormatInt(time.Now().UnixNano(), 10)+`}`))
		}
		emitted++
	}
	time.Sleep(200 * time.Millisecond) // let the last events arrive before reading the figures
	for _, st := range streams {
		st.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	got := len(lags)
	return []row{
		{fmt.Sprintf("%d active streams × %d events/s (%s): delivery lag p50 / p99 / max", n, rate, dur), fmt.Sprintf("%s / %s / %s (%d of %d events)",
			pct(lags, 0.5).Round(10*time.Microsecond), pct(lags, 0.99).Round(10*time.Microsecond), pct(lags, 1).Round(10*time.Microsecond), got, emitted*n), "p99 ≤ 50 ms"},
	}
}

// stalledClient streams 4 KB events at 500/s to 50 reading clients, once
// alone and once with a client that never reads (its receive buffer set
// to 4 KB so the kernel cannot hide the stall for long).
func stalledClient(t *testing.T) []row {
	run := func(stall bool) (p99 time.Duration, droppedAt int) {
		reg := prometheus.NewRegistry()
		hub, err := live.NewHub(live.DefaultConfig(), nil, reg)
		require.NoError(t, err)
		ts := benchServer(t, hub, nil)
		id := uuid.NewString()
		st, err := hub.Open(id)
		require.NoError(t, err)
		var (
			mu   sync.Mutex
			lags []time.Duration
		)
		var conns []net.Conn
		for range 50 {
			c, br, err := openRaw(ts.Listener.Addr().String(), "/v1/reviews/"+id+"/events", "")
			require.NoError(t, err)
			conns = append(conns, c)
			go lagClient(br, &lags, &mu)
		}
		if stall {
			d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
				return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			}}
			c, err := d.Dial("tcp", ts.Listener.Addr().String())
			require.NoError(t, err)
			_, err = io.WriteString(c, "GET /v1/reviews/"+id+"/events HTTP/1.1\r\nHost: bench\r\n"+benchIdentity+"\r\n")
			require.NoError(t, err)
			conns = append(conns, c)
			time.Sleep(100 * time.Millisecond) // its subscription is in place
		}
		droppedAt = -1
		pad := strings.Repeat("x", 4000)
		for i := 1; i <= 2000; i++ {
			st.Emit(pipeline.LiveToken, []byte(`{"t":`+strconv.FormatInt(time.Now().UnixNano(), 10)+`,"p":"`+pad+`"}`))
			if stall && droppedAt < 0 && i%10 == 0 && testutil.ToFloat64(hub.DroppedCounter()) > 0 {
				droppedAt = i
			}
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		st.Close()
		for _, c := range conns {
			c.Close()
		}
		mu.Lock()
		defer mu.Unlock()
		return pct(lags, 0.99), droppedAt
	}
	base, _ := run(false)
	with, at := run(true)
	note := "not dropped"
	if at > 0 {
		note = fmt.Sprintf("dropped after %d events of 4 KB (its buffer: %d events, plus the socket buffers)", at, live.DefaultConfig().SubscriberBuffer)
	}
	return []row{{"a stalled client among 50 readers of one stream (4 KB events, 500/s, 4 s)",
		fmt.Sprintf("%s; readers' p99 %s with it vs %s without", note, with.Round(10*time.Microsecond), base.Round(10*time.Microsecond)),
		"dropped within its buffer bound, no added lag"}}
}

func drainResume(t *testing.T, reviews, perReview int) []row {
	stacktest.Load(t)
	rdb := redis.NewClient(&redis.Options{Addr: stacktest.Get(t, "CHATGUARD_REDIS_ADDR"), PoolSize: 256})
	defer rdb.Close()
	lcfg := redislive.DefaultConfig()
	lcfg.KeyPrefix = stacktest.Unique("bench-live") + ":"
	tail := redis.NewClient(&redis.Options{Addr: stacktest.Get(t, "CHATGUARD_REDIS_ADDR"), PoolSize: 1024, ReadTimeout: 5 * time.Second})
	defer tail.Close()
	log, err := redislive.New(rdb, lcfg)
	require.NoError(t, err)
	log = log.WithTailClient(tail) // as the console does
	hubA, err := live.NewHub(live.DefaultConfig(), log, nil)
	require.NoError(t, err)
	hubB, err := live.NewHub(live.DefaultConfig(), log, nil)
	require.NoError(t, err)
	a, b := benchServer(t, hubA, log), benchServer(t, hubB, log)
	streams := make([]*live.Stream, reviews)
	for i := range streams {
		streams[i], err = hubA.Open(uuid.NewString())
		require.NoError(t, err)
	}
	type result struct {
		seqs      []uint64
		resumedAt time.Time
		err       error
	}
	results := make([]result, reviews*perReview)
	var wg sync.WaitGroup
	var opened atomic.Int64
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st := streams[i/perReview]
			res := &results[i]
			addr, lastID := a.Listener.Addr().String(), ""
			for hop := 0; hop < 3; hop++ {
				c, br, err := openRaw(addr, "/v1/reviews/"+st.ID()+"/events", lastID)
				if err != nil {
					res.err = err
					return
				}
				// Bounded: a stream that never ends fails its row
				// instead of hanging the benchmark.
				_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
				if hop == 0 {
					opened.Add(1)
				}
				first := hop > 0
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						c.Close()
						res.err = fmt.Errorf("hop %d: %w", hop, err)
						return
					}
					switch {
					case strings.HasPrefix(line, "id: "):
						lastID = strings.TrimSpace(line[4:])
						_, seq, _ := strings.Cut(lastID, ".")
						n, _ := strconv.ParseUint(seq, 10, 64)
						res.seqs = append(res.seqs, n)
						if first {
							res.resumedAt, first = time.Now(), false
						}
					case strings.HasPrefix(line, "event: reconnect"):
						addr = b.Listener.Addr().String()
					case strings.HasPrefix(line, "event: verdict"):
						c.Close()
						return
					}
					if strings.HasPrefix(line, "data: {\"retry_ms\"") {
						break
					}
				}
				c.Close()
			}
		}(i)
	}
	for openBy := time.Now().Add(2 * time.Minute); opened.Load() < int64(len(results)); {
		require.True(t, time.Now().Before(openBy), "only %d of %d streams opened", opened.Load(), len(results))
		time.Sleep(10 * time.Millisecond) // polling real connections, not synchronising goroutines of ours
	}
	emit := func(k int) {
		for range k {
			for _, st := range streams {
				st.Emit(pipeline.LiveToken, []byte(`{"text":"tok "}`))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	emit(20)
	drainStart := time.Now()
	hubA.Drain() // SIGTERM: clients reconnect to B while the reviews go on here
	emit(20)
	for _, st := range streams {
		st.Emit(pipeline.LiveVerdict, []byte(`{"label":"abusive"}`))
	}
	wg.Wait()
	require.NoError(t, hubA.Wait(context.Background()))
	resumed, lastResume := 0, time.Duration(0)
	why := map[string]int{} // how the others failed, for the report
	for _, r := range results {
		ok := r.err == nil && len(r.seqs) == 41
		for j, s := range r.seqs {
			ok = ok && s == uint64(j+1)
		}
		switch {
		case ok:
			resumed++
		case r.err != nil:
			why[r.err.Error()]++
		default:
			why[fmt.Sprintf("%d events, first %v", len(r.seqs), r.seqs[:min(3, len(r.seqs))])]++
		}
		if !r.resumedAt.IsZero() {
			lastResume = max(lastResume, r.resumedAt.Sub(drainStart))
		}
	}
	for w, n := range why {
		t.Logf("drain: %d clients: %s", n, w)
	}
	return []row{
		{fmt.Sprintf("drain with %d open streams (%d reviews): clients that resumed on another pod with every event once", len(results), reviews),
			fmt.Sprintf("%d / %d (%.0f %%); last resume %s after SIGTERM; 0 extra model calls (a resume reads Redis only)", resumed, len(results),
				100*float64(resumed)/float64(len(results)), lastResume.Round(time.Millisecond)), "100 % inside the grace period"},
	}
}
