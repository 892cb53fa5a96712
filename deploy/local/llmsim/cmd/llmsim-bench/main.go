// Command llmsim-bench measures the simulator's capacity and prints a
// table: requests or streams per second (per_s), latency percentiles at the
// client (for streams: time to the first content chunk), the mean gap
// between chunks, and the CPU the server spent per request or stream and in
// all (server_cores). The load generator needs more CPU than the server, so
// on a 2-core machine per_s is bounded by the client; 2 cores divided by
// server_cpu_us is the server's own ceiling.
//
// With --sim pointing at a built llmsim binary the server runs as a child
// process, so its CPU (from /proc) is measured apart from the load
// generator's, which matters on a small shared machine; without it the
// server runs in-process and only wall-clock figures are printed.
//
//	go build -o /tmp/llmsim ./deploy/local/llmsim/cmd/llmsim
//	go run ./deploy/local/llmsim/cmd/llmsim-bench --sim /tmp/llmsim
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

// scenario is one row of the table.
type scenario struct {
	name     string
	stream   bool
	conc     int
	requests int
	ttft     time.Duration
	itl      time.Duration
	cache    int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sim := flag.String("sim", "", "path of an llmsim binary to run as a child process (empty: in-process)")
	scale := flag.Float64("scale", 1, "multiply every scenario's request count")
	flag.Parse()
	m := Main{Sim: *sim, Scale: *scale, Out: os.Stdout}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "llmsim-bench:", err)
		os.Exit(1)
	}
}

// Main runs the scenarios.
type Main struct {
	Sim   string
	Scale float64
	Out   io.Writer
}

// Run runs every scenario in turn and prints the table; it stops at the
// first failure or when ctx is done.
func (m *Main) Run(ctx context.Context) error {
	scenarios := []scenario{
		{"non-stream cold", false, 64, 20000, 0, 0, 0},
		{"non-stream", false, 64, 20000, 0, 0, 4096},
		{"non-stream", false, 300, 20000, 50 * time.Millisecond, 0, 4096},
		{"stream", true, 2000, 20000, 50 * time.Millisecond, 5 * time.Millisecond, 4096},
		{"stream", true, 2000, 20000, 50 * time.Millisecond, 25 * time.Millisecond, 4096},
	}
	tw := tabwriter.NewWriter(m.Out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tconc\tttft\titl\tn\tper_s\tp50_ms\tp99_ms\tchunk_gap_p50_ms\tchunks_per_s\tserver_cpu_us\tserver_cores\t")
	for _, sc := range scenarios {
		sc.requests = max(1, int(float64(sc.requests)*m.Scale))
		row, err := m.runOne(ctx, sc)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		fmt.Fprintln(tw, row)
		fmt.Fprintf(os.Stderr, "done: %s conc=%d itl=%v\n", sc.name, sc.conc, sc.itl)
	}
	return tw.Flush()
}

func (m *Main) runOne(ctx context.Context, sc scenario) (string, error) {
	cfg := llmsim.DefaultConfig()
	cfg.TTFT, cfg.ITL, cfg.MaxRunning, cfg.CacheSize = sc.ttft, sc.itl, sc.conc, sc.cache
	url, cpu, stop, err := m.start(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer stop()
	bodies, err := requestBodies(4096, sc.stream)
	if err != nil {
		return "", err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: sc.conc, MaxIdleConnsPerHost: sc.conc, MaxConnsPerHost: sc.conc}}
	lat := make([]time.Duration, sc.requests)
	gaps := make([]time.Duration, sc.requests)
	var next, failed, chunks atomic.Int64
	cpu0 := cpu()
	start := time.Now()
	var wg sync.WaitGroup
	for range min(sc.conc, sc.requests) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= sc.requests {
					return
				}
				l, g, n, err := call(ctx, client, url+"/chat/completions", bodies[i%len(bodies)], sc.stream)
				if err != nil {
					failed.Add(1)
					continue
				}
				lat[i], gaps[i] = l, g
				chunks.Add(int64(n))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	serverCPU := cpu() - cpu0
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if f := failed.Load(); f > 0 {
		return "", fmt.Errorf("%d of %d requests failed", f, sc.requests)
	}
	cpuCol, coresCol := "-", "-"
	if serverCPU >= 0 {
		cpuCol = fmt.Sprintf("%.0f", float64(serverCPU.Microseconds())/float64(sc.requests))
		coresCol = fmt.Sprintf("%.2f", serverCPU.Seconds()/elapsed.Seconds())
	}
	gapCol, chunkCol := "-", "-"
	if sc.stream {
		gapCol = fmt.Sprintf("%.1f", ms(pct(nonZero(gaps), 0.5)))
		chunkCol = fmt.Sprintf("%.0f", float64(chunks.Load())/elapsed.Seconds())
	}
	return fmt.Sprintf("%s\t%d\t%v\t%v\t%d\t%.0f\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t",
		sc.name, sc.conc, sc.ttft, sc.itl, sc.requests, float64(sc.requests)/elapsed.Seconds(),
		ms(pct(lat, 0.5)), ms(pct(lat, 0.99)), gapCol, chunkCol, cpuCol, coresCol), nil
}

// call sends one request. For a stream it returns the time to the first
// content chunk, the mean gap between content chunks and their number; for
// a plain request the whole latency.
func call(ctx context.Context, c *http.Client, url string, body []byte, stream bool) (time.Duration, time.Duration, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	if !stream {
		_, err := io.Copy(io.Discard, resp.Body)
		return time.Since(t0), 0, 0, err
	}
	br := bufio.NewReaderSize(resp.Body, 4096)
	var first, last time.Time
	n := 0
	for {
		l, err := br.ReadSlice('\n')
		if err != nil {
			return 0, 0, 0, errors.New("stream ended without [DONE]")
		}
		if bytes.HasPrefix(l, []byte("data: [DONE]")) {
			break
		}
		if bytes.HasPrefix(l, []byte("data: ")) && bytes.Contains(l, []byte(`"content":"`)) && !bytes.Contains(l, []byte(`"content":""`)) {
			now := time.Now()
			if n == 0 {
				first = now
			}
			last = now
			n++
		}
	}
	if n == 0 {
		return 0, 0, 0, errors.New("no content")
	}
	gap := time.Duration(0)
	if n > 1 {
		gap = last.Sub(first) / time.Duration(n-1)
	}
	return first.Sub(t0), gap, n, nil
}

// start runs the simulator and returns its root URL, a reader of its CPU
// time (negative when unknown) and a stop function.
func (m *Main) start(ctx context.Context, cfg llmsim.Config) (string, func() time.Duration, func(), error) {
	if m.Sim == "" {
		r, err := llmsim.Start(ctx, "127.0.0.1:0", cfg)
		if err != nil {
			return "", nil, nil, err
		}
		stop := func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = r.Stop(sctx)
		}
		return r.URL, func() time.Duration { return -1 }, stop, nil
	}
	cmd := exec.CommandContext(ctx, m.Sim, "--addr", "127.0.0.1:0",
		"--ttft", cfg.TTFT.String(), "--itl", cfg.ITL.String(),
		"--max-running", strconv.Itoa(cfg.MaxRunning), "--cache-size", strconv.Itoa(cfg.CacheSize))
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, nil, fmt.Errorf("start %s: %w", m.Sim, err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, nil, fmt.Errorf("read the simulator's URL: %w", err)
	}
	pid := cmd.Process.Pid
	return strings.TrimSpace(line), func() time.Duration { return procCPU(pid) }, stop, nil
}

// procCPU reads a process's user+system time from /proc/<pid>/stat, or -1.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields overall, in clock ticks (100 per second on Linux).
	rest := string(b[bytes.LastIndexByte(b, ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(u+s) * (time.Second / 100)
}

// requestBodies builds n bodies: n/4 rooms, each asked for the four stages.
func requestBodies(n int, stream bool) ([][]byte, error) {
	at := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	chats := [][]pipeline.ChatMessage{
		{{MessageID: "m2", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, Text: "네 선입금 해주시면 바로 보내드려요"},
			{MessageID: "m3", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, Text: "국민은행 123-45-678901 김민수 입니다"},
			{MessageID: "m4", SenderRole: pipeline.RoleBuyer, Kind: pipeline.KindImage, ImageURL: "https://img.example-market.test/r/m4-deposit_screenshot.jpg"}},
		{{MessageID: "m2", SenderRole: pipeline.RoleBuyer, Kind: pipeline.KindText, Text: "직거래 하고 싶은데 강남역 2번 출구 가능하세요?"},
			{MessageID: "m3", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, Text: "네 좋아요 내일 저녁 7시에 뵐게요"},
			{MessageID: "m4", SenderRole: pipeline.RoleBuyer, Kind: pipeline.KindText, Text: "제 번호 010-1234-5678 입니다"}},
	}
	out := make([][]byte, n)
	for i := range out {
		st, room := pipeline.Stages[i%4], i/4
		msgs := append([]pipeline.ChatMessage{{MessageID: "m1", SenderRole: pipeline.RoleBuyer, Kind: pipeline.KindText,
			Text: fmt.Sprintf("room %d: 안녕하세요 아직 판매중인가요?", room)}}, chats[room%len(chats)]...)
		for j := range msgs {
			msgs[j].SentAt = at.Add(time.Duration(j) * time.Minute)
		}
		req := map[string]any{
			"model": llmsim.DefaultModel,
			"messages": []map[string]any{{"role": "system", "content": "You review chats."},
				{"role": "user", "content": stages.FormatTranscript(msgs)}},
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{
				"name": string(st), "schema": stages.Schema(st), "strict": true}},
			"stream": stream,
		}
		b, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func nonZero(d []time.Duration) []time.Duration {
	var out []time.Duration
	for _, x := range d {
		if x > 0 {
			out = append(out, x)
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
