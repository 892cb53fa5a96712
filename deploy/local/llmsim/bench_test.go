package llmsim

// Capacity benchmarks: the simulator must not be the bottleneck of the
// worker's load tests (target: 5,000 short non-streaming requests/s and
// 2,000 concurrent streams on 2 cores, at the configured latencies). The
// client runs in the same process over loopback and shares the cores, so
// the figures are a lower bound for the server alone. Run:
//
//	go test -run '^$' -bench . -benchtime 20000x ./deploy/local/llmsim/

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

// benchBodies builds n request bodies: n/4 distinct rooms, each asked for
// the four stages in turn, as the worker asks.
func benchBodies(b *testing.B, n int, stream bool) [][]byte {
	b.Helper()
	chats := [][]line{
		testChat,
		{{"b", "직거래 하고 싶은데 강남역 2번 출구 가능하세요?", ""}, {"s", "네 좋아요 내일 저녁 7시에 뵐게요", ""}, {"b", "제 번호 010-1234-5678 입니다", ""}},
		{{"s", "안전결제 링크입니다 https://bunjang-pay.safe24.xyz/pay?order=123456", ""}, {"b", "앱 안에 안전결제 버튼 있지 않나요?", ""}, {"s", "", "qr_code.png"}},
	}
	out := make([][]byte, n)
	for i := range out {
		st, room := pipeline.Stages[i%4], i/4
		chat := append([]line{{"b", fmt.Sprintf("room %d: 안녕하세요 아직 판매중인가요?", room), ""}}, chats[room%len(chats)]...)
		req := map[string]any{
			"model":    DefaultModel,
			"messages": []map[string]any{{"role": "system", "content": "You review chats."}, {"role": "user", "content": transcript(chat...)}},
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{
				"name": string(st), "schema": json.RawMessage(stages.Schema(st)), "strict": true}},
			"stream": stream,
		}
		if stream {
			req["stream_options"] = map[string]any{"include_usage": true}
		}
		body, err := json.Marshal(req)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = body
	}
	return out
}

func benchStart(b *testing.B, cfg Config) *Running {
	b.Helper()
	run, err := Start(context.Background(), "127.0.0.1:0", cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = run.Stop(ctx)
	})
	return run
}

func benchClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cpuTime is the process's user+system CPU time so far. The machine is
// shared, so wall-clock rates swing with other load; CPU per request does
// not, and 2 cores divided by it bounds the rate (client and server
// together: the server alone needs less).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNonStreaming measures short non-streaming requests (ITL 0: the
// answer comes after TTFT). "cold" turns the cache off, so every request
// parses and analyses its transcript; otherwise the four stages of a room
// share one analysis, as in the worker.
func BenchmarkNonStreaming(b *testing.B) {
	for _, tc := range []struct {
		ttft  time.Duration
		conc  int
		cache int
	}{{0, 64, 0}, {0, 64, 4096}, {50 * time.Millisecond, 300, 4096}, {50 * time.Millisecond, 512, 4096}} {
		name := fmt.Sprintf("ttft=%v/conc=%d", tc.ttft, tc.conc)
		if tc.cache == 0 {
			name += "/cold"
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.TTFT, cfg.ITL, cfg.MaxRunning, cfg.CacheSize = tc.ttft, 0, tc.conc, tc.cache
			run := benchStart(b, cfg)
			bodies := benchBodies(b, 4096, false)
			client := benchClient(tc.conc)
			url := run.URL + "/chat/completions"
			lat := make([]time.Duration, b.N)
			var next atomic.Int64
			var failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime(b)
			for range tc.conc {
				wg.Go(func() {
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						t0 := time.Now()
						resp, err := client.Post(url, "application/json", bytes.NewReader(bodies[i%len(bodies)]))
						if err != nil {
							failed.Add(1)
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							failed.Add(1)
						}
						lat[i] = time.Since(t0)
					}
				})
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), cpuTime(b)-cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu_us/req")
			if failed.Load() > 0 {
				b.Fatalf("%d requests failed", failed.Load())
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
			b.ReportMetric(ms(percentile(lat, 0.5)), "p50_ms")
			b.ReportMetric(ms(percentile(lat, 0.99)), "p99_ms")
		})
	}
}

// BenchmarkStreaming keeps 2,000 streams open at once (TTFT 50ms±20%, 8
// tokens a chunk) and measures TTFT and the gap between chunks at the
// client. The stage answers are short (40–120 tokens), so at ITL 5ms a
// stream lasts about 0.3 s and 2,000 of them ask for ~7,000 streams/s;
// ITL 25ms stands for answers five times longer (~1.3 s streams), the load
// a worker with 2,000 stage calls in flight would really produce.
func BenchmarkStreaming(b *testing.B) {
	for _, itl := range []time.Duration{5 * time.Millisecond, 25 * time.Millisecond} {
		b.Run(fmt.Sprintf("conc=2000/itl=%v", itl), func(b *testing.B) { benchStreaming(b, 2000, itl) })
	}
}

func benchStreaming(b *testing.B, conc int, itl time.Duration) {
	cfg := DefaultConfig()
	cfg.MaxRunning, cfg.ITL = conc, itl
	run := benchStart(b, cfg)
	bodies := benchBodies(b, 4096, true)
	client := benchClient(conc)
	url := run.URL + "/chat/completions"
	ttfts := make([]time.Duration, b.N)
	gaps := make([]time.Duration, b.N) // mean gap between content chunks per stream
	var next, failed, chunks atomic.Int64
	var peak atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime(b)
	for range min(conc, b.N) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(bodies[i%len(bodies)]))
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Add(1)
					if err == nil {
						resp.Body.Close()
					}
					continue
				}
				if r := int64(run.Server.sched.nRunning.Load()); r > peak.Load() {
					peak.Store(r)
				}
				br := bufio.NewReaderSize(resp.Body, 4096)
				var first, last time.Time
				n := 0
				done := false
				for {
					l, err := br.ReadSlice('\n')
					if err != nil {
						break
					}
					if !bytes.HasPrefix(l, []byte("data: ")) {
						continue
					}
					if bytes.HasPrefix(l, []byte("data: [DONE]")) {
						done = true
						break
					}
					if bytes.Contains(l, []byte(`"content":"`)) && !bytes.Contains(l, []byte(`"content":""`)) {
						now := time.Now()
						if n == 0 {
							first = now
						}
						last = now
						n++
					}
				}
				resp.Body.Close()
				if !done || n == 0 {
					failed.Add(1)
					continue
				}
				chunks.Add(int64(n))
				ttfts[i] = first.Sub(t0)
				if n > 1 {
					gaps[i] = last.Sub(first) / time.Duration(n-1)
				}
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime(b)-cpu0
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d streams failed", failed.Load())
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu_us/stream")
	b.ReportMetric(float64(cpu.Microseconds())/float64(chunks.Load()), "cpu_us/chunk")
	var nz []time.Duration
	for _, g := range gaps {
		if g > 0 {
			nz = append(nz, g)
		}
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "streams/s")
	b.ReportMetric(float64(chunks.Load())/elapsed.Seconds(), "chunks/s")
	b.ReportMetric(float64(peak.Load()), "peak_running")
	b.ReportMetric(ms(percentile(ttfts, 0.5)), "ttft_p50_ms")
	b.ReportMetric(ms(percentile(ttfts, 0.99)), "ttft_p99_ms")
	b.ReportMetric(ms(percentile(nz, 0.5)), "chunk_gap_p50_ms")
	b.ReportMetric(ms(percentile(nz, 0.99)), "chunk_gap_p99_ms")
}

// BenchmarkRules measures the rule engine alone on a 20-message chat.
func BenchmarkRules(b *testing.B) {
	var chat []line
	for range 4 {
		chat = append(chat, testChat...)
	}
	prompt := transcript(chat...)
	for _, st := range pipeline.Stages {
		b.Run(string(st), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = stageAnswer(st, prompt, nil)
			}
		})
	}
}

// BenchmarkHandler measures the server alone (no sockets, no client):
// decode, analysis (cached for 3 of 4 stages), render, encode; and for
// streams the chunk writes.
func BenchmarkHandler(b *testing.B) {
	for _, tc := range []struct {
		stream bool
		cache  int
	}{{false, 0}, {false, 4096}, {true, 4096}} {
		stream := tc.stream
		name := fmt.Sprintf("stream=%v", stream)
		if tc.cache == 0 {
			name += "/cold"
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.TTFT, cfg.ITL, cfg.CacheSize = 0, 0, tc.cache
			s, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			h := s.Handler()
			bodies := benchBodies(b, 4096, stream)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			i := 0
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(bodies[i%len(bodies)]))
				w := &discardWriter{h: http.Header{}}
				h.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
				i++
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(i), "cpu_us/req")
		})
	}
}

type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(s int)           { w.status = s }
func (w *discardWriter) Flush()                      {}
