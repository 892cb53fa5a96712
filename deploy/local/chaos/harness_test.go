package chaos

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
)

func TestMain(m *testing.M) { standin.Main(m) }

// fastSim is the simulators' configuration: quick answers, hangs bounded.
const fastSim = `{"ttft":"5ms","itl":"0s","tokens_per_chunk":16,"max_hang":"3s","faults":{"429":0,"500":0,"503":0,"hang":0,"drop":0,"malformed":0,"truncate":0}}`

// env is one scenario's corner of the stack: its own database (reached
// through a fault proxy), queues, LLM simulators and chat API proxy, and the
// worker processes it runs.
type env struct {
	t          *testing.T
	bin        string
	db         *sql.DB
	dsn        string // through the MySQL proxy
	directDSN  string // the database itself, for what the faults spare
	mysqlProxy *Proxy
	chatProxy  *Proxy
	sqsProxy   *Proxy // the workers' SQS endpoint; the test's own client goes direct
	prim, fb   *standin.LLM
	sqs        *sqs.Client
	queue      stacktest.Queue
	feedback   stacktest.Queue
	extraEnv   []string

	mu      sync.Mutex
	workers []*worker
}

func newEnv(t *testing.T, extraEnv ...string) *env {
	t.Helper()
	e := &env{t: t, bin: standin.Build(t, "github.com/chatguard/chatguard/cmd/worker"), sqs: stacktest.SQS(t), extraEnv: extraEnv}
	db, dsn := stacktest.MySQL(t)
	e.db, e.directDSN = db, dsn
	mig := exec.Command(e.bin, "migrate")
	mig.Env = append(os.Environ(), "CHATGUARD_MYSQL_DSN="+dsn)
	out, err := mig.CombinedOutput()
	require.NoError(t, err, string(out))

	cfg, err := gomysql.ParseDSN(dsn)
	require.NoError(t, err)
	e.mysqlProxy, err = NewProxy(cfg.Addr)
	require.NoError(t, err)
	t.Cleanup(e.mysqlProxy.Close)
	cfg.Addr = e.mysqlProxy.Addr()
	e.dsn = cfg.FormatDSN()

	chatURL := stacktest.ChatAPIURL(t)
	e.chatProxy, err = NewProxy(strings.TrimPrefix(chatURL, "http://"))
	require.NoError(t, err)
	t.Cleanup(e.chatProxy.Close)

	sqsURL, err := url.Parse(stacktest.Get(t, "AWS_ENDPOINT_URL_SQS"))
	require.NoError(t, err)
	e.sqsProxy, err = NewProxy(sqsURL.Host)
	require.NoError(t, err)
	t.Cleanup(e.sqsProxy.Close)

	e.prim = standin.StartLLM(t, standin.LLMOptions{Name: "primary", Model: "sim-p", Config: fastSim})
	e.fb = standin.StartLLM(t, standin.LLMOptions{Name: "fallback", Model: "sim-f", APIKey: "k", Config: fastSim})
	e.queue = stacktest.NewQueue(t, "chaos", 5, 10*time.Second)
	e.feedback = stacktest.NewQueue(t, "chaos-feedback", 5, 30*time.Second)
	t.Cleanup(func() {
		e.mu.Lock()
		ws := e.workers
		e.mu.Unlock()
		for _, w := range ws {
			w.kill()
		}
		if t.Failed() {
			for i, w := range ws {
				t.Logf("worker %d stderr (tail):\n%s", i, w.tail())
			}
		}
	})
	return e
}

// worker is one worker process.
type worker struct {
	cmd    *exec.Cmd
	admin  string
	exited chan struct{}
	mu     sync.Mutex
	buf    []byte
}

func (w *worker) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > 1<<20 {
		w.buf = w.buf[len(w.buf)-(512<<10):]
	}
	return len(p), nil
}

func (w *worker) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf[max(0, len(w.buf)-8000):])
}

var adminRe = regexp.MustCompile(`"admin_addr":"([^"]+)"`)

// depEnv is what a reviewing binary (a worker, the console) is told of the
// scenario's dependencies: every one it shares with the others reached
// through the scenario's proxies and simulators, Redis off unless extraEnv
// names one.
func (e *env) depEnv() []string {
	return append(os.Environ(),
		"CHATGUARD_FEEDBACK_QUEUE_URL="+e.feedback.URL, "CHATGUARD_MYSQL_DSN="+e.dsn,
		"CHATGUARD_CHAT_API_URL=http://"+e.chatProxy.Addr(), "AWS_ENDPOINT_URL_SQS=http://"+e.sqsProxy.Addr(),
		"CHATGUARD_PRIMARY_BASE_URL="+e.prim.BaseURL, "CHATGUARD_PRIMARY_MODEL=sim-p",
		"CHATGUARD_FALLBACK_BASE_URL="+e.fb.BaseURL, "CHATGUARD_FALLBACK_MODEL=sim-f", "CHATGUARD_FALLBACK_API_KEY=k",
		"CHATGUARD_ADMIN_ADDR=127.0.0.1:0", "CHATGUARD_REDIS_ADDR=",
	)
}

// startWorker runs the worker binary configured through CHATGUARD_
// variables, as a pod would be, and waits until it polls.
func (e *env) startWorker() *worker {
	t := e.t
	t.Helper()
	w := &worker{exited: make(chan struct{})}
	w.cmd = exec.Command(e.bin)
	w.cmd.Env = append(e.depEnv(),
		"CHATGUARD_REVIEW_QUEUE_URL="+e.queue.URL, "CHATGUARD_REVIEW_DLQ_URL="+e.queue.DLQURL,
		"CHATGUARD_WAIT_TIME=1s", "CHATGUARD_DRAIN_TIMEOUT=5s",
		"CHATGUARD_VISIBILITY_TIMEOUT=10s", "CHATGUARD_HEARTBEAT_INTERVAL=3s",
		"CHATGUARD_RETRY_BASE=1s", "CHATGUARD_RETRY_MAX=5s", "CHATGUARD_MAX_RECEIVE_COUNT=5",
		"CHATGUARD_ATTEMPT_TIMEOUT=20s", "CHATGUARD_JOB_TIMEOUT=2m", "CHATGUARD_CONCURRENCY=8",
		"CHATGUARD_CHAT_TIMEOUT=2s", "CHATGUARD_CLAIM_TTL=6s", "CHATGUARD_CLAIM_POLL=300ms",
		"CHATGUARD_BREAKER_FAILURES=3", "CHATGUARD_BREAKER_OPEN_FOR=1s", "CHATGUARD_EVENT_FLUSH_AGE=100ms",
		"CHATGUARD_MYSQL_MAX_OPEN_CONNS=16", "CHATGUARD_LOG_LEVEL=info",
		// A killed worker's claimed outbox rows wait for their lease: short
		// here, so that a scenario's drain does not wait a minute for them.
		"CHATGUARD_OUTBOX_POLL=100ms", "CHATGUARD_OUTBOX_SEND_TIMEOUT=4s", "CHATGUARD_OUTBOX_LEASE=10s", "CHATGUARD_OUTBOX_RETRY_MAX=5s",
	)
	w.cmd.Env = append(w.cmd.Env, e.extraEnv...)
	startProc(t, w)
	e.mu.Lock()
	e.workers = append(e.workers, w)
	e.mu.Unlock()
	return w
}

// startProc starts w.cmd, keeps the tail of its stderr, and waits until it
// logs its admin address (a worker's "polling", a consumer's "receiving").
func startProc(t *testing.T, w *worker) {
	t.Helper()
	pr, pw := io.Pipe()
	w.cmd.Stderr = pw
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, w.cmd.Start())
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = w.Write(append(append([]byte(nil), line...), '\n'))
			if m := adminRe.FindSubmatch(line); m != nil {
				select {
				case ready <- string(m[1]):
				default:
				}
			}
		}
	}()
	go func() { _ = w.cmd.Wait(); _ = pw.Close(); close(w.exited) }()
	select {
	case w.admin = <-ready:
	case <-w.exited:
		t.Fatalf("worker exited at start:\n%s", w.tail())
	case <-time.After(60 * time.Second):
		t.Fatalf("worker did not start in 60s:\n%s", w.tail())
	}
}

// kill sends SIGKILL and waits for the exit.
func (w *worker) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.exited
}

// rss is the process's resident set in bytes, from /proc (0 once it has
// exited or where there is no /proc).
func (w *worker) rss() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "123456 kB"
			if kb, err := strconv.ParseFloat(f[0], 64); err == nil && len(f) == 2 && f[1] == "kB" {
				return kb * 1024
			}
		}
	}
	return 0
}

// scrapeClient bounds a scrape of a process that hangs (one whose
// dependency is stalled may answer late).
var scrapeClient = &http.Client{Timeout: 5 * time.Second}

// metric sums the series of the worker's /metrics whose line starts with
// prefix (a name with an optional label subset written as it appears).
func (w *worker) metric(prefix string) float64 {
	resp, err := scrapeClient.Get("http://" + w.admin + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// metricAll sums a metric over the live workers.
func (e *env) metricAll(prefix string) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	sum := 0.0
	for _, w := range e.workers {
		select {
		case <-w.exited:
		default:
			sum += w.metric(prefix)
		}
	}
	return sum
}

// events returns n review events of the sample rooms (the stack's chat API
// serves them), each window the hour of the room's first message.
func events(t *testing.T, n int) []pipeline.ReviewEvent {
	t.Helper()
	f, err := os.Open(filepath.Join(stacktest.TruthDir(t), "groundtruth.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	run := stacktest.Unique("chaos")
	var out []pipeline.ReviewEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && len(out) < n {
		var r struct {
			RoomID string    `json:"room_id"`
			First  time.Time `json:"first_message_at"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		ws := r.First.UTC().Truncate(time.Hour)
		out = append(out, pipeline.ReviewEvent{RoomID: r.RoomID, WindowStart: ws, WindowEnd: ws.Add(time.Hour), RunID: run,
			PublishedAt: time.Now().UTC(), SchemaVersion: pipeline.ReviewSchemaVersion})
	}
	require.Len(t, out, n)
	return out
}

func (e *env) send(evs []pipeline.ReviewEvent) {
	t := e.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for start := 0; start < len(evs); start += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for i, ev := range evs[start:min(start+10, len(evs))] {
			b, err := ev.Encode()
			require.NoError(t, err)
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(b))})
		}
		out, err := e.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(e.queue.URL), Entries: entries})
		require.NoError(t, err)
		require.Empty(t, out.Failed)
	}
}

// depth returns a queue's visible plus in-flight messages (-1 when it
// cannot be read).
func (e *env) depth(url string) int { return depthOf(e.sqs, url) }

func (e *env) count(q string) int {
	var n int
	require.NoError(e.t, e.db.QueryRow(q).Scan(&n))
	return n
}

func (e *env) done() int { return e.count("SELECT COUNT(*) FROM verdicts WHERE status = 'done'") }

// outboxPending counts the outbox messages no relay has had accepted yet.
func (e *env) outboxPending() int {
	return e.count("SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL")
}

// unusable counts the reviews failed because a stage had no usable answer
// in any attempt: the job's own end, never retried.
func (e *env) unusable() int {
	return e.count("SELECT COUNT(*) FROM verdicts WHERE status = 'failed' AND error LIKE '%no usable answer%'")
}

// settle waits until n reviews are done and the queue is empty.
func (e *env) settle(n int, within time.Duration) {
	e.t.Helper()
	e.settleOn(n, within, e.done)
}

// settleOn waits until ended counts n reviews and the queue is empty.
func (e *env) settleOn(n int, within time.Duration, ended func() int) {
	t := e.t
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		d := ended()
		if d >= n && e.depth(e.queue.URL) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d of %d reviews done, %d messages left, %d in the DLQ", within, d, n, e.depth(e.queue.URL), e.depth(e.queue.DLQURL))
		}
		time.Sleep(200 * time.Millisecond) // polling the outcome of real processes, not synchronising
	}
}

// modelCalls is every chat completion the simulators answered.
func (e *env) modelCalls() int64 {
	return e.prim.Stats(e.t).ChatRequests("") + e.fb.Stats(e.t).ChatRequests("")
}

// recordedCalls is the model calls the stored verdicts account for: the
// attempts of every stage row. Calls beyond it were made for reviews whose
// result was not the one kept (a killed job, a duplicate run).
func (e *env) recordedCalls() int64 {
	return int64(e.count("SELECT COALESCE(SUM(attempts), 0) FROM verdict_stages"))
}

// row is one line of the suite's table.
type row struct {
	Scenario, Load, Figures string
	Holds                   bool
}

var (
	tableMu sync.Mutex
	table   []row
)

func record(r row) {
	tableMu.Lock()
	defer tableMu.Unlock()
	table = append(table, r)
}

// printTable writes the table as Markdown to stdout and, when
// CHATGUARD_CHAOS_OUT names a file, there too.
func printTable() string {
	tableMu.Lock()
	defer tableMu.Unlock()
	var b strings.Builder
	b.WriteString("| scenario | load | figures | holds |\n| --- | --- | --- | --- |\n")
	for _, r := range table {
		fmt.Fprintf(&b, "| %s | %s | %s | %v |\n", r.Scenario, r.Load, r.Figures, r.Holds)
	}
	fmt.Print(b.String())
	if p := os.Getenv("CHATGUARD_CHAOS_OUT"); p != "" {
		_ = os.WriteFile(p, []byte(b.String()), 0o644)
	}
	return b.String()
}
