package s3lake_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

var (
	t0  = time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	now = t0.Add(48 * time.Hour)
)

const goodVerdict = `{"event_id":"3F2504E0-4F89-11D3-9A0C-0305E82C3301","event_type":"verdict","occurred_at":"2025-03-14T18:30:00.123+09:00","schema_version":1,
"payload":{"room_id":"r1","window_start":"2025-03-14T08:00:00Z","window_end":"2025-03-14T09:00:00Z","pipeline_version":"v1","run_id":"run1",
"status":"done","label":"abusive","category":"phishing_link","severity":4,"confidence":0.9,"action":"ban","early_exit":false,"fallback_used":true,"attempts":2,"latency_ms":1234.5}}`

func TestDecodeValid(t *testing.T) {
	t.Parallel()
	ev, err := pipeline.DecodeLakeEvent([]byte(goodVerdict), now)
	require.NoError(t, err)
	require.Equal(t, "3f2504e0-4f89-11d3-9a0c-0305e82c3301", ev.EventID, "the id is canonicalised")
	require.Equal(t, time.Date(2025, 3, 14, 9, 30, 0, 123e6, time.UTC), ev.OccurredAt)
	require.Equal(t, time.UTC, ev.OccurredAt.Location())
	require.Equal(t, now, ev.ReceivedAt)
	p, ok := ev.Payload.(pipeline.VerdictEvent)
	require.True(t, ok)
	require.Equal(t, pipeline.CategoryPhishingLink, p.Category)
	require.True(t, p.FallbackUsed)
}

func TestDecodeInvalid(t *testing.T) {
	t.Parallel()
	edit := func(from, to string) string {
		out := strings.Replace(goodVerdict, from, to, 1)
		if out == goodVerdict {
			panic("edit did not apply: " + from)
		}
		return out
	}
	tests := []struct {
		name, body, reason string
	}{
		{"not json", `{"event_id":`, "not a JSON lake event"},
		{"array", `[]`, "not a JSON lake event"},
		{"trailing", goodVerdict + ` {}`, "trailing data"},
		{"unknown envelope field", edit(`"schema_version":1,`, `"schema_version":1,"extra":1,`), `unknown field "extra"`},
		{"unknown payload field", edit(`"severity":4`, `"severity":4,"sevrity":4`), `unknown field "sevrity"`},
		{"unknown type", edit(`"event_type":"verdict"`, `"event_type":"click"`), `event_type "click" is unknown`},
		{"missing type", edit(`"event_type":"verdict",`, ``), "event_type is missing"},
		{"missing id", edit(`"event_id":"3F2504E0-4F89-11D3-9A0C-0305E82C3301",`, ``), "event_id is missing"},
		{"bad id", edit(`3F2504E0-4F89-11D3-9A0C-0305E82C3301`, `not-a-uuid`), "event_id is not a UUID"},
		{"urn id", edit(`3F2504E0-4F89-11D3-9A0C-0305E82C3301`, `urn:uuid:3F2504E0-4F89-11D3-9A0C-0305E82C3301`), "event_id is not a UUID"},
		{"missing occurred_at", edit(`"occurred_at":"2025-03-14T18:30:00.123+09:00",`, ``), "occurred_at is missing"},
		{"future occurred_at", edit(`2025-03-14T18:30:00.123+09:00`, `2031-01-01T00:00:00Z`), "in the future"},
		{"unknown version", edit(`"schema_version":1`, `"schema_version":7`), "schema_version 7 of verdict is not supported"},
		{"missing version", edit(`"schema_version":1,`, ``), "schema_version is missing"},
		{"missing payload", `{"event_id":"3f2504e0-4f89-11d3-9a0c-0305e82c3301","event_type":"verdict","occurred_at":"2025-03-14T09:00:00Z","schema_version":1}`, "payload is missing"},
		{"payload of another type", edit(`"status":"done"`, `"status":"done","stage":"judge"`), `unknown field "stage"`},
		{"bad enum", edit(`"label":"abusive"`, `"label":"evil"`), `payload.label "evil" is unknown`},
		{"wrong json type", edit(`"severity":4`, `"severity":"4"`), "payload is not a verdict"},
		{"missing room", edit(`"room_id":"r1",`, ``), "payload.room_id is missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := pipeline.DecodeLakeEvent([]byte(tc.body), now)
			var inv *pipeline.InvalidLakeEventError
			require.ErrorAs(t, err, &inv)
			require.Contains(t, inv.Reason, tc.reason)
		})
	}
}

const goodUndo = `{"event_id":"3f2504e0-4f89-11d3-9a0c-0305e82c3302","event_type":"moderator_feedback","occurred_at":"2025-03-14T09:30:00Z","schema_version":1,
"payload":{"room_id":"r1","window_start":"2025-03-14T08:00:00Z","window_end":"2025-03-14T09:00:00Z","pipeline_version":"v1","moderator_id":"m1",
"verdict_label":"abusive","verdict_category":"phishing_link","decided_label":"clean","decided_category":"clean","action_taken":"ban",
"decision":"undo","reverses_event_id":"3f2504e0-4f89-11d3-9a0c-0305e82c3301"}}`

// An undo's feedback event names the decision it reverses; a decision's
// carries neither field, and anything in between is refused.
func TestDecodeUndoFeedback(t *testing.T) {
	t.Parallel()
	ev, err := pipeline.DecodeLakeEvent([]byte(goodUndo), now)
	require.NoError(t, err)
	p := ev.Payload.(pipeline.ModeratorFeedback)
	require.Equal(t, pipeline.FeedbackUndo, p.Decision)
	require.Equal(t, "3f2504e0-4f89-11d3-9a0c-0305e82c3301", p.ReversesEventID)
	for _, tc := range []struct{ from, to, reason string }{
		{`"decision":"undo",`, ``, "reverses_event_id must be set on an undo, and only on an undo"},
		{`,"reverses_event_id":"3f2504e0-4f89-11d3-9a0c-0305e82c3301"`, ``, "reverses_event_id must be set on an undo"},
		{`"decision":"undo"`, `"decision":"confirm"`, `payload.decision "confirm" is not "undo"`},
	} {
		body := strings.Replace(goodUndo, tc.from, tc.to, 1)
		require.NotEqual(t, goodUndo, body)
		_, err := pipeline.DecodeLakeEvent([]byte(body), now)
		var inv *pipeline.InvalidLakeEventError
		require.ErrorAs(t, err, &inv, tc.from)
		require.Contains(t, inv.Reason, tc.reason)
	}
}

func TestDecodeReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := pipeline.DecodeLakeEvent([]byte(`{"event_type":"verdict","schema_version":9,"payload":{}}`), now)
	var inv *pipeline.InvalidLakeEventError
	require.ErrorAs(t, err, &inv)
	for _, want := range []string{"event_id is missing", "occurred_at is missing", "schema_version 9", "payload.room_id is missing"} {
		require.Contains(t, inv.Reason, want)
	}
	require.Equal(t, pipeline.EventVerdict, inv.EventType)
}

func decodeAll(t *testing.T, evs []pipeline.LakeEvent) []pipeline.LakeRecord {
	t.Helper()
	out := make([]pipeline.LakeRecord, len(evs))
	for i, ev := range evs {
		d, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), now)
		require.NoError(t, err)
		out[i] = d
	}
	return out
}

func TestParquetRoundTrip(t *testing.T) {
	t.Parallel()
	in := s3laketest.Events(300, 1, t0, 1)
	// An undo of a decision: its two fields round-trip too.
	undo := in[1]
	p := undo.Payload.(pipeline.ModeratorFeedback)
	p.Decision, p.ReversesEventID = pipeline.FeedbackUndo, in[1].EventID
	undo.EventID, undo.Payload = "3f2504e0-4f89-11d3-9a0c-0305e82c3303", p
	in = append(in, undo)
	byType := map[pipeline.EventType][]pipeline.LakeRecord{}
	want := map[string]pipeline.LakeEvent{}
	for i, d := range decodeAll(t, in) {
		byType[d.EventType] = append(byType[d.EventType], d)
		want[in[i].EventID] = in[i]
	}
	require.Len(t, byType, 3)
	got := map[string]pipeline.LakeEvent{}
	for typ, evs := range byType {
		var buf bytes.Buffer
		require.NoError(t, s3lake.EncodeParquet(&buf, typ, evs))
		var again bytes.Buffer
		require.NoError(t, s3lake.EncodeParquet(&again, typ, reverse(evs)))
		require.Equal(t, buf.Bytes(), again.Bytes(), "the same batch in any order gives the same bytes")
		switch typ {
		case pipeline.EventInferenceLog:
			collect(t, buf.Bytes(), got, s3lake.InferenceLogRow.LakeEvent)
		case pipeline.EventModeratorFeedback:
			collect(t, buf.Bytes(), got, s3lake.ModeratorFeedbackRow.LakeEvent)
		case pipeline.EventVerdict:
			collect(t, buf.Bytes(), got, s3lake.VerdictRow.LakeEvent)
		}
	}
	require.Equal(t, want, got)
}

func collect[T any](t *testing.T, data []byte, into map[string]pipeline.LakeEvent, conv func(T) pipeline.LakeEvent) {
	t.Helper()
	rows, err := s3lake.ReadRows[T](data)
	require.NoError(t, err)
	for _, r := range rows {
		ev := conv(r)
		into[ev.EventID] = ev
	}
}

func reverse[T any](s []T) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func TestEncodeRejectsMixedTypes(t *testing.T) {
	t.Parallel()
	evs := decodeAll(t, s3laketest.Events(3, 2, t0, 1))
	err := s3lake.EncodeParquet(&bytes.Buffer{}, pipeline.EventVerdict, evs)
	require.ErrorContains(t, err, "not verdict")
}

func TestKeys(t *testing.T) {
	t.Parallel()
	hour := pipeline.LakeHour(time.Date(2025, 3, 4, 7, 59, 59, 0, time.FixedZone("KST", 9*3600)))
	require.Equal(t, time.Date(2025, 3, 3, 22, 0, 0, 0, time.UTC), hour)
	k1 := s3lake.ObjectKey("events", pipeline.EventVerdict, hour, []string{"b", "a"})
	k2 := s3lake.ObjectKey("events/", pipeline.EventVerdict, hour, []string{"a", "b"})
	k3 := s3lake.ObjectKey("events/", pipeline.EventVerdict, hour, []string{"a", "c"})
	require.Equal(t, k1, k2, "deterministic whatever the order")
	require.NotEqual(t, k2, k3)
	require.Regexp(t, `^events/event_type=verdict/dt=2025-03-03/hour=22/part-[0-9a-f]{32}\.parquet$`, k1)
	require.Regexp(t, `^errors/dt=2025-03-03/hour=22/invalid-[0-9a-f]{32}\.jsonl$`, s3lake.ErrorKey("errors/", hour, []string{"m1"}))
}

func TestErrorLinesRoundTrip(t *testing.T) {
	t.Parallel()
	lines := []pipeline.LakeErrorLine{
		{MessageID: "m2", ReceivedAt: now, Reason: "event_id is missing", Body: `{"x":"<tag>"}`},
		{MessageID: "m1", ReceivedAt: now, Reason: "bad", EventType: pipeline.EventVerdict, EventID: "id", Body: "\xff not utf8"},
	}
	b, err := s3lake.EncodeErrors(lines)
	require.NoError(t, err)
	require.Equal(t, 2, bytes.Count(b, []byte("\n")))
	got, err := s3lake.DecodeErrors(b)
	require.NoError(t, err)
	require.Equal(t, "m1", got[0].MessageID)
	require.Equal(t, lines[0], got[1])
	require.Contains(t, string(b), `<tag>`, "bodies are not HTML-escaped")
}

// The store tests run against the local stack's S3, each in a bucket of
// its own.

func TestStorePutGetMultipart(t *testing.T) {
	t.Parallel()
	client := stacktest.S3(t)
	bucket := stacktest.NewBucket(t, "s3lake")
	st := s3lake.NewStore(client, bucket, 5<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	small := []byte("hello")
	big := bytes.Repeat([]byte("0123456789abcdef"), (11<<20)/16+3) // three parts
	require.NoError(t, st.Put(ctx, "events/a.parquet", small, "application/vnd.apache.parquet"))
	require.NoError(t, st.Put(ctx, "events/b.parquet", big, "application/vnd.apache.parquet"))
	require.NoError(t, st.Put(ctx, "events/a.parquet", []byte("again"), "application/vnd.apache.parquet"))
	got, err := st.Get(ctx, "events/b.parquet")
	require.NoError(t, err)
	require.True(t, bytes.Equal(big, got), "multipart object reads back intact")
	got, err = st.Get(ctx, "events/a.parquet")
	require.NoError(t, err)
	require.Equal(t, "again", string(got), "a second put overwrites")
	keys, err := st.List(ctx, "events/")
	require.NoError(t, err)
	require.Equal(t, []string{"events/a.parquet", "events/b.parquet"}, keys)
}

func TestStorePutMissingBucketIsPermanent(t *testing.T) {
	t.Parallel()
	client := stacktest.S3(t)
	st := s3lake.NewStore(client, stacktest.Unique("nope"), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := st.Put(ctx, "k", []byte("x"), "text/plain")
	var perm *pipeline.PermanentError
	require.True(t, errors.As(err, &perm), "got %v", err)
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(goodVerdict))
	for _, ev := range s3laketest.Events(6, 3, t0, 2) {
		b, _ := json.Marshal(ev)
		f.Add(b)
	}
	f.Add([]byte(`{"event_type":"verdict","payload":null}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := pipeline.DecodeLakeEvent(body, now)
		if err != nil {
			var inv *pipeline.InvalidLakeEventError
			if !errors.As(err, &inv) || inv.Reason == "" {
				t.Fatalf("error %v is not an InvalidEventError with a reason", err)
			}
			if _, err := s3lake.EncodeErrors([]pipeline.LakeErrorLine{{MessageID: "m", Reason: inv.Reason, Body: string(body)}}); err != nil {
				t.Fatalf("an invalid body cannot be recorded: %v", err)
			}
			return
		}
		// Whatever decodes must encode, and keep its identity.
		var buf bytes.Buffer
		if err := s3lake.EncodeParquet(&buf, ev.EventType, []pipeline.LakeRecord{ev}); err != nil {
			t.Fatalf("valid event does not encode: %v", err)
		}
		if ev.OccurredAt.Location() != time.UTC || len(ev.EventID) != 36 {
			t.Fatalf("not normalised: %v %q", ev.OccurredAt, ev.EventID)
		}
		if !strings.Contains(s3lake.PartitionPath(ev.EventType, pipeline.LakeHour(ev.OccurredAt)), fmt.Sprintf("event_type=%s/", ev.EventType)) {
			t.Fatal("partition path lost the type")
		}
	})
}

// BenchmarkEncodeParquet reports events/s into Parquet on one core and the
// lake bytes per event against gzip JSON lines of the same events.
func BenchmarkEncodeParquet(b *testing.B) {
	const n = 20000
	in := s3laketest.Events(n, 4, t0, 1)
	byType := map[pipeline.EventType][]pipeline.LakeRecord{}
	var jsonl bytes.Buffer
	for _, ev := range in {
		body, err := json.Marshal(ev)
		if err != nil {
			b.Fatal(err)
		}
		jsonl.Write(body)
		jsonl.WriteByte('\n')
		d, err := pipeline.DecodeLakeEvent(body, now)
		if err != nil {
			b.Fatal(err)
		}
		byType[d.EventType] = append(byType[d.EventType], d)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(jsonl.Bytes())
	_ = zw.Close()
	b.ReportAllocs()
	b.ResetTimer()
	var pq int
	for b.Loop() {
		pq = 0
		for typ, evs := range byType {
			var buf bytes.Buffer
			if err := s3lake.EncodeParquet(&buf, typ, evs); err != nil {
				b.Fatal(err)
			}
			pq += buf.Len()
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(pq)/n, "parquet_B/event")
	b.ReportMetric(float64(gz.Len())/n, "gzipjsonl_B/event")
	b.ReportMetric(float64(jsonl.Len())/n, "jsonl_B/event")
}

// BenchmarkDecodeEncode is the consumer's per-event CPU cost: JSON decode
// and validation plus Parquet encoding.
func BenchmarkDecodeEncode(b *testing.B) {
	const n = 20000
	in := s3laketest.Events(n, 5, t0, 1)
	bodies := make([][]byte, n)
	for i, ev := range in {
		bodies[i], _ = json.Marshal(ev)
	}
	b.ReportAllocs()
	for b.Loop() {
		byType := map[pipeline.EventType][]pipeline.LakeRecord{}
		for _, body := range bodies {
			d, err := pipeline.DecodeLakeEvent(body, now)
			if err != nil {
				b.Fatal(err)
			}
			byType[d.EventType] = append(byType[d.EventType], d)
		}
		for typ, evs := range byType {
			if err := s3lake.EncodeParquet(&bytes.Buffer{}, typ, evs); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
