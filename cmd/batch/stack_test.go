package main

// Acceptance tests on the local stack: the real athena, sqs and mysql
// clients against a private Athena stand-in process (deploy/local/athenasim,
// started by each test over its lake, so that each test controls its query
// timing and faults through the stand-in's admin endpoint), the stack's
// fauxqs and the stack's MySQL. They
// go through run(), the whole command, to see exit codes and output as
// Airflow would. They set AWS_ENDPOINT_URL_ATHENA, so they cannot be
// parallel.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/batchruns"
)

func TestMain(m *testing.M) { standin.Main(m) }

// stackEnv is one test's world: a stand-in over lakeDir, a fresh queue, a
// fresh migrated database.
type stackEnv struct {
	athena  *standin.Athena
	lakeDir string
	queue   stacktest.Queue
	runs    *batchruns.Store
	db      *sql.DB
	vars    map[string]string
}

func setupStack(t *testing.T, lakeDir string) *stackEnv {
	t.Helper()
	stacktest.Load(t)
	e := &stackEnv{lakeDir: lakeDir}
	e.athena = standin.StartAthena(t, standin.AthenaOptions{LakeDir: lakeDir})
	t.Setenv("AWS_ENDPOINT_URL_ATHENA", e.athena.URL)

	e.queue = stacktest.NewQueue(t, "batch", drainMaxReceive, drainVisibility)
	db, dsn := stacktest.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	e.runs, e.db = batchruns.New(db), db
	e.vars = map[string]string{
		"CHATGUARD_REVIEW_QUEUE_URL":  e.queue.URL,
		"CHATGUARD_MYSQL_DSN":         dsn,
		"CHATGUARD_ATHENA_DATABASE":   "chatguard",
		"CHATGUARD_ATHENA_WORKGROUP":  "primary",
		"CHATGUARD_ATHENA_POLL_MAX":   "100ms",
		"CHATGUARD_PROGRESS_INTERVAL": "200ms",
	}
	return e
}

// calls is how many calls of the Athena operation (StopQueryExecution, ...)
// the stand-in has answered, by its admin endpoint.
func (e *stackEnv) calls(t *testing.T, op string) int {
	t.Helper()
	return e.athena.Admin(t).Stats.Calls[op]
}

type outcome struct {
	code    int
	summary Summary
	stderr  string
}

func (e *stackEnv) run(t *testing.T, ctx context.Context, args ...string) outcome {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, args, func(k string) string { return e.vars[k] }, &out, &errb)
	o := outcome{code: code, stderr: errb.String()}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 1, "one JSON line on stdout; stderr:\n%s", o.stderr)
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &o.summary))
	return o
}

// The drain's queue settings. A receive can be lost in transit: fauxqs
// hands the messages out, the SDK fails reading the 200's body ("use of
// closed network connection", seen under -race on a loaded machine),
// retries, and the lost messages stay in flight until their visibility
// timeout ends, as they would in real SQS. So the test queue's visibility
// timeout is short, the drain waits well beyond it before it gives up, and
// it counts a message once however often it comes. The generous redrive
// keeps a message that is lost more than once out of the DLQ.
const (
	drainVisibility = 3 * time.Second
	drainIdle       = 4 * drainVisibility
	drainMaxReceive = 10
)

// drain receives and deletes messages until at least want distinct ones
// have come and the queue holds nothing, visible or in flight; or, should
// that never happen, until nothing new has come for drainIdle. It returns
// one event per distinct message id: a redelivery of a message whose
// receive was lost is not a second event, a second publish is.
func drain(t *testing.T, url string, want int) []pipeline.ReviewEvent {
	t.Helper()
	c := stacktest.SQS(t)
	deadline := time.Now().Add(3 * time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	seen := map[string]bool{}
	var got []pipeline.ReviewEvent
	redelivered := 0
	// Each long poll (1s) ends well before ctx does, so no poll is cut off
	// while fauxqs answers it.
	for idle := time.Now(); time.Since(idle) < drainIdle && time.Until(deadline) > 10*time.Second; {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		require.NoError(t, err)
		if r, ok := retry.GetAttemptResults(out.ResultMetadata); ok && len(r.Results) > 1 {
			t.Logf("drain: the SDK retried a receive after: %v", r.Results[0].Err)
		}
		if len(out.Messages) == 0 {
			if len(seen) >= want && queueEmpty(t, ctx, c, url) {
				break
			}
			continue
		}
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
			id := aws.ToString(m.MessageId)
			if seen[id] {
				redelivered++
				continue
			}
			seen[id] = true
			idle = time.Now()
			ev, err := pipeline.DecodeReviewEvent([]byte(aws.ToString(m.Body)))
			require.NoError(t, err, "every published body is a valid review event")
			got = append(got, ev)
		}
		// An entry may fail when the SDK retried a delete whose answer was
		// lost; queueEmpty proves in the end that everything is gone.
		_, err = c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del})
		require.NoError(t, err)
	}
	if redelivered > 0 {
		t.Logf("drain: %d redelivered messages counted once", redelivered)
	}
	v, f := queueDepth(t, ctx, c, url)
	require.Equal(t, [2]string{"0", "0"}, [2]string{v, f}, "the drain leaves nothing visible or in flight (%d distinct received, %d wanted)", len(got), want)
	return got
}

// queueDepth returns how many messages the queue holds visible and in
// flight. fauxqs counts exactly, so zero and zero means everything sent was
// received and deleted.
func queueDepth(t *testing.T, ctx context.Context, c *sqs.Client, url string) (visible, inflight string) {
	t.Helper()
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	require.NoError(t, err)
	return out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)],
		out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]
}

// queueEmpty reports whether queueDepth is zero and zero.
func queueEmpty(t *testing.T, ctx context.Context, c *sqs.Client, url string) bool {
	t.Helper()
	v, f := queueDepth(t, ctx, c, url)
	return v == "0" && f == "0"
}

// roomIDs returns the events' room ids, sorted, duplicates kept.
func roomIDs(evs []pipeline.ReviewEvent) []string {
	ids := make([]string, 0, len(evs))
	for _, ev := range evs {
		ids = append(ids, ev.RoomID)
	}
	slices.Sort(ids)
	return ids
}

// messageRow is the part of the chat_messages table (the marketplace's
// Parquet files, chat/messages/dt=…/hour=…/*.parquet) the tests read and
// write.
type messageRow struct {
	RoomID     string    `parquet:"room_id"`
	MessageID  string    `parquet:"message_id"`
	SenderID   string    `parquet:"sender_id"`
	SenderRole string    `parquet:"sender_role,dict"`
	SentAt     time.Time `parquet:"sent_at,timestamp(millisecond)"`
	Kind       string    `parquet:"kind,dict"`
	Text       string    `parquet:"text,optional"`
}

// lakeRooms reads every message file of the lake directly, apart from
// Athena and its SQL, and returns the rooms with a message in [start, end),
// sorted: what the rooms query must find.
func lakeRooms(t *testing.T, lakeDir string, start, end time.Time) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(lakeDir, "chat", "messages", "dt=*", "hour=*", "*.parquet"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "message files under %s", lakeDir)
	seen := map[string]bool{}
	for _, f := range files {
		rows, err := parquet.ReadFile[messageRow](f)
		require.NoError(t, err, f)
		for _, r := range rows {
			if !r.SentAt.Before(start) && r.SentAt.Before(end) {
				seen[r.RoomID] = true
			}
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func TestSampleWindowPublishesTheRoomsInTheLake(t *testing.T) {
	start, err := time.Parse(time.RFC3339, stacktest.Get(t, "CHATGUARD_SAMPLE_WINDOW_START"))
	require.NoError(t, err)
	end, err := time.Parse(time.RFC3339, stacktest.Get(t, "CHATGUARD_SAMPLE_WINDOW_END"))
	require.NoError(t, err)
	e := setupStack(t, stacktest.Get(t, "CHATGUARD_LAKE_DIR"))
	want := lakeRooms(t, e.lakeDir, start, end)
	require.NotEmpty(t, want, "the sample window has rooms")

	args := []string{"--window-start", start.Format(time.RFC3339), "--window-end", end.Format(time.RFC3339)}
	o := e.run(t, context.Background(), args...)
	require.Equal(t, 0, o.code, o.stderr)
	require.Equal(t, "succeeded", o.summary.Status)
	require.Equal(t, int64(len(want)), o.summary.Rows)
	require.Equal(t, int64(len(want)), o.summary.Published)
	require.Zero(t, o.summary.Failed)
	require.Equal(t, RunIDFor(start, end), o.summary.RunID)
	require.Equal(t, 1, o.summary.Attempt)
	t.Logf("sample window %s: %d rooms, %d calls (%.2f msgs/call)", RunIDFor(start, end), o.summary.Rows, o.summary.Calls, o.summary.MessagesPerCall)

	evs := drain(t, e.queue.URL, len(want))
	for _, ev := range evs {
		require.Equal(t, o.summary.RunID, ev.RunID)
		require.True(t, ev.WindowStart.Equal(start) && ev.WindowEnd.Equal(end))
	}
	require.Equal(t, want, roomIDs(evs), "exactly the rooms with a message in the window, each once")

	// A rerun of the window: same run id, a new attempt row.
	o2 := e.run(t, context.Background(), args...)
	require.Equal(t, 0, o2.code, o2.stderr)
	require.Equal(t, o.summary.RunID, o2.summary.RunID)
	require.Equal(t, 2, o2.summary.Attempt)
	attempts, err := e.runs.Attempts(context.Background(), o.summary.RunID)
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	for i, a := range attempts {
		require.Equal(t, i+1, a.Attempt)
		require.Equal(t, batchruns.StatusSucceeded, a.Status)
		require.Equal(t, int64(len(want)), a.Published)
		require.True(t, a.WindowStart.Equal(start) && a.WindowEnd.Equal(end))
		require.NotEmpty(t, a.QueryExecutionID)
	}
	require.Equal(t, want, roomIDs(drain(t, e.queue.URL, len(want))), "the rerun publishes every room once again")

	// A dry run reads the same rooms and publishes and records nothing.
	o3 := e.run(t, context.Background(), append(args, "--dry-run")...)
	require.Equal(t, 0, o3.code, o3.stderr)
	require.Equal(t, int64(len(want)), o3.summary.Rows)
	require.Zero(t, o3.summary.Published)
	require.Empty(t, drain(t, e.queue.URL, 0))
	attempts, err = e.runs.Attempts(context.Background(), o.summary.RunID)
	require.NoError(t, err)
	require.Len(t, attempts, 2)
}

// failedRun checks what every failed run must leave: exit 1, a clear
// message, and a failed attempt row carrying it.
func (e *stackEnv) failedRun(t *testing.T, o outcome, msg string) {
	t.Helper()
	require.Equal(t, 1, o.code, o.stderr)
	require.Equal(t, "failed", o.summary.Status)
	require.Contains(t, o.summary.Error, msg)
	require.Contains(t, o.stderr, msg)
	attempts, err := e.runs.Attempts(context.Background(), o.summary.RunID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	require.Equal(t, batchruns.StatusFailed, attempts[0].Status)
	require.Contains(t, attempts[0].Error, msg)
	require.False(t, attempts[0].FinishedAt.IsZero())
}

var failWindow = []string{"--window-start", "2026-11-01T00:00:00Z", "--window-end", "2026-11-01T01:00:00Z"}

func TestQueryErrorFailsTheRun(t *testing.T) {
	e := setupStack(t, stacktest.Get(t, "CHATGUARD_LAKE_DIR"))
	e.athena.Configure(t, `{"fail_next":1,"fail_reason":"SYNTAX_ERROR: line 3:5: Column 'sent_at' cannot be resolved","fail_retryable":false}`)
	o := e.run(t, context.Background(), failWindow...)
	e.failedRun(t, o, "SYNTAX_ERROR: line 3:5: Column 'sent_at' cannot be resolved")
	t.Logf("query error: %s", o.summary.Error)
	require.Zero(t, e.calls(t, "StopQueryExecution"), "a failed query needs no stop")
}

func TestAthenaTimeoutStopsTheQuery(t *testing.T) {
	e := setupStack(t, stacktest.Get(t, "CHATGUARD_LAKE_DIR"))
	e.athena.Configure(t, `{"min_run_time":"1m"}`)
	o := e.run(t, context.Background(), append(failWindow, "--athena-timeout", "1s")...)
	e.failedRun(t, o, "athena query timed out")
	t.Logf("timeout: %s", o.summary.Error)
	require.Equal(t, 1, e.calls(t, "StopQueryExecution"))
	require.Eventually(t, func() bool { return e.athena.Admin(t).Stats.Cancelled == 1 }, 5*time.Second, 10*time.Millisecond, "the stand-in saw the query cancelled")
}

func TestSIGTERMStopsTheQuery(t *testing.T) {
	e := setupStack(t, stacktest.Get(t, "CHATGUARD_LAKE_DIR"))
	e.athena.Configure(t, `{"min_run_time":"1m"}`)
	e.vars["CHATGUARD_PROGRESS_INTERVAL"] = "20ms"
	done := make(chan outcome, 1)
	go func() { done <- e.run(t, context.Background(), failWindow...) }()
	// run() listens for SIGTERM before it starts the query, so once the
	// query is being polled the signal reaches run, not the test binary.
	require.Eventually(t, func() bool { return e.calls(t, "GetQueryExecution") >= 3 }, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	var o outcome
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("batch did not end after SIGTERM")
	}
	e.failedRun(t, o, "received terminated")
	require.Contains(t, o.summary.Error, "stopped it", "the message says the query was stopped")
	t.Logf("SIGTERM: %s", o.summary.Error)
	require.Equal(t, 1, e.calls(t, "StopQueryExecution"))
	require.Eventually(t, func() bool { return e.athena.Admin(t).Stats.Cancelled == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Contains(t, o.stderr, "rows read 0", "progress was printed while the query ran")
}

// writeSyntheticLake writes rooms rooms with one message each into one hour
// partition of a fresh lake and returns the lake directory.
func writeSyntheticLake(t testing.TB, rooms int, hour time.Time) string {
	t.Helper()
	dir := t.TempDir()
	part := filepath.Join(dir, "chat", "messages", "dt="+hour.Format(time.DateOnly), "hour="+hour.Format("15"))
	require.NoError(t, os.MkdirAll(part, 0o755))
	f, err := os.Create(filepath.Join(part, "part-00000.parquet"))
	require.NoError(t, err)
	w := parquet.NewGenericWriter[messageRow](f)
	batch := make([]messageRow, 0, 10_000)
	for i := range rooms {
		batch = append(batch, messageRow{
			RoomID: fmt.Sprintf("syn-%07d", i), MessageID: fmt.Sprintf("m-%07d", i), SenderID: "u1", SenderRole: "buyer",
			SentAt: hour.Add(time.Duration(i%3600) * time.Second), Kind: "text", Text: "hello",
		})
		if len(batch) == cap(batch) || i == rooms-1 {
			_, err := w.Write(batch)
			require.NoError(t, err)
			batch = batch[:0]
		}
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
	return dir
}

func TestSyntheticRowsPublishInFullBatches(t *testing.T) {
	hour := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const rooms = 5_003
	e := setupStack(t, writeSyntheticLake(t, rooms, hour))
	o := e.run(t, context.Background(), failWindow...)
	require.Equal(t, 0, o.code, o.stderr)
	require.Equal(t, int64(rooms), o.summary.Published)
	require.GreaterOrEqual(t, o.summary.MessagesPerCall, 9.5)
	require.Equal(t, int64(501), o.summary.Calls, "ten per call, one call for the last three")
	wantRooms := make([]string, rooms)
	for i := range rooms {
		wantRooms[i] = fmt.Sprintf("syn-%07d", i)
	}
	require.Equal(t, wantRooms, roomIDs(drain(t, e.queue.URL, rooms)), "every room once")

	// --max-events cuts the run short without failing it.
	o = e.run(t, context.Background(), append(failWindow, "--max-events", "25")...)
	require.Equal(t, 0, o.code, o.stderr)
	require.Equal(t, int64(25), o.summary.Published)
	require.Equal(t, 2, o.summary.Attempt)
	got := roomIDs(drain(t, e.queue.URL, 25))
	require.Len(t, got, 25)
	require.Len(t, slices.Compact(slices.Clone(got)), 25, "25 distinct rooms")
	for _, id := range got {
		require.Contains(t, wantRooms, id)
	}
}

// BenchmarkBatchEndToEnd publishes 100,000 synthetic rooms through the
// whole command (Athena stand-in, fauxqs, MySQL) and reports messages per
// SendMessageBatch call and messages per second:
//
//	go test ./cmd/batch -run '^$' -bench EndToEnd -benchtime=1x
func BenchmarkBatchEndToEnd(b *testing.B) {
	hour := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const rooms = 100_000
	stacktest.Load(b)
	lake := writeSyntheticLake(b, rooms, hour)
	b.Setenv("AWS_ENDPOINT_URL_ATHENA", standin.StartAthena(b, standin.AthenaOptions{LakeDir: lake}).URL)
	db, dsn := stacktest.MySQL(b)
	_, err := migrations.Up(context.Background(), db)
	require.NoError(b, err)
	q := stacktest.NewQueue(b, "batch-bench", 3, 30*time.Second)
	vars := map[string]string{"CHATGUARD_REVIEW_QUEUE_URL": q.URL, "CHATGUARD_MYSQL_DSN": dsn, "CHATGUARD_ATHENA_POLL_MAX": "100ms", "CHATGUARD_PROGRESS_INTERVAL": "5s"}
	var sum Summary
	b.ResetTimer()
	for range b.N {
		var out, errb bytes.Buffer
		if code := run(context.Background(), failWindow, func(k string) string { return vars[k] }, &out, &errb); code != 0 {
			b.Fatalf("exit %d: %s", code, errb.String())
		}
		require.NoError(b, json.Unmarshal(out.Bytes(), &sum))
	}
	b.StopTimer()
	require.Equal(b, int64(rooms), sum.Published)
	b.ReportMetric(sum.MessagesPerCall, "msgs/call")
	b.ReportMetric(float64(sum.Published)/sum.DurationSeconds, "msgs/s")
}
