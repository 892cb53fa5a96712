package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func validEvent() ReviewEvent {
	start := time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)
	return ReviewEvent{RoomID: "room-000001", WindowStart: start, WindowEnd: start.Add(time.Hour), RunID: "batch-1",
		PublishedAt: start.Add(65 * time.Minute), SchemaVersion: ReviewSchemaVersion}
}

func TestReviewEventRoundTrip(t *testing.T) {
	t.Parallel()
	ev := validEvent()
	// A producer in another zone still yields UTC on the wire and after decoding.
	kst := time.FixedZone("KST", 9*3600)
	ev.WindowStart, ev.WindowEnd = ev.WindowStart.In(kst), ev.WindowEnd.In(kst)
	body, err := ev.Encode()
	require.NoError(t, err)
	require.Contains(t, string(body), `"window_start":"2026-11-02T19:00:00Z"`)
	got, err := DecodeReviewEvent(body)
	require.NoError(t, err)
	require.Equal(t, validEvent(), got)
	require.Equal(t, time.UTC, got.WindowStart.Location())
	require.Equal(t, "room-000001", got.Key("pv1").RoomID)
}

func TestDecodeReviewEventRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"not json", `hello`, []string{"not a JSON review event"}},
		{"empty", ``, []string{"not a JSON review event"}},
		{"array", `[]`, []string{"not a JSON review event"}},
		{"trailing data", `{"room_id":"r","window_start":"2026-11-02T19:00:00Z","window_end":"2026-11-02T20:00:00Z","run_id":"x","published_at":"2026-11-02T20:00:00Z","schema_version":1} {}`, []string{"trailing data"}},
		{"everything missing", `{}`, []string{"schema_version 0 is not supported", "room_id is missing", "window_start is missing", "window_end is missing", "run_id is missing", "published_at is missing"}},
		{"inverted window", `{"room_id":"r","window_start":"2026-11-02T20:00:00Z","window_end":"2026-11-02T19:00:00Z","run_id":"x","published_at":"2026-11-02T20:00:00Z","schema_version":1}`, []string{"window_end is not after window_start"}},
		{"empty window", `{"room_id":"r","window_start":"2026-11-02T20:00:00Z","window_end":"2026-11-02T20:00:00Z","run_id":"x","published_at":"2026-11-02T20:00:00Z","schema_version":1}`, []string{"window_end is not after window_start"}},
		{"future schema", `{"room_id":"r","window_start":"2026-11-02T19:00:00Z","window_end":"2026-11-02T20:00:00Z","run_id":"x","published_at":"2026-11-02T20:00:00Z","schema_version":2}`, []string{"schema_version 2"}},
		{"room id with a path", `{"room_id":"../admin","window_start":"2026-11-02T19:00:00Z","window_end":"2026-11-02T20:00:00Z","run_id":"x","published_at":"2026-11-02T20:00:00Z","schema_version":1}`, []string{"reserved character"}},
		{"room id too long", `{"room_id":"` + strings.Repeat("r", 129) + `","window_start":"2026-11-02T19:00:00Z","window_end":"2026-11-02T20:00:00Z","run_id":"x","published_at":"2026-11-02T20:00:00Z","schema_version":1}`, []string{"longer than 128"}},
		{"bad time", `{"room_id":"r","window_start":"yesterday","window_end":"2026-11-02T20:00:00Z","run_id":"x","published_at":"2026-11-02T20:00:00Z","schema_version":1}`, []string{"not a JSON review event"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeReviewEvent([]byte(tc.body))
			var inv *InvalidEventError
			require.True(t, errors.As(err, &inv), "want *InvalidEventError, got %v", err)
			for _, w := range tc.want {
				require.Contains(t, inv.Reason, w)
			}
			disp, _ := Classify(err)
			require.Equal(t, GiveUp, disp, "an invalid event is never retried")
		})
	}
}

func TestDecodeReviewEventIgnoresUnknownFields(t *testing.T) {
	t.Parallel()
	body, err := validEvent().Encode()
	require.NoError(t, err)
	withExtra := strings.Replace(string(body), "{", `{"trace_id":"abc","source":{"dag":"x"},`, 1)
	got, err := DecodeReviewEvent([]byte(withExtra))
	require.NoError(t, err, "a producer that adds a field must not dead-letter the queue")
	require.Equal(t, validEvent(), got)
}

func TestEventLimits(t *testing.T) {
	t.Parallel()
	now := validEvent().PublishedAt.Add(time.Minute)
	require.NoError(t, DefaultEventLimits().Check(validEvent(), now))
	require.NoError(t, EventLimits{}.Check(validEvent(), now), "zero limits take the defaults")
	long := validEvent()
	long.WindowStart = long.WindowEnd.Add(-48 * time.Hour)
	require.ErrorContains(t, DefaultEventLimits().Check(long, now), "longer than 24h0m0s")
	require.NoError(t, EventLimits{MaxWindow: 72 * time.Hour}.Check(long, now), "the window bound is configurable")
	ahead := validEvent()
	ahead.PublishedAt = now.Add(10 * time.Minute)
	err := DefaultEventLimits().Check(ahead, now)
	var inv *InvalidEventError
	require.ErrorAs(t, err, &inv)
	require.Contains(t, inv.Reason, "10m0s in the future")
	require.NoError(t, EventLimits{MaxClockSkew: 15 * time.Minute}.Check(ahead, now))
	require.ErrorContains(t, EventLimits{MaxWindow: -1, MaxClockSkew: 2 * time.Hour}.Validate(), "max window")
	require.ErrorContains(t, EventLimits{MaxClockSkew: 2 * time.Hour}.Validate(), "clock skew")
}

func TestClipRunes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "가나", ClipRunes("가나다", 2))
	require.Equal(t, "abc", ClipRunes("abc", 5))
	require.Equal(t, "", ClipRunes("abc", 0))
	require.Equal(t, "a\uFFFD", ClipRunes("a\xffb", 2))
	for n := range 12 {
		require.True(t, utf8.ValidString(ClipRunes("한국어 텍스트", n)))
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		err   error
		disp  Disposition
		after time.Duration
	}{
		{"unknown errors are retried", errors.New("boom"), RetryLater, 0},
		{"retryable with delay", Retryable(errors.New("429"), 3*time.Second), RetryLater, 3 * time.Second},
		{"wrapped permanent", errors.Join(errors.New("ctx"), Permanent(errors.New("404"))), GiveUp, 0},
		{"answers unusable on every attempt", fmt.Errorf("judge: %w", &UnusableAnswerError{Stage: StageJudge, Attempts: 4, Err: errors.New("bad")}), GiveUp, 0},
		{"stopped wins", errors.Join(Retryable(errors.New("x"), time.Second), &StoppedError{Reason: "op"}), Stopped, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, after := Classify(tc.err)
			require.Equal(t, tc.disp, d)
			require.Equal(t, tc.after, after)
		})
	}
	require.NoError(t, Permanent(nil))
	require.NoError(t, Retryable(nil, time.Second))
}

func FuzzDecodeReviewEvent(f *testing.F) {
	good, _ := validEvent().Encode()
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"room_id":"r","window_start":"2026-11-02T20:00:00+09:00"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := DecodeReviewEvent(body)
		if err != nil {
			var inv *InvalidEventError
			require.True(t, errors.As(err, &inv), "every failure is an *InvalidEventError: %v", err)
			return
		}
		require.NoError(t, ev.Validate())
		require.True(t, ev.WindowEnd.After(ev.WindowStart))
		again, err := ev.Encode()
		require.NoError(t, err)
		back, err := DecodeReviewEvent(again)
		require.NoError(t, err)
		require.Equal(t, ev, back, "decoding is stable under re-encoding")
	})
}

// TestRecordedHistoryReadsTheFirstStagesOutput: the history is read from
// the first stage's output only; a stage without it, an output that is not
// an object, or one without a status is no history.
func TestRecordedHistoryReadsTheFirstStagesOutput(t *testing.T) {
	t.Parallel()
	st := func(out string) []StageResult {
		return []StageResult{{Stage: StageTriage, Output: []byte(out)}, {Stage: StageJudge, Output: []byte(`{"account_history":{"status":"ok"}}`)}}
	}
	got := RecordedHistory(st(`{"risk":"low","account_history":{"status":"timeout","days":30,"lines":null}}`))
	require.Equal(t, &HistorySeen{Status: HistoryTimeout, Days: 30}, got)
	for _, out := range []string{``, `{"risk":"low"}`, `["account_history"]`, `{"account_history":{"days":30}}`, `{"account_history":"ok"}`} {
		require.Nil(t, RecordedHistory(st(out)), out)
	}
	require.Nil(t, RecordedHistory(nil))
}

// TestDeadLetterAttributesKeepTheTraceFirst: a DLQ copy keeps the
// message's attributes under its own, the trace context first when they
// do not all fit in SQS's ten.
func TestDeadLetterAttributesKeepTheTraceFirst(t *testing.T) {
	orig := map[string]Attribute{TraceParentAttribute: StringAttribute("tp"), traceStateAttribute: StringAttribute("ts"), "reason": StringAttribute("theirs")}
	for i := range 12 {
		orig[fmt.Sprintf("a%02d", i)] = NumberAttribute(int64(i))
	}
	dlq := map[string]Attribute{"reason": StringAttribute("ours"), "source": StringAttribute("m1")}
	got := DeadLetterAttributes(orig, dlq)
	require.Len(t, got, MaxMessageAttributes)
	require.Equal(t, "ours", got["reason"].Value, "the DLQ's own attributes win")
	require.Equal(t, "tp", got[TraceParentAttribute].Value)
	require.Equal(t, "ts", got[traceStateAttribute].Value)
	require.Contains(t, got, "a00")
	require.NotContains(t, got, "a11")
	require.Len(t, orig, 15, "the message's map is not changed")
	require.Equal(t, dlq, DeadLetterAttributes(nil, dlq))
}
