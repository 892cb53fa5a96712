package s3lake_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// TestActionEventsRoundTripWithoutRawIDs: protective_action events, as
// the store and the relay build them from bodies that hold raw account
// ids, decode, go to Parquet and read back unchanged; no row of the table
// holds a raw account id, and the published events have no offender.
func TestActionEventsRoundTripWithoutRawIDs(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	evs := s3laketest.ActionEvents(60, 3, at, 1)
	recs := make([]pipeline.LakeRecord, 0, len(evs))
	phases := map[string]int{}
	for _, ev := range evs {
		d, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), at.Add(3*time.Hour))
		require.NoError(t, err)
		recs = append(recs, d)
		phases[d.Payload.(pipeline.ActionEvent).Phase]++
	}
	require.Positive(t, phases[pipeline.ActionPhaseWritten])
	require.Positive(t, phases[pipeline.ActionPhasePublished])
	var buf bytes.Buffer
	require.NoError(t, s3lake.EncodeParquet(&buf, pipeline.EventProtectiveAction, recs))
	back, err := s3lake.ReadRecords(pipeline.EventProtectiveAction, buf.Bytes())
	require.NoError(t, err)
	require.Len(t, back, len(recs))
	byID := map[string]pipeline.LakeRecord{}
	for _, r := range recs {
		byID[r.EventID] = r
	}
	offenders := 0
	for _, r := range back {
		want := byID[r.EventID]
		require.Equal(t, want.Payload, r.Payload, "event %s", r.EventID)
		p := r.Payload.(pipeline.ActionEvent)
		if p.Offender != "" {
			offenders++
			require.True(t, pipeline.IsSubjectPseudonym(p.Offender))
			require.Equal(t, pipeline.ActionPhaseWritten, p.Phase)
		}
	}
	require.Positive(t, offenders)
	rows, err := s3lake.ReadRows[s3lake.ActionRow](buf.Bytes())
	require.NoError(t, err)
	for _, row := range rows {
		b, err := json.Marshal(row) // every column's value, pointers followed
		require.NoError(t, err)
		require.NotContains(t, string(b), "acct-raw-", "no raw account id in the lake")
	}
}

// TestDecodeActionEvent: the decoder refuses what must not reach the
// table, a raw offender id above all, naming the problem without echoing
// the value.
func TestDecodeActionEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	rec := s3laketest.ActionRecord(7, "scam_payment_warn", pipeline.ActionWarnCounterpart, pipeline.ModeOn, at)
	good := s3laketest.Body(t, pipeline.ActionWrittenEvent(rec))
	_, err := pipeline.DecodeLakeEvent(good, at)
	require.NoError(t, err)
	edit := func(f func(p map[string]any)) []byte {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(good, &ev))
		f(ev["payload"].(map[string]any))
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		return b
	}
	tests := []struct {
		name   string
		body   []byte
		reason string
	}{
		{"raw offender", edit(func(p map[string]any) { p["offender"] = "seller-8812" }), "payload.offender is not a keyed pseudonym"},
		{"unknown phase", edit(func(p map[string]any) { p["phase"] = "applied" }), `payload.phase "applied" is unknown`},
		{"unknown action", edit(func(p map[string]any) { p["action"] = "ban" }), `payload.action "ban" is unknown`},
		{"mode off", edit(func(p map[string]any) { p["mode"] = "off" }), "payload.mode"},
		{"no key", edit(func(p map[string]any) { delete(p, "idempotency_key") }), "payload.idempotency_key is missing"},
		{"rule not a token", edit(func(p map[string]any) { p["rule_id"] = "Rule 1" }), "payload.rule_id must be a lower-case token"},
		{"published without time", edit(func(p map[string]any) { p["phase"] = "published" }), "payload.published_at"},
		{"half a window", edit(func(p map[string]any) { delete(p, "window_end") }), "window_start and window_end come together"},
		{"unknown field", edit(func(p map[string]any) { p["text"] = "hi" }), `unknown field "text"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := pipeline.DecodeLakeEvent(tc.body, at)
			var inv *pipeline.InvalidLakeEventError
			require.ErrorAs(t, err, &inv)
			require.Contains(t, inv.Reason, tc.reason)
			require.NotContains(t, inv.Reason, "8812", "the reason never echoes the value")
			require.Equal(t, pipeline.EventProtectiveAction, inv.EventType)
		})
	}
}

// TestActionEventIDs: one event per key and phase, the same from every
// producer, and a published event carries its body's fields.
func TestActionEventIDs(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	rec := s3laketest.ActionRecord(1, "scam_payment_warn", pipeline.ActionWarnCounterpart, pipeline.ModeOn, at)
	w1, w2 := pipeline.ActionWrittenEvent(rec), pipeline.ActionWrittenEvent(rec)
	require.Equal(t, w1, w2)
	body, err := pipeline.EncodeProtectiveAction(rec.ProtectiveAction)
	require.NoError(t, err)
	pub, err := pipeline.ActionPublishedEvent(body, at.Add(2*time.Second), 0)
	require.NoError(t, err)
	require.NotEqual(t, w1.EventID, pub.EventID)
	require.Equal(t, pipeline.ActionEventID(rec.IdempotencyKey, pipeline.ActionPhasePublished), pub.EventID)
	p := pub.Payload.(pipeline.ActionEvent)
	require.Equal(t, at.Add(2*time.Second), *p.PublishedAt)
	require.Equal(t, at.Add(2*time.Second), pub.OccurredAt)
	require.Equal(t, 1, p.Sends, "a publish took at least one send")
	require.Equal(t, "scam_payment_warn", p.RuleID)
	require.Empty(t, p.Offender)
	require.Nil(t, p.WindowStart)
	_, err = pipeline.ActionPublishedEvent([]byte(`{"schema_version":9}`), at, 1)
	require.Error(t, err)
	require.False(t, strings.Contains(string(s3laketest.Body(t, pub)), s3laketest.ActionAccount(1)), "the body's raw account stays out")
}
