package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// childVar makes the test binary run the consumer's main instead of the
// tests, so that a test can run it as a real process and kill -9 it.
const childVar = "CHATGUARD_CONSUMER_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childVar) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], cli.Environ, os.Stdout, os.Stderr))
	}
	standin.Main(m)
}

// stack is one test's corner of the local stack: a fresh queue and a
// unique prefix in the lake bucket.
type stack struct {
	sqs    *sqs.Client
	queue  stacktest.Queue
	bucket string
	root   string
	store  *s3lake.Store
}

func setupStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{
		sqs:    stacktest.SQS(t),
		queue:  stacktest.NewQueue(t, "consumer", 5, 30*time.Second),
		bucket: stacktest.LakeBucket(t),
		root:   stacktest.Unique("consumer-test"),
	}
	client := stacktest.S3(t)
	s.store = s3lake.NewStore(client, s.bucket, 0)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		keys, _ := s.store.List(ctx, s.root+"/")
		for _, k := range keys {
			_, _ = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)})
		}
	})
	return s
}

func (s *stack) config() Config {
	cfg := DefaultConfig()
	cfg.Queue.URL = s.queue.URL
	cfg.LakeBucket = s.bucket
	cfg.LakePrefix = s.root + "/events/"
	cfg.ErrorsPrefix = s.root + "/errors/"
	cfg.S3PathStyle = true
	cfg.AdminAddr = "127.0.0.1:0"
	cfg.FlushAge = 300 * time.Millisecond
	// Generous, for a loaded machine; the outage test shortens it to
	// exercise renewals.
	cfg.VisibilityTimeout = 8 * time.Second
	cfg.WaitTime = time.Second
	cfg.DrainTimeout = 15 * time.Second
	cfg.RetryInitial = 50 * time.Millisecond
	cfg.RetryMax = 500 * time.Millisecond
	return cfg
}

func (s *stack) args(cfg Config) []string {
	return []string{
		"--feedback-queue-url", cfg.Queue.URL, "--lake-bucket", cfg.LakeBucket,
		"--lake-prefix", cfg.LakePrefix, "--errors-prefix", cfg.ErrorsPrefix, "--s3-path-style",
		"--admin-addr", cfg.AdminAddr, "--flush-age", cfg.FlushAge.String(),
		"--visibility-timeout", cfg.VisibilityTimeout.String(), "--wait-time", cfg.WaitTime.String(),
		"--write-retry-base", cfg.RetryInitial.String(), "--write-retry-max", cfg.RetryMax.String(),
	}
}

func (s *stack) send(t *testing.T, bodies [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for start := 0; start < len(bodies); start += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for i, b := range bodies[start:min(start+10, len(bodies))] {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(b))})
		}
		out, err := s.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(s.queue.URL), Entries: entries})
		require.NoError(t, err)
		require.Empty(t, out.Failed)
	}
}

func (s *stack) sendEvents(t *testing.T, evs []pipeline.LakeEvent) map[string]pipeline.LakeEvent {
	t.Helper()
	want := map[string]pipeline.LakeEvent{}
	bodies := make([][]byte, len(evs))
	for i, ev := range evs {
		bodies[i] = s3laketest.Body(t, ev)
		want[ev.EventID] = ev
	}
	s.send(t, bodies)
	return want
}

// depth returns the queue's visible and in-flight (received, not deleted)
// message counts.
func (s *stack) depth(t *testing.T) (visible, inflight int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := s.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(s.queue.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	require.NoError(t, err)
	visible, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inflight, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inflight
}

func (s *stack) lake(t *testing.T) s3laketest.Contents {
	t.Helper()
	c, err := s.tryLake()
	require.NoError(t, err)
	return c
}

// tryLake reads this test's part of the lake. While objects are being
// written it may fail: the stack's S3 (gofakes3 over a directory) answers a
// listing 500 while a PUT under the prefix is half done.
func (s *stack) tryLake() (s3laketest.Contents, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s3laketest.ReadLake(ctx, s.store, s.root+"/events/", s.root+"/errors/")
}

// settled waits until the queue is empty and the lake holds n distinct
// events and error lines for e distinct messages. Distinct, because
// delivery is at least once: a message whose visibility runs out before
// its delete (a loaded machine) comes again and may be written again.
func (s *stack) settled(t *testing.T, n, e int) s3laketest.Contents {
	t.Helper()
	var c s3laketest.Contents
	waitFor(t, fmt.Sprintf("%d events and %d errors in the lake and an empty queue", n, e), func() bool {
		var err error
		if c, err = s.tryLake(); err != nil {
			return false
		}
		byID, _ := c.ByID()
		bad := map[string]bool{}
		for _, l := range c.Errors {
			bad[l.MessageID] = true
		}
		v, f := s.depth(t)
		return len(byID) == n && len(bad) == e && v == 0 && f == 0
	})
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// boot runs Main in-process and returns its admin address and a stop
// function that cancels it as SIGTERM would and returns Run's error.
func boot(t *testing.T, cfg Config) (string, func() error) {
	t.Helper()
	ready := make(chan string, 1)
	m := &Main{Config: cfg, OnReady: func(a string) { ready <- a },
		Log: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("consumer did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("consumer did not start within 30s")
	}
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				err = fmt.Errorf("Run did not return within 60s of cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return addr, stop
}

// tWriter sends the consumer's warnings to the test log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func requireEvents(t *testing.T, want map[string]pipeline.LakeEvent, c s3laketest.Contents, allowDuplicates bool) (dups int) {
	t.Helper()
	byID, copies := c.ByID()
	require.Equal(t, want, byID, "every event, field by field, and nothing else")
	for id, n := range copies {
		if n > 1 {
			require.True(t, allowDuplicates, "event %s written %d times", id, n)
			dups += n - 1
		}
	}
	return dups
}

// eventsLine is one sample of chatguard_consumer_events_total.
var eventsLine = regexp.MustCompile(`(?m)^chatguard_consumer_events_total\{event_type="([^"]+)",outcome="([^"]+)"\} (\S+)$`)

// eventCounts reads chatguard_consumer_events_total from a /metrics page,
// by outcome, then event type.
func eventCounts(t *testing.T, metrics string) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	for _, m := range eventsLine.FindAllStringSubmatch(metrics, -1) {
		n, err := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err)
		if out[m[2]] == nil {
			out[m[2]] = map[string]int{}
		}
		out[m[2]][m[1]] = int(n)
	}
	require.NotEmpty(t, out, "chatguard_consumer_events_total in the metrics")
	return out
}

// metricValue reads the sample of a metric without labels.
func metricValue(t *testing.T, metrics, name string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(metrics)
	require.NotNil(t, m, "%s in the metrics", name)
	n, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return int(n)
}

func total(byType map[string]int) int {
	n := 0
	for _, v := range byType {
		n += v
	}
	return n
}

// requireDeliveriesAccounted checks the consumer's books against the lake
// once it holds nothing. Delivery is at least once (a message whose
// visibility runs out on a loaded machine comes again), so: every
// delivery was written once or counted a duplicate of a message still
// held; and the lake holds at least one row per event wanted and no row
// or error line the consumer did not count written. Exact counts of
// writes would assert exactly-once delivery, which SQS does not give.
func requireDeliveriesAccounted(t *testing.T, metrics string, want map[string]pipeline.LakeEvent, c s3laketest.Contents) {
	t.Helper()
	counts := eventCounts(t, metrics)
	errorsWritten := metricValue(t, metrics, "chatguard_consumer_errors_written_total")
	require.Equal(t, total(counts["received"])+total(counts["invalid"]), total(counts["written"])+errorsWritten+total(counts["duplicate"]),
		"every delivery is written once or counted a duplicate: %v, %d error lines written", counts, errorsWritten)
	wanted, rows := map[string]int{}, map[string]int{}
	for _, ev := range want {
		wanted[string(ev.EventType)]++
	}
	for _, ev := range c.Events {
		rows[string(ev.EventType)]++
	}
	for typ, n := range wanted {
		require.GreaterOrEqual(t, rows[typ], n, "%s: a row per event", typ)
		require.LessOrEqual(t, rows[typ], counts["written"][typ], "%s: every row in the lake was counted written", typ)
	}
	require.LessOrEqual(t, len(c.Errors), errorsWritten, "every error line was counted written")
	if d := total(counts["duplicate"]); d > 0 || len(c.Events) > len(want) {
		t.Logf("redelivered: %d duplicates of held messages, %d rows written again", d, len(c.Events)-len(want))
	}
}

func TestStackMixedEventsBecomeRowsInTheirPartitions(t *testing.T) {
	t.Parallel()
	s := setupStack(t)
	want := s.sendEvents(t, s3laketest.Events(450, 21, time.Now().UTC().Add(-3*time.Hour), 3))
	invalid := [][]byte{
		[]byte(`{"event_id":"not-a-uuid","event_type":"verdict","occurred_at":"2026-11-01T00:00:00Z","schema_version":1,"payload":{}}`),
		[]byte(`{"event_id":"3f2504e0-4f89-11d3-9a0c-0305e82c3301","event_type":"inference_log","occurred_at":"2026-11-01T00:00:00Z","schema_version":3,"payload":{}}`),
		[]byte(`{"truncated":`),
	}
	s.send(t, invalid)
	addr, stop := boot(t, s.config())

	code, _ := get(t, "http://"+addr+"/healthz")
	require.Equal(t, http.StatusOK, code)
	// OnReady fires just before the consumer starts receiving, and /readyz
	// answers 503 until it has; on a loaded machine the test can ask in
	// between.
	waitFor(t, "/readyz to answer 200", func() bool {
		code, _ := get(t, "http://"+addr+"/readyz")
		return code == http.StatusOK
	})

	c := s.settled(t, len(want), len(invalid))
	// The queue is empty once the deletes are done; the consumer forgets
	// the messages just after.
	var metrics string
	waitFor(t, "the consumer to hold nothing", func() bool {
		_, metrics = get(t, "http://"+addr+"/metrics")
		return strings.Contains(metrics, "\nchatguard_consumer_buffered_events 0\n")
	})
	requireDeliveriesAccounted(t, metrics, want, c)
	for _, line := range []string{
		`chatguard_consumer_buffered_bytes 0`,
		`chatguard_consumer_oldest_buffered_age_seconds 0`,
	} {
		require.Contains(t, metrics, line+"\n")
	}
	require.Regexp(t, `chatguard_consumer_flushes_total\{outcome="ok"\} [1-9]`, metrics)
	require.Regexp(t, `chatguard_consumer_object_bytes_count [1-9]`, metrics)
	require.NoError(t, stop())

	requireEvents(t, want, c, true)
	reasons := map[string]string{}
	for _, l := range c.Errors {
		reasons[l.Body] = l.Reason
	}
	require.Contains(t, reasons[string(invalid[0])], "event_id is not a UUID")
	require.Contains(t, reasons[string(invalid[1])], "schema_version 3 of inference_log is not supported")
	require.Contains(t, reasons[string(invalid[2])], "not a JSON lake event")
}

// faultyS3 is a reverse proxy in front of the stack's S3 that answers 503
// while failing is set.
type faultyS3 struct {
	failing atomic.Bool
	refused atomic.Int64
}

func (f *faultyS3) start(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.failing.Load() {
			f.refused.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `<Error><Code>SlowDown</Code><Message>injected outage</Message></Error>`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Not parallel: it points the process's S3 endpoint at the proxy.
func TestStackS3OutageDeletesNothingAndLosesNothing(t *testing.T) {
	s := setupStack(t)
	var f faultyS3
	f.failing.Store(true)
	t.Setenv("AWS_ENDPOINT_URL_S3", f.start(t, stacktest.Get(t, "AWS_ENDPOINT_URL_S3")))
	const n = 120
	want := s.sendEvents(t, s3laketest.Events(n, 22, time.Now().UTC().Add(-2*time.Hour), 2))
	cfg := s.config()
	cfg.VisibilityTimeout = 3 * time.Second
	addr, stop := boot(t, cfg)

	metrics := func() string { _, m := get(t, "http://"+addr+"/metrics"); return m }
	waitFor(t, "every message to be received", func() bool { _, f := s.depth(t); return f == n })
	outage := time.Now()
	// Outlast the visibility timeout twice, until the queue has accepted
	// two renewals a message, so that renewals are exercised. A renewal
	// that comes late on a loaded machine lets a message be delivered
	// again meanwhile; the consumer keeps one copy, counting the other.
	waitFor(t, "an outage outlasting two renewals of every message", func() bool {
		v, inflight := s.depth(t)
		require.Equal(t, n, v+inflight, "nothing is deleted while nothing is written")
		return time.Since(outage) > 7*time.Second && f.refused.Load() > 10 && metricValue(t, metrics(), "chatguard_consumer_visibility_extended_total") >= 2*n
	})
	require.Zero(t, s.lake(t).Objects)
	var m string
	// A redelivery is counted received, then duplicate: wait out that gap.
	waitFor(t, "every delivery held once or counted a duplicate", func() bool {
		m = metrics()
		counts := eventCounts(t, m)
		return total(counts["received"]) == n+total(counts["duplicate"])
	})
	require.Regexp(t, `chatguard_consumer_flushes_total\{outcome="retry"\} [1-9]`, m)
	require.Contains(t, m, fmt.Sprintf("\nchatguard_consumer_buffered_events %d\n", n), "one copy of each message held")

	f.failing.Store(false)
	c := s.settled(t, n, 0)
	require.NoError(t, stop())
	requireEvents(t, want, c, true)
}

// child is the consumer running as a real process (the test binary
// re-executed), with its log lines.
type child struct {
	cmd    *exec.Cmd
	paused chan string // log lines of objects written, where the child paused before deleting
	admin  chan string // the admin address, once it listens
	done   chan error
}

func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childVar+"=1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, paused: make(chan string, 64), admin: make(chan string, 1), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			var rec struct {
				Msg       string `json:"msg"`
				AdminAddr string `json:"admin_addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "consumer: receiving" {
				c.admin <- rec.AdminAddr
			}
			if strings.Contains(line, `"msg":"paused after write"`) {
				select {
				case c.paused <- line:
				default:
				}
			}
		}
		c.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	return c
}

func (c *child) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("consumer process did not exit within 60s")
		return nil
	}
}

func TestStackKill9BetweenWriteAndDeleteLosesNothing(t *testing.T) {
	t.Parallel()
	s := setupStack(t)
	const n = 300
	evs := s3laketest.Events(n, 23, time.Now().UTC().Add(-2*time.Hour), 2)
	want := s.sendEvents(t, evs[:n/2])
	args := s.args(s.config())

	// One flusher: when it pauses after a write no other write is half
	// done, which the stack's S3 would keep as a broken object (real S3
	// PUTs are atomic).
	first := startChild(t, append(args, "--debug-pause-after-write", "10m", "--flush-concurrency", "1")...)
	select {
	case <-first.paused:
	case err := <-first.done:
		t.Fatalf("consumer exited before writing: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("no object written within 60s")
	}
	// More events for the same partitions, taken in while the flusher is
	// paused, so that the batches written after the restart differ from
	// the one written before the kill and its events get second copies (a
	// batch written again unchanged overwrites its object under the same
	// key instead).
	maps.Copy(want, s.sendEvents(t, evs[n/2:]))
	waitFor(t, "the paused process to take in every message", func() bool { v, f := s.depth(t); return v == 0 && f == n })
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	require.Error(t, first.wait(t), "killed, not exited")

	written := s.lake(t)
	require.Positive(t, written.Objects, "the killed process wrote objects")
	v, inflight := s.depth(t)
	require.Equal(t, n, v+inflight, "but deleted none of their messages")

	// The restarted process flushes only at SIGTERM, once it holds every
	// message, so that each partition's batch has all of its events and
	// differs from what was written before the kill.
	second := startChild(t, append(args, "--flush-age", "10m")...)
	var admin string
	select {
	case admin = <-second.admin:
	case <-time.After(60 * time.Second):
		t.Fatal("the restarted process did not start within 60s")
	}
	waitFor(t, "the restarted process to take in every message", func() bool {
		_, m := get(t, "http://"+admin+"/metrics")
		return strings.Contains(m, fmt.Sprintf("\nchatguard_consumer_buffered_events %d\n", n))
	})
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, second.wait(t), "SIGTERM drains and exits 0")
	s.settled(t, n, 0)

	c := s.lake(t)
	dups := requireEvents(t, want, c, true)
	require.Equal(t, len(written.Events), dups, "exactly the events written before the kill were written again")
	for _, k := range written.Keys {
		require.Contains(t, c.Keys, k, "objects are never removed")
	}
	requireDedupViews(t, s, want, dups)
}
