package lake_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/lake"
	"github.com/chatguard/chatguard/pipeline"
)

// testShadowAgreement checks shadow_agreement_day against the same sums
// done here over the events.
func testShadowAgreement(t *testing.T, l *testLake, shadows []pipeline.LakeEvent, days []string) {
	type agg struct {
		n, ok, label, both, differs int
		latency, cost               float64
	}
	want := map[string]*agg{}
	for _, ev := range shadows {
		p := ev.Payload.(pipeline.ShadowVerdict)
		k := ev.OccurredAt.Format(time.DateOnly) + "|" + p.Candidate
		if want[k] == nil {
			want[k] = &agg{}
		}
		a := want[k]
		a.n++
		if p.TextDiffers {
			a.differs++
		}
		if p.Outcome != pipeline.ShadowOK {
			continue
		}
		a.ok++
		a.latency += p.LatencyMs
		a.cost += p.CostUSD
		if p.Label == p.LiveLabel {
			a.label++
			if p.Category == p.LiveCategory {
				a.both++
			}
		}
	}
	rows := l.query(t, "shadow_agreement_day", days...)
	require.Len(t, rows, len(want))
	disagree := 0
	for _, r := range rows {
		w := want[r[0]+"|"+r[1]]
		require.NotNil(t, w, "row %v", r)
		require.Equal(t, strconv.Itoa(w.n), r[2])
		require.Equal(t, strconv.Itoa(w.ok), r[3])
		requireClose(t, float64(w.label)/float64(w.ok), r[4], 1e-9)
		requireClose(t, float64(w.both)/float64(w.ok), r[5], 1e-9)
		requireClose(t, float64(w.differs)/float64(w.n), r[6], 1e-9)
		requireClose(t, w.latency/float64(w.ok), r[7], 1e-6)
		requireClose(t, w.cost/float64(w.ok), r[8], 1e-12)
		disagree += w.ok - w.label
	}
	require.Positive(t, disagree, "the sample has disagreements to find")
}

// testShadowPairs checks that shadow_pairs returns every shadow event
// once (the lake holds copies), with the live and the candidate's labels.
func testShadowPairs(t *testing.T, l *testLake, shadows []pipeline.LakeEvent, days []string) {
	want := map[string]pipeline.ShadowVerdict{}
	for _, ev := range shadows {
		want[ev.EventID] = ev.Payload.(pipeline.ShadowVerdict)
	}
	rows := l.query(t, "shadow_pairs", days...)
	require.Len(t, rows, len(shadows), "each event once")
	for _, r := range rows {
		p, ok := want[r[0]]
		require.True(t, ok, "row %v", r)
		require.Equal(t, []string{p.RoomID, p.Candidate, p.Outcome, string(p.LiveLabel), string(p.Label), strconv.FormatBool(p.TextDiffers)},
			[]string{r[3], r[7], r[10], r[12], r[14], r[16]})
		delete(want, r[0])
	}
}

func TestWithDedupViewsNamesOnlyTheViewsUsed(t *testing.T) {
	t.Parallel()
	q, err := lake.WithDedupViews("SELECT count(*) FROM verdict_dedup")
	require.NoError(t, err)
	require.Contains(t, q, "verdict_dedup AS (")
	require.NotContains(t, q, "shadow_verdict", "a table with no objects yet is not touched")
	require.NotContains(t, q, "inference_log")
	q, err = lake.WithDedupViews("SELECT count(*) FROM shadow_verdict_dedup")
	require.NoError(t, err)
	require.Contains(t, q, "shadow_verdict_dedup AS (")
	require.NotContains(t, q, "\nverdict_dedup AS (", "verdict_dedup inside shadow_verdict_dedup is no reference")
	q, err = lake.WithDedupViews("SELECT 1")
	require.NoError(t, err)
	require.Equal(t, "SELECT 1", q)
}
