package integration_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// traceBudget bounds the run from the first chat event to the last span
// the test waits for: two real-time windows through the trigger (1 s
// quiet), the worker (the stack's LLM simulator) and the consumer (1 s
// flush), with spans exported every 100 ms.
const traceBudget = 20 * time.Second

// traceSecrets are the test chat's text and contact details: no span
// attribute may hold one (nor, checked apart, a room id).
var traceSecrets = []string{"123456-12-123456", "9876-5432", "010-9876", "01098765432", "선입금", "수수료는 제가", "김민수", "국민은행", "dealking99"}

// traceChat is one room's chat: a scam asking for a deposit to a bank
// account and a phone number, so that every stage runs.
func traceChat(room string, at time.Time) []pipeline.ChatMessage {
	lines := []struct {
		role pipeline.SenderRole
		text string
	}{
		{pipeline.RoleBuyer, "안녕하세요 아직 판매중인가요?"},
		{pipeline.RoleSeller, "네 판매중입니다 선입금 해주시면 바로 보내드려요"},
		{pipeline.RoleSeller, "국민은행 123456-12-123456 김민수 로 보내주세요 수수료는 제가 낼게요"},
		{pipeline.RoleSeller, "카톡 dealking99 또는 010-9876-5432 로 연락주세요"},
	}
	var out []pipeline.ChatMessage
	for i, l := range lines {
		sender := "buyer-1"
		if l.role == pipeline.RoleSeller {
			sender = "seller-1"
		}
		out = append(out, pipeline.ChatMessage{MessageID: fmt.Sprintf("%s-m%d", room, i), SenderID: sender, SenderRole: l.role,
			SentAt: at.Add(time.Duration(i) * time.Millisecond), Kind: pipeline.KindText, Text: l.text})
	}
	return out
}

// TestOneTracePerRealtimeWindow runs the built trigger, worker and
// consumer as processes on the stack, exporting over OTLP/HTTP to a
// receiver in this test at 100 % sampling, and sends two rooms' chat
// events, each carrying the chat service's traceparent. Each window is one
// trace: the trigger's fire span (a root, linking the chat events it
// absorbed) is the parent of the worker's job span, whose stages hold the
// model attempts (every one with the GenAI attributes), and the consumer's
// lake writes of the window's verdict and inference logs are children of
// the trace or link it (one object holds several windows' events). No
// attribute of any span holds chat text, a contact detail or a room id.
func TestOneTracePerRealtimeWindow(t *testing.T) {
	built := time.Now()
	bins := buildCommands(t, "trigger", "worker", "consumer")
	t.Logf("built the three commands in %s", time.Since(built).Round(time.Millisecond))
	rc := &otlpReceiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)

	now := time.Now().UTC().Add(-time.Second)
	id := strings.ReplaceAll(stacktest.Unique("trace"), "_", "-")
	rooms := map[string][]pipeline.ChatMessage{}
	for i := range 2 {
		room := fmt.Sprintf("%s-room-%d", id, i)
		rooms[room] = traceChat(room, now)
	}
	rig := startTraceRig(t, bins, srv.URL, standin.StartChatAPI(t, rooms), id)

	// The chat service's own spans, one per room: the trigger links them.
	chatSpans := map[string]trace.SpanContext{}
	begin := time.Now()
	for room, msgs := range rooms {
		chatSpans[room] = rig.sendChatEvents(t, room, msgs)
	}
	var done traceState
	deadline := begin.Add(traceBudget)
	for {
		done = readTraces(rc.all())
		if done.complete(len(rooms)) {
			break
		}
		if time.Now().After(deadline) {
			rig.dumpLogs(t)
			require.FailNow(t, "the windows' traces did not complete within the budget", "%s; %d spans received", done.missing(len(rooms)), len(rc.all()))
		}
		time.Sleep(100 * time.Millisecond) // polling what the exporters post; bounded by traceBudget
	}
	t.Logf("two windows traced end to end in %s (%d spans)", time.Since(begin).Round(time.Millisecond), len(done.spans))
	done.assertConnected(t, chatSpans)
	assertNothingSensitive(t, rc.all(), rooms)
}

// traceState is what the spans received say about the windows' traces.
type traceState struct {
	spans []otlpSpan
	// fires are the trigger's window spans, by trace id.
	fires map[string]otlpSpan
	byID  map[string]otlpSpan
}

func readTraces(spans []otlpSpan) traceState {
	st := traceState{spans: spans, fires: map[string]otlpSpan{}, byID: map[string]otlpSpan{}}
	for _, s := range spans {
		st.byID[s.SpanID] = s
		if s.Name == "window fire" {
			st.fires[s.TraceID] = s
		}
	}
	return st
}

// reaches reports whether span s belongs to trace tr: in it, or linking
// a span of it.
func reaches(s otlpSpan, tr string) bool {
	if s.TraceID == tr {
		return true
	}
	for _, l := range s.Links {
		if strings.HasPrefix(l, tr+"/") {
			return true
		}
	}
	return false
}

// lakeWrite returns the consumer's write of eventType that reaches tr.
func (st traceState) lakeWrite(tr, eventType string) (otlpSpan, bool) {
	for _, s := range st.spans {
		if s.Name == "lake write" && s.Attrs["chatguard.lake.event_type"] == eventType && reaches(s, tr) {
			return s, true
		}
	}
	return otlpSpan{}, false
}

func (st traceState) job(tr string) (otlpSpan, bool) {
	for _, s := range st.spans {
		if s.Name == "job" && s.TraceID == tr {
			return s, true
		}
	}
	return otlpSpan{}, false
}

// complete: every window's trace has its job and its verdict's and
// inference logs' lake writes.
func (st traceState) complete(windows int) bool { return st.missing(windows) == "" }

func (st traceState) missing(windows int) string {
	if len(st.fires) < windows {
		return fmt.Sprintf("%d of %d window fire spans", len(st.fires), windows)
	}
	for tr := range st.fires {
		if _, ok := st.job(tr); !ok {
			return "trace " + tr + " has no job span"
		}
		for _, et := range []string{string(pipeline.EventVerdict), string(pipeline.EventInferenceLog)} {
			if _, ok := st.lakeWrite(tr, et); !ok {
				return "trace " + tr + " reaches no lake write of " + et
			}
		}
	}
	return ""
}

// assertConnected checks parent and child, kinds, services, links and
// the GenAI attributes of each window's trace.
func (st traceState) assertConnected(t *testing.T, chatSpans map[string]trace.SpanContext) {
	t.Helper()
	require.Len(t, st.fires, len(chatSpans), "one trace per window")
	linked := map[string]bool{}
	for tr, fire := range st.fires {
		require.Equal(t, "chatguard-trigger", fire.Service)
		require.Empty(t, fire.Parent, "the window's fire span is its trace's root")
		require.Equal(t, tracepb.Span_SPAN_KIND_PRODUCER, fire.Kind)
		for _, l := range fire.Links {
			linked[l] = true
		}
		job, _ := st.job(tr)
		require.Equal(t, "chatguard-worker", job.Service)
		require.Equal(t, fire.SpanID, job.Parent, "the job continues the window's trace")
		require.Equal(t, tracepb.Span_SPAN_KIND_CONSUMER, job.Kind)
		st.assertStages(t, tr, job)
		for _, et := range []string{string(pipeline.EventVerdict), string(pipeline.EventInferenceLog)} {
			w, _ := st.lakeWrite(tr, et)
			require.Equal(t, "chatguard-consumer", w.Service)
			if w.TraceID == tr {
				p, ok := st.byID[w.Parent]
				require.True(t, ok, "the %s lake write's parent is a span of the trace", et)
				require.Equal(t, "chatguard-worker", p.Service, "the %s lake write continues what the worker sent", et)
			}
		}
	}
	for room, sc := range chatSpans {
		require.True(t, linked[sc.TraceID().String()+"/"+sc.SpanID().String()], "the fire span of %s links the chat service's span", room)
	}
}

// assertStages: each stage is a child of the job, each model attempt a
// child of a stage with the GenAI attributes.
func (st traceState) assertStages(t *testing.T, tr string, job otlpSpan) {
	t.Helper()
	stagesSeen, attempts := 0, 0
	for _, s := range st.spans {
		if s.TraceID != tr {
			continue
		}
		switch {
		case strings.HasPrefix(s.Name, "stage "):
			stagesSeen++
			require.Equal(t, job.SpanID, s.Parent, "%s is a child of the job", s.Name)
		case strings.HasPrefix(s.Name, "chat "):
			attempts++
			parent := st.byID[s.Parent]
			require.True(t, strings.HasPrefix(parent.Name, "stage "), "%s is a child of a stage, not %q", s.Name, parent.Name)
			require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, s.Kind)
			for _, k := range []string{"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model",
				"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "chatguard.llm.pool"} {
				require.Contains(t, s.Attrs, k, "%s lacks %s", s.Name, k)
			}
			require.Equal(t, "chat", s.Attrs["gen_ai.operation.name"])
		}
	}
	require.GreaterOrEqual(t, stagesSeen, 2, "the scam chat goes past triage")
	require.GreaterOrEqual(t, attempts, stagesSeen, "a model attempt per stage at least")
}

// assertNothingSensitive scans every attribute of every span, as the lake
// is scanned: no chat text, no contact detail the redaction would mask,
// no room id (keyed pseudonyms are digests, not contact details).
func assertNothingSensitive(t *testing.T, spans []otlpSpan, rooms map[string][]pipeline.ChatMessage) {
	t.Helper()
	for _, s := range spans {
		for k, v := range s.Attrs {
			for _, secret := range traceSecrets {
				require.NotContains(t, v, secret, "%s (%s): attribute %s", s.Name, s.Service, k)
			}
			for room := range rooms {
				require.NotContains(t, v, room, "%s (%s): attribute %s names the room", s.Name, s.Service, k)
			}
			// A keyed pseudonym is a hex digest: a run of its decimal
			// digits may look like a number the redaction masks.
			if s.Strings[k] && !pseudonym.IsKeyed(v) {
				require.Equal(t, v, chatprep.Redact(v), "%s (%s): attribute %s holds something the redaction masks", s.Name, s.Service, k)
			}
		}
	}
}

// buildCommands builds chatguard's commands (cmd/<name>) into a temporary
// folder, bounded, and returns their paths by name.
func buildCommands(t *testing.T, names ...string) map[string]string {
	t.Helper()
	root, err := standin.RepoRoot()
	require.NoError(t, err)
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	bins := map[string]string{}
	for _, n := range names {
		bins[n] = filepath.Join(dir, n)
	}
	return bins
}

// traceRig is the three processes over queues, a database, a Redis key
// prefix and a lake prefix of their own.
type traceRig struct {
	sqs    *sqs.Client
	events stacktest.Queue
	logs   map[string]*lockedBuffer
}

func startTraceRig(t *testing.T, bins map[string]string, otlpURL, chatURL, id string) *traceRig {
	t.Helper()
	r := &traceRig{sqs: stacktest.SQS(t), logs: map[string]*lockedBuffer{}}
	r.events = stacktest.NewQueue(t, "chat-events", 5, 30*time.Second)
	realtime := stacktest.NewQueue(t, "review-realtime", 5, 30*time.Second)
	review := stacktest.NewQueue(t, "review", 5, 30*time.Second)
	feedback := stacktest.NewQueue(t, "feedback", 5, 30*time.Second)
	_, dsn := stacktest.MySQL(t)
	keyPrefix := "chatguard:" + id + ":"
	rdb := stacktest.Redis(t)
	t.Cleanup(func() { stacktest.DeleteKeys(rdb, keyPrefix) })
	lakePrefix := id + "/"
	t.Cleanup(func() { deleteLakePrefix(t, lakePrefix) })

	common := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": otlpURL, "OTEL_TRACES_SAMPLER": "parentbased_always_on",
		"OTEL_BSP_SCHEDULE_DELAY": "100", "CHATGUARD_ADMIN_ADDR": "127.0.0.1:0", "CHATGUARD_WAIT_TIME": "1s",
		"CHATGUARD_DEV_INSECURE_KEYS": "true",
	}
	mig := exec.Command(bins["worker"], "migrate")
	mig.Env = childEnv(common, map[string]string{"CHATGUARD_MYSQL_DSN": dsn})
	out, err := mig.CombinedOutput()
	require.NoError(t, err, "worker migrate: %s", out)

	r.start(t, bins["consumer"], childEnv(common, map[string]string{
		"CHATGUARD_FEEDBACK_QUEUE_URL": feedback.URL, "CHATGUARD_FEEDBACK_DLQ_URL": feedback.DLQURL,
		"CHATGUARD_LAKE_PREFIX": lakePrefix + "events/", "CHATGUARD_ERRORS_PREFIX": lakePrefix + "errors/", "CHATGUARD_FLUSH_AGE": "1s",
	}))
	r.start(t, bins["worker"], childEnv(common, map[string]string{
		"CHATGUARD_MYSQL_DSN": dsn, "CHATGUARD_CHAT_API_URL": chatURL,
		"CHATGUARD_REVIEW_QUEUE_URL": review.URL, "CHATGUARD_REVIEW_DLQ_URL": review.DLQURL, "CHATGUARD_REALTIME_QUEUE_URL": realtime.URL,
		"CHATGUARD_FEEDBACK_QUEUE_URL": feedback.URL, "CHATGUARD_FEEDBACK_DLQ_URL": feedback.DLQURL,
		"CHATGUARD_OUTBOX_POLL": "200ms",
	}))
	r.start(t, bins["trigger"], childEnv(common, map[string]string{
		"CHATGUARD_CHAT_EVENTS_QUEUE_URL": r.events.URL, "CHATGUARD_CHAT_EVENTS_DLQ_URL": r.events.DLQURL,
		"CHATGUARD_REVIEW_REALTIME_QUEUE_URL": realtime.URL, "CHATGUARD_KEY_PREFIX": keyPrefix,
		"CHATGUARD_QUIET": "1s", "CHATGUARD_FIRE_INTERVAL": "200ms",
	}))
	return r
}

// childEnv is this process's environment (the stack's variables loaded by
// stacktest) with the maps' entries after it: the later one wins.
func childEnv(ms ...map[string]string) []string {
	env := os.Environ()
	for _, m := range ms {
		for k, v := range m {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// start runs bin until the test ends, then stops it with SIGTERM (SIGKILL
// after 20 s) and waits for it.
func (r *traceRig) start(t *testing.T, bin string, env []string) {
	t.Helper()
	name := filepath.Base(bin)
	logs := &lockedBuffer{}
	r.logs[name] = logs
	cmd := exec.Command(bin)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
}

func (r *traceRig) dumpLogs(t *testing.T) {
	for name, b := range r.logs {
		t.Logf("%s log (tail):\n%s", name, b.tail(4000))
	}
}

// sendChatEvents announces msgs on chat-events as the chat service would,
// each carrying the traceparent of one sampled span of the chat service's
// own, which it returns.
func (r *traceRig) sendChatEvents(t *testing.T, room string, msgs []pipeline.ChatMessage) trace.SpanContext {
	t.Helper()
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	attrs := pipeline.WithTraceContext(trace.ContextWithSpanContext(context.Background(), sc), nil)
	var entries []types.SendMessageBatchRequestEntry
	for i, m := range msgs {
		b, err := json.Marshal(pipeline.ChatEvent{SchemaVersion: pipeline.ChatEventSchemaVersion, RoomID: room, MessageID: m.MessageID,
			SenderID: m.SenderID, SenderRole: string(m.SenderRole), Kind: string(m.Kind), SentAt: m.SentAt})
		require.NoError(t, err)
		ma := map[string]types.MessageAttributeValue{}
		for k, a := range attrs {
			ma[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(a.Value)}
		}
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(string(b)), MessageAttributes: ma})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := r.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(r.events.URL), Entries: entries})
	require.NoError(t, err)
	require.Empty(t, out.Failed)
	return sc
}

// deleteLakePrefix removes the run's lake objects.
func deleteLakePrefix(t *testing.T, prefix string) {
	c, bucket := stacktest.S3(t), stacktest.LakeBucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys, err := s3lake.NewStore(c, bucket, s3lake.DefaultPartSize).List(ctx, prefix)
	if err != nil {
		t.Logf("cleanup: list %s: %v", prefix, err)
		return
	}
	for _, k := range keys {
		_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
	}
}

// lockedBuffer is a process's output, written by its copier goroutine and
// read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
