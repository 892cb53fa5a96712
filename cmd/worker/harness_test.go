package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
)

// rig is one in-process worker over fresh stack resources: its own review
// queue and DLQ, its own feedback queue, its own database.
type rig struct {
	cfg Config
	// operator is the operator API address ("" when off).
	operator string
	sqs      *sqs.Client
	queue    stacktest.Queue
	feedback stacktest.Queue
	db       *sql.DB
	store    *mysql.Store
	addr     string
	cancel   context.CancelFunc
	done     chan error
	stopped  atomic.Bool
	runErr   error
	stopOnce sync.Once
	logs     *syncBuffer
}

type rigOpts struct {
	maxReceive int
	visibility time.Duration
	mut        func(*Config)
	reviewer   pipeline.Reviewer
	chatURL    string
	// beforeStart runs once the queues exist, before the worker starts
	// (a benchmark queues its backlog there).
	beforeStart func(r *rig)
}

// sampleRooms are hand-made rooms served by a private chat API process for
// the tests that fake the stage engine.
var sampleRooms = func() map[string][]pipeline.ChatMessage {
	at := time.Date(2026, 11, 3, 4, 10, 0, 0, time.UTC)
	rooms := map[string][]pipeline.ChatMessage{}
	for i := range 40 {
		id := fmt.Sprintf("room-%02d", i)
		rooms[id] = []pipeline.ChatMessage{
			{MessageID: id + "-1", SenderID: "b", SenderRole: pipeline.RoleBuyer, SentAt: at, Kind: pipeline.KindText, Text: "안녕하세요 아직 판매중인가요?"},
			{MessageID: id + "-2", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at.Add(time.Minute), Kind: pipeline.KindText, Text: "네 판매중입니다"},
		}
	}
	return rooms
}()

var testWindow = time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC)

// chatStandIn starts the chat API stand-in (deploy/local/chatapi) as a
// process of this test serving sampleRooms, and returns its base URL.
func chatStandIn(t testing.TB) string {
	t.Helper()
	return standin.StartChatAPI(t, sampleRooms)
}

func startRig(t testing.TB, o rigOpts) *rig {
	t.Helper()
	if o.maxReceive == 0 {
		o.maxReceive = 5
	}
	if o.visibility == 0 {
		o.visibility = 30 * time.Second
	}
	r := &rig{sqs: stacktest.SQS(t), done: make(chan error, 1), logs: &syncBuffer{}}
	r.queue = stacktest.NewQueue(t, "review", o.maxReceive, o.visibility)
	r.feedback = stacktest.NewQueue(t, "feedback", 5, 30*time.Second)
	db, dsn := stacktest.MySQL(t)
	r.db = db
	r.store = mysql.New(db)

	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"migrate", "--mysql-dsn", dsn}, func(string) string { return "" }, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Contains(t, out.String(), "00001_verdicts.sql")

	chatURL := o.chatURL
	if chatURL == "" {
		chatURL = chatStandIn(t)
	}
	cfg := DefaultConfig()
	cfg.DevInsecureKeys = true
	cfg.ReviewQueue.URL, cfg.ReviewDLQ.URL, cfg.Events.URL = r.queue.URL, r.queue.DLQURL, r.feedback.URL
	cfg.MySQL.DSN = dsn
	cfg.Chat.BaseURL = chatURL
	cfg.LLM.Primary.BaseURL, cfg.LLM.Primary.Model = "http://127.0.0.1:1/v1", "unused"
	cfg.AdminAddr = "127.0.0.1:0"
	cfg.Images.Hosts = []string{"img.example-market.test"} // the sample chats' image host
	cfg.Loop.Concurrency = 8
	cfg.Loop.WaitTime = time.Second
	cfg.Loop.VisibilityTimeout, cfg.Loop.HeartbeatInterval = o.visibility, o.visibility/3
	cfg.Loop.MaxReceiveCount = o.maxReceive
	cfg.Loop.RetryBase, cfg.Loop.RetryMax = time.Second, 2*time.Second
	cfg.Loop.DrainTimeout = 5 * time.Second
	cfg.Review.BusyRetry = time.Second
	cfg.Review.ClaimPoll = 100 * time.Millisecond
	cfg.Events.FlushAge = 20 * time.Millisecond
	cfg.LogLevel = "debug"
	if o.mut != nil {
		o.mut(&cfg)
	}
	r.cfg = cfg
	if o.beforeStart != nil {
		o.beforeStart(r)
	}
	ready := make(chan string, 1)
	m := &Main{Config: cfg, Reviewer: o.reviewer, OnReady: func(a string) { ready <- a },
		OnOperator: func(op, _ string) { r.operator = op },
		Log:        slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- m.Run(ctx) }()
	select {
	case r.addr = <-ready:
	case err := <-r.done:
		t.Fatalf("worker did not start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("worker did not start in 60s")
	}
	t.Cleanup(func() {
		_ = r.stop()
		if t.Failed() {
			t.Logf("worker log:\n%s", r.logs.tail(8000))
		}
	})
	return r
}

// stop cancels the worker like SIGTERM does and returns Run's result.
func (r *rig) stop() error {
	r.stopOnce.Do(func() {
		r.cancel()
		select {
		case r.runErr = <-r.done:
		case <-time.After(r.cfg.Loop.DrainTimeout + 30*time.Second):
			r.runErr = errors.New("worker did not stop")
		}
		r.stopped.Store(true)
	})
	return r.runErr
}

func event(room string, mut ...func(*pipeline.ReviewEvent)) pipeline.ReviewEvent {
	ev := pipeline.ReviewEvent{RoomID: room, WindowStart: testWindow, WindowEnd: testWindow.Add(time.Hour), RunID: "run-e2e",
		PublishedAt: time.Now().UTC(), SchemaVersion: pipeline.ReviewSchemaVersion}
	for _, f := range mut {
		f(&ev)
	}
	return ev
}

func (r *rig) send(t testing.TB, bodies ...string) {
	t.Helper()
	for len(bodies) > 0 {
		n := min(10, len(bodies))
		var entries []types.SendMessageBatchRequestEntry
		for i, b := range bodies[:n] {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)})
		}
		out, err := r.sqs.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(r.queue.URL), Entries: entries})
		require.NoError(t, err)
		require.Empty(t, out.Failed)
		bodies = bodies[n:]
	}
}

func (r *rig) sendEvents(t testing.TB, evs ...pipeline.ReviewEvent) {
	t.Helper()
	var bodies []string
	for _, ev := range evs {
		b, err := ev.Encode()
		require.NoError(t, err)
		bodies = append(bodies, string(b))
	}
	r.send(t, bodies...)
}

// queueCounts returns the visible and in-flight message counts of url.
func (r *rig) queueCounts(t testing.TB, url string) (visible, inflight int) {
	t.Helper()
	out, err := r.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	require.NoError(t, err)
	visible, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inflight, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inflight
}

// drainQueue receives every message of url now visible (without deleting).
func (r *rig) receiveAll(t testing.TB, url string, want int, within time.Duration) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(within)
	for len(got) < want && time.Now().Before(deadline) {
		out, err := r.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
			MessageAttributeNames: []string{"All"},
		})
		require.NoError(t, err)
		got = append(got, out.Messages...)
	}
	return got
}

func (r *rig) verdict(t testing.TB, room string, pv string) (pipeline.Verdict, error) {
	t.Helper()
	ev := event(room)
	return r.store.Get(context.Background(), ev.Key(pv))
}

func (r *rig) countRows(t testing.TB, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, r.db.QueryRowContext(context.Background(), q, args...).Scan(&n))
	return n
}

func (r *rig) get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// metric returns the value of one sample line of /metrics, 0 when absent.
func (r *rig) metric(t testing.TB, series string) float64 {
	t.Helper()
	_, body := r.get(t, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, series+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, series)), 64)
			require.NoError(t, err)
			return v
		}
	}
	return 0
}

// fakeReviewer stands in for the stage engine where a test is about the
// queue and the store: it counts calls per room and runs a per-room script.
type fakeReviewer struct {
	mu    sync.Mutex
	calls map[string]int
	fn    func(ctx context.Context, ev pipeline.ReviewEvent, attempt int) (pipeline.Verdict, error)
}

func newFakeReviewer(fn func(ctx context.Context, ev pipeline.ReviewEvent, attempt int) (pipeline.Verdict, error)) *fakeReviewer {
	return &fakeReviewer{calls: map[string]int{}, fn: fn}
}

func (f *fakeReviewer) PipelineVersion() string { return "e2e-fake" }

func (f *fakeReviewer) Review(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (pipeline.Verdict, error) {
	f.mu.Lock()
	f.calls[ev.RoomID]++
	f.mu.Unlock()
	if len(msgs) == 0 {
		return pipeline.Verdict{}, pipeline.Permanent(errors.New("fake: empty history"))
	}
	if f.fn != nil {
		return f.fn(ctx, ev, attempt)
	}
	return cleanVerdict(), nil
}

func (f *fakeReviewer) callsFor(room string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[room]
}

func cleanVerdict() pipeline.Verdict {
	return pipeline.Verdict{Status: pipeline.StatusDone, Label: pipeline.LabelClean, Category: pipeline.CategoryClean, Severity: 1,
		Confidence: 0.9, Action: pipeline.ActionNone, EarlyExit: true,
		Stages: []pipeline.StageResult{{Stage: pipeline.StageTriage, Pool: pipeline.PoolPrimary, Model: "fake", Attempts: 1,
			Latency: 10 * time.Millisecond, TokensIn: 50, TokensOut: 5, Output: []byte(`{"risk":"none"}`)}}}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
