package pipeline_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

func TestDerivedEventIDs(t *testing.T) {
	t.Parallel()
	ws := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	k := pipeline.ReviewKey{RoomID: "r1", WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"}
	id := pipeline.InferenceLogEventID(k, pipeline.StageTriage, 1)
	u, err := uuid.Parse(id)
	require.NoError(t, err)
	require.Equal(t, uuid.Version(5), u.Version())

	// Same inputs, same id, whatever the time zone the key was built in.
	seoul := time.FixedZone("KST", 9*3600)
	k2 := k
	k2.WindowStart, k2.WindowEnd = ws.In(seoul), ws.Add(time.Hour).In(seoul)
	require.Equal(t, id, pipeline.InferenceLogEventID(k2, pipeline.StageTriage, 1))

	// Every part of the key and of the attempt tells ids apart.
	other := map[string]string{}
	add := func(name, v string) {
		require.NotEqual(t, id, v, name)
		require.NotContains(t, other, v, name)
		other[v] = name
	}
	add("attempt", pipeline.InferenceLogEventID(k, pipeline.StageTriage, 2))
	add("stage", pipeline.InferenceLogEventID(k, pipeline.StageJudge, 1))
	for name, mod := range map[string]func(*pipeline.ReviewKey){
		"room":    func(k *pipeline.ReviewKey) { k.RoomID = "r2" },
		"start":   func(k *pipeline.ReviewKey) { k.WindowStart = k.WindowStart.Add(time.Second) },
		"end":     func(k *pipeline.ReviewKey) { k.WindowEnd = k.WindowEnd.Add(time.Second) },
		"version": func(k *pipeline.ReviewKey) { k.PipelineVersion = "v2" },
	} {
		kk := k
		mod(&kk)
		add(name, pipeline.InferenceLogEventID(kk, pipeline.StageTriage, 1))
	}
	// No separator trick: a room id holding the next field is another key.
	tricky := k
	tricky.RoomID = `r1","2026`
	add("separator", pipeline.InferenceLogEventID(tricky, pipeline.StageTriage, 1))

	done := pipeline.VerdictEventID(k, pipeline.StatusDone)
	require.Equal(t, done, pipeline.VerdictEventID(k2, pipeline.StatusDone))
	add("verdict done", done)
	add("verdict failed", pipeline.VerdictEventID(k, pipeline.StatusFailed))
	// Revision 1 (and an event that does not know its revision) keeps the
	// id from before revisions; each later revision is an event of its own.
	require.Equal(t, done, pipeline.VerdictRevisionEventID(k, pipeline.StatusDone, 1))
	require.Equal(t, done, pipeline.VerdictRevisionEventID(k, pipeline.StatusDone, 0))
	add("verdict done, revision 2", pipeline.VerdictRevisionEventID(k, pipeline.StatusDone, 2))
	add("verdict done, revision 3", pipeline.VerdictRevisionEventID(k, pipeline.StatusDone, 3))
}

func TestShadowVerdictEventIDs(t *testing.T) {
	t.Parallel()
	ws := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	k := pipeline.ReviewKey{RoomID: "r1", WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"}
	id := pipeline.ShadowVerdictEventID(k, "managed-large")
	k2 := k
	k2.WindowStart = ws.In(time.FixedZone("KST", 9*3600))
	require.Equal(t, id, pipeline.ShadowVerdictEventID(k2, "managed-large"), "a shadow review sent twice is one event")
	ids := map[string]bool{id: true}
	for _, other := range []string{
		pipeline.ShadowVerdictEventID(k, "vllm-qwen3"),
		pipeline.VerdictEventID(k, pipeline.Status("managed-large")),
		pipeline.InferenceLogEventID(k, pipeline.StageName("managed-large"), 0),
	} {
		require.False(t, ids[other], "candidates and event types tell ids apart")
		ids[other] = true
	}
}
