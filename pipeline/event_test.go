package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"

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
		{"unknown field", `{"room_id":"r","extra":1}`, []string{"unknown field"}},
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
