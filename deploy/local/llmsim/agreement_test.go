package llmsim

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

// TestAgreementWithSampleData runs the judge rules over the local stack's
// synthetic rooms and compares with their ground truth. The rules were
// written against the same vocabulary, so agreement is near perfect; the
// test keeps the two from drifting apart silently, and guards the promises
// that matter most: hard negatives come out clean and a prompt injection
// never makes a room clean.
func TestAgreementWithSampleData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lake, truthDir := filepath.Join(dir, "lake"), filepath.Join(dir, "truth")
	_, err := sampledata.Generate(t.Context(), sampledata.Options{LakeDir: lake, TruthDir: truthDir, Seed: 7, Rooms: 600})
	require.NoError(t, err)
	rooms, err := sampledata.LoadMessages(lake)
	require.NoError(t, err)
	truth, err := sampledata.LoadTruth(truthDir)
	require.NoError(t, err)

	var n, label, category, severity, hardNegatives, injections int
	var evHit, evCited, evTruth int
	for room, msgs := range rooms {
		tr, ok := truth[room]
		require.True(t, ok, room)
		lines, err := stages.ParseTranscript(stages.FormatTranscript(msgs))
		require.NoError(t, err)
		j := judgeAnswer(Analyze(lines))
		n++
		if j.Label == tr.Label {
			label++
		}
		if j.Category == tr.Category {
			category++
		}
		if j.Severity == max(tr.Severity, 1) {
			severity++
		}
		if tr.HardNegative {
			hardNegatives++
			require.Equal(t, pipeline.LabelClean, j.Label, "hard negative %s (%s): %s", room, tr.Scenario, j.Rationale)
		}
		if tr.Injection {
			injections++
			require.NotEqual(t, pipeline.LabelClean, j.Label, "injected room %s (%s) came out clean", room, tr.Scenario)
		}
		want := map[string]bool{}
		for _, id := range tr.EvidenceMessageIDs {
			want[id] = true
		}
		for _, id := range j.EvidenceIDs {
			if want[id] {
				evHit++
			}
		}
		evCited += len(j.EvidenceIDs)
		evTruth += len(tr.EvidenceMessageIDs)
	}
	require.Positive(t, hardNegatives)
	require.Positive(t, injections)
	t.Logf("%d rooms: label %.3f, category %.3f, severity %.3f; evidence precision %.3f, recall %.3f",
		n, ratio(label, n), ratio(category, n), ratio(severity, n), ratio(evHit, evCited), ratio(evHit, evTruth))
	require.GreaterOrEqual(t, ratio(label, n), 0.95)
	require.GreaterOrEqual(t, ratio(category, n), 0.95)
	require.GreaterOrEqual(t, ratio(severity, n), 0.9)
	require.GreaterOrEqual(t, ratio(evHit, evTruth), 0.9)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
