package s3lake_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

const goodShadow = `{"event_id":"3f2504e0-4f89-11d3-9a0c-0305e82c3301","event_type":"shadow_verdict","occurred_at":"2025-03-14T09:30:00Z","schema_version":1,
"payload":{"room_id":"r1","window_start":"2025-03-14T08:00:00Z","window_end":"2025-03-14T09:00:00Z","pipeline_version":"v1","run_id":"run1",
"candidate":"managed-large","candidate_model":"large-2","candidate_pipeline_version":"v2","outcome":"ok","live_label":"abusive","live_category":"phishing_link",
"label":"suspicious","category":"off_platform","severity":3,"confidence":0.7,"action":"warn","early_exit":false,"text_differs":true,"latency_ms":2500.5,"cost_usd":0.002,
"stages":[{"stage":"triage","tokens_in":900,"tokens_out":40,"latency_ms":300},{"stage":"judge","tokens_in":2000,"tokens_out":200,"latency_ms":2100.25}]}}`

func TestDecodeShadowVerdict(t *testing.T) {
	t.Parallel()
	ev, err := pipeline.DecodeLakeEvent([]byte(goodShadow), now)
	require.NoError(t, err)
	p, ok := ev.Payload.(pipeline.ShadowVerdict)
	require.True(t, ok)
	require.Equal(t, "v2", p.CandidatePipelineVersion)
	require.True(t, p.TextDiffers)
	require.Equal(t, []pipeline.ShadowStage{
		{Stage: pipeline.StageTriage, TokensIn: 900, TokensOut: 40, LatencyMs: 300},
		{Stage: pipeline.StageJudge, TokensIn: 2000, TokensOut: 200, LatencyMs: 2100.25},
	}, p.Stages)

	edit := func(from, to string) string {
		out := strings.Replace(goodShadow, from, to, 1)
		require.NotEqual(t, goodShadow, out, "edit %q did not apply", from)
		return out
	}
	failed := edit(`"outcome":"ok"`, `"outcome":"error","error_kind":"timeout"`)
	failed = strings.Replace(failed, `"label":"suspicious",`, ``, 1)
	_, err = pipeline.DecodeLakeEvent([]byte(failed), now)
	require.NoError(t, err, "a failed candidate has no label")

	tests := []struct{ name, body, reason string }{
		{"unknown payload field", edit(`"severity":3`, `"severity":3,"sevrity":3`), `unknown field "sevrity"`},
		{"missing candidate", edit(`"candidate":"managed-large",`, ``), "payload.candidate is missing"},
		{"missing candidate version", edit(`"candidate_pipeline_version":"v2",`, ``), "payload.candidate_pipeline_version is missing"},
		{"long candidate", edit(`"candidate":"managed-large"`, `"candidate":"`+strings.Repeat("x", 201)+`"`), "payload.candidate is longer than 200"},
		{"unknown outcome", edit(`"outcome":"ok"`, `"outcome":"maybe"`), `payload.outcome "maybe" is unknown`},
		{"ok without label", edit(`"label":"suspicious",`, ``), "payload.label is missing"},
		{"bad live label", edit(`"live_label":"abusive"`, `"live_label":"evil"`), `payload.live_label "evil" is unknown`},
		{"unknown stage", edit(`"stage":"triage"`, `"stage":"ocr"`), `stage "ocr" is unknown`},
		{"stage twice", edit(`"stage":"triage"`, `"stage":"judge"`), "stage judge is listed twice"},
		{"negative tokens", edit(`"tokens_in":900`, `"tokens_in":-1`), "stage triage has a negative count"},
		{"negative latency", edit(`"latency_ms":2500.5`, `"latency_ms":-1`), "negative latency or cost"},
		{"confidence", edit(`"confidence":0.7`, `"confidence":1.5`), "confidence is outside 0-1"},
		{"missing room", edit(`"room_id":"r1",`, ``), "payload.room_id is missing"},
		{"version", edit(`"schema_version":1`, `"schema_version":2`), "schema_version 2 of shadow_verdict is not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := pipeline.DecodeLakeEvent([]byte(tc.body), now)
			var inv *pipeline.InvalidLakeEventError
			require.ErrorAs(t, err, &inv)
			require.Contains(t, inv.Reason, tc.reason)
			require.Equal(t, pipeline.EventShadowVerdict, inv.EventType)
		})
	}
}

func TestShadowVerdictParquetRoundTrip(t *testing.T) {
	t.Parallel()
	in := s3laketest.ShadowEvents(200, 3, t0, 1)
	recs := decodeAll(t, in)
	want := map[string]pipeline.LakeEvent{}
	ran := map[int]int{}
	for _, ev := range in {
		want[ev.EventID] = ev
		ran[len(ev.Payload.(pipeline.ShadowVerdict).Stages)]++
	}
	require.Len(t, ran, len(pipeline.Stages), "the sample runs one to four stages")
	var buf, again bytes.Buffer
	require.NoError(t, s3lake.EncodeParquet(&buf, pipeline.EventShadowVerdict, recs))
	require.NoError(t, s3lake.EncodeParquet(&again, pipeline.EventShadowVerdict, reverse(recs)))
	require.Equal(t, buf.Bytes(), again.Bytes(), "the same batch in any order gives the same bytes")
	got := map[string]pipeline.LakeEvent{}
	collect(t, buf.Bytes(), got, s3lake.ShadowVerdictRow.LakeEvent)
	require.Equal(t, want, got)

	back, err := s3lake.ReadRecords(pipeline.EventShadowVerdict, buf.Bytes())
	require.NoError(t, err)
	require.Len(t, back, len(in))
	require.Equal(t, now, back[0].ReceivedAt, "compaction keeps received_at")

	// A stage that did not run is NULL, not zero: its columns read back
	// as absent, so sums over a stage count only reviews that ran it.
	rows, err := s3lake.ReadRows[s3lake.ShadowVerdictRow](buf.Bytes())
	require.NoError(t, err)
	for _, r := range rows {
		stages := got[r.EventID].Payload.(pipeline.ShadowVerdict).Stages
		require.Equal(t, len(stages) == 4, r.JudgeTokensIn != nil, "event %s", r.EventID)
	}

	err = s3lake.EncodeParquet(&bytes.Buffer{}, pipeline.EventVerdict, recs)
	require.ErrorContains(t, err, "not verdict")
}

func TestShadowVerdictsCompact(t *testing.T) {
	t.Parallel()
	store := s3laketest.NewMemStore()
	evs := s3laketest.ShadowEvents(120, 9, compactStart, 2)
	want := smallLake(t, store, evs, 3, compactStart.Add(time.Minute))
	smallLake(t, store, evs[:30], 1, compactStart.Add(30*time.Minute))
	requireLake(t, store, want, false)

	report, err := compactor(t, store, compactStart.Add(4*time.Hour), nil).Run(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, report.Compacted, "both closed hours of shadow_verdict")
	require.Equal(t, len(evs), report.RowsOut, "the copies are dropped")
	for dir, n := range requireLake(t, store, want, true) {
		require.Equal(t, 1, n, dir)
	}
}
