package pipeline

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const validChatBody = `{"schema_version":1,"room_id":"room-7","message_id":"m-1","sender_id":"u-9","sender_role":"buyer","kind":"text","sent_at":"2026-12-02T04:10:00+09:00"}`

// chatBody returns validChatBody with fields replaced (nil deletes).
func chatBody(t *testing.T, kv ...any) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(validChatBody), &m))
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

func TestDecodeChatEventAccepts(t *testing.T) {
	t.Parallel()
	ev, err := DecodeChatEvent([]byte(validChatBody))
	require.NoError(t, err)
	require.Equal(t, ChatEvent{SchemaVersion: 1, RoomID: "room-7", MessageID: "m-1", SenderID: "u-9", SenderRole: "buyer", Kind: "text",
		SentAt: time.Date(2026, 12, 1, 19, 10, 0, 0, time.UTC)}, ev)
	require.Equal(t, time.UTC, ev.SentAt.Location(), "sent_at is normalised to UTC")

	tolerant := map[string]string{
		"unknown fields":     chatBody(t, "trace_id", "abc", "nested", map[string]any{"a": []int{1}}),
		"a text field":       chatBody(t, "text", "010-1234-5678 로 연락주세요"),
		"a new sender role":  chatBody(t, "sender_role", "moderator"),
		"a new kind":         chatBody(t, "kind", "video_call"),
		"sent_at far ahead":  chatBody(t, "sent_at", "2036-01-01T00:00:00Z"),
		"korean message ids": chatBody(t, "message_id", "메시지-1"),
	}
	for name, body := range tolerant {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ev, err := DecodeChatEvent([]byte(body))
			require.NoError(t, err)
			require.Equal(t, "room-7", ev.RoomID)
		})
	}
	// Invalid UTF-8 in an id is replaced by the JSON decoder, so the id
	// stays a valid Redis member and log field; Validate refuses it in an
	// event built in code.
	ev, err = DecodeChatEvent([]byte(`{"schema_version":1,"room_id":"r","message_id":"m-` + "\xff" + `","sender_id":"u","sender_role":"buyer","kind":"text","sent_at":"2026-12-02T04:10:00Z"}`))
	require.NoError(t, err)
	require.Equal(t, "m-\uFFFD", ev.MessageID)
	ev.MessageID = "m-\xff"
	require.ErrorContains(t, ev.Validate(), "message_id is not valid UTF-8")

	// A text field never survives decoding: the struct has nowhere to keep it.
	ev, err = DecodeChatEvent([]byte(tolerant["a text field"]))
	require.NoError(t, err)
	out, err := json.Marshal(ev)
	require.NoError(t, err)
	require.NotContains(t, string(out), "010-1234")
}

// TestDecodeChatEventRejectsCorpus is the corpus of malformed chat events:
// each must be refused with a reason naming every problem, so the trigger
// can dead-letter it with that reason.
func TestDecodeChatEventRejectsCorpus(t *testing.T) {
	t.Parallel()
	corpus := []struct {
		name string
		body string
		want []string
	}{
		{"empty body", ``, []string{"not a JSON chat event"}},
		{"not json", `room-7 m-1`, []string{"not a JSON chat event"}},
		{"array", `[` + validChatBody + `]`, []string{"not a JSON chat event"}},
		{"string", `"hello"`, []string{"not a JSON chat event"}},
		{"truncated", validChatBody[:40], []string{"not a JSON chat event"}},
		{"trailing object", validChatBody + `{}`, []string{"trailing data"}},
		{"two events", validChatBody + "\n" + validChatBody, []string{"trailing data"}},
		{"everything missing", `{}`, []string{"schema_version 0", "room_id is missing", "message_id is missing", "sender_id is missing", "sender_role is missing", "kind is missing", "sent_at is missing"}},
		{"null fields", chatBody(t, "room_id", nil, "sent_at", nil), []string{"room_id is missing", "sent_at is missing"}},
		{"future schema", chatBody(t, "schema_version", 2), []string{"schema_version 2 is not supported"}},
		{"schema as string", chatBody(t, "schema_version", "1"), []string{"not a JSON chat event"}},
		{"room id as number", chatBody(t, "room_id", 7), []string{"not a JSON chat event"}},
		{"room id with a path", chatBody(t, "room_id", "../admin"), []string{"reserved character"}},
		{"room id with a space", chatBody(t, "room_id", "room 7"), []string{"reserved character"}},
		{"room id too long", chatBody(t, "room_id", strings.Repeat("r", 129)), []string{"room_id is longer than 128"}},
		{"blank message id", chatBody(t, "message_id", "   "), []string{"message_id is missing"}},
		{"message id too long", chatBody(t, "message_id", strings.Repeat("m", 129)), []string{"message_id is longer than 128"}},
		{"message id with a newline", chatBody(t, "message_id", "m-1\nINFO forged"), []string{"message_id contains a control character"}},
		{"sender id too long", chatBody(t, "sender_id", strings.Repeat("u", 200)), []string{"sender_id is longer than 128"}},
		{"sender role upper case", chatBody(t, "sender_role", "BUYER"), []string{"sender_role must be a lower-case token"}},
		{"sender role too long", chatBody(t, "sender_role", strings.Repeat("b", 33)), []string{"sender_role is longer than 32"}},
		{"kind with markup", chatBody(t, "kind", "<script>"), []string{"kind must be a lower-case token"}},
		{"sent_at not a time", chatBody(t, "sent_at", "yesterday"), []string{"not a JSON chat event"}},
		{"sent_at epoch number", chatBody(t, "sent_at", 1764648600), []string{"not a JSON chat event"}},
		{"sent_at without zone", chatBody(t, "sent_at", "2026-12-02T04:10:00"), []string{"not a JSON chat event"}},
		{"oversized body", chatBody(t, "padding", strings.Repeat("x", MaxChatEventBytes)), []string{"over the 16384-byte bound"}},
		{"several problems", chatBody(t, "schema_version", 3, "kind", "", "message_id", nil), []string{"schema_version 3", "kind is missing", "message_id is missing"}},
	}
	for _, tc := range corpus {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeChatEvent([]byte(tc.body))
			var inv *InvalidChatEventError
			require.True(t, errors.As(err, &inv), "want *InvalidChatEventError, got %v", err)
			for _, w := range tc.want {
				require.Contains(t, inv.Reason, w)
			}
			require.LessOrEqual(t, len(inv.Reason), 1024, "the reason is bounded: it goes into an SQS attribute and a log line")
			require.True(t, strings.HasPrefix(err.Error(), "invalid chat event: "))
		})
	}
}

func TestReviewEventSource(t *testing.T) {
	t.Parallel()
	ev := validEvent()
	body, err := ev.Encode()
	require.NoError(t, err)
	require.NotContains(t, string(body), "source", "an event without a source is written as before")

	ev.Source = SourceRealtime
	body, err = ev.Encode()
	require.NoError(t, err)
	require.Contains(t, string(body), `"source":"realtime"`)
	got, err := DecodeReviewEvent(body)
	require.NoError(t, err)
	require.Equal(t, SourceRealtime, got.Source)

	// Strict writer: an unknown source is never sent.
	ev.Source = "hourly"
	_, err = ev.Encode()
	require.ErrorContains(t, err, `source "hourly" is not one of`)
	require.ErrorContains(t, ev.Validate(), `source "hourly"`)

	// Tolerant reader: an unknown or ill-typed source reads as empty.
	for _, src := range []string{`"hourly"`, `7`, `{"dag":"x"}`, `null`, `["batch"]`} {
		b := strings.Replace(string(mustEncode(t, validEvent())), `{`, `{"source":`+src+`,`, 1)
		got, err := DecodeReviewEvent([]byte(b))
		require.NoError(t, err, src)
		require.Equal(t, ReviewSource(""), got.Source, src)
	}
	for _, src := range []ReviewSource{SourceBatch, SourceSweep, SourceRealtime} {
		b := strings.Replace(string(mustEncode(t, validEvent())), `{`, `{"source":"`+string(src)+`",`, 1)
		got, err := DecodeReviewEvent([]byte(b))
		require.NoError(t, err)
		require.Equal(t, src, got.Source)
	}
}

func mustEncode(t *testing.T, ev ReviewEvent) []byte {
	t.Helper()
	b, err := ev.Encode()
	require.NoError(t, err)
	return b
}

func TestRealtimeRunID(t *testing.T) {
	t.Parallel()
	kst := time.FixedZone("KST", 9*3600)
	for _, tc := range []struct {
		end  time.Time
		want string
	}{
		{time.Date(2026, 12, 2, 4, 59, 59, 999, time.UTC), "rt-20261202T040000Z"},
		{time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC), "rt-20261202T050000Z"},
		{time.Date(2026, 12, 2, 13, 30, 0, 0, kst), "rt-20261202T040000Z"},
	} {
		id := RealtimeRunID(tc.end)
		require.Equal(t, tc.want, id)
		require.True(t, ValidRunID(id), "the worker accepts it and 'worker stop --run' can address it")
		ev := validEvent()
		ev.RunID, ev.Source = id, SourceRealtime
		require.NoError(t, ev.Validate())
		sig := StopSignal{Scope: StopScopeRun, RunID: id, Reason: "test", PublishedAt: tc.end, ExpiresAt: tc.end.Add(time.Hour)}
		require.NoError(t, sig.Validate())
		require.True(t, sig.Matches(NewStopTarget("room-1", tc.end.Add(-time.Minute), tc.end, id)))
	}
}
