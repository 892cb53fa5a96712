package lake_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// testCostPer1000 checks cost_per_1000_reviews against the same sums done
// here over the events: a review counts once, on the day of its first call.
func testCostPer1000(t *testing.T, l *testLake, logs []pipeline.LakeEvent, days []string) {
	type review struct {
		day                             string
		calls, in, cached, out          int
		cost, costPrimary, costFallback float64
	}
	reviews := map[string]*review{}
	for _, ev := range logs {
		p := ev.Payload.(pipeline.InferenceLog)
		k := fmt.Sprintf("%s|%s|%s|%s", p.RoomID, p.WindowStart, p.WindowEnd, p.PipelineVersion)
		day := ev.OccurredAt.Format(time.DateOnly)
		r := reviews[k]
		if r == nil {
			r = &review{day: day}
			reviews[k] = r
		}
		r.day = min(r.day, day)
		r.calls++
		r.in += p.TokensIn
		r.cached += p.TokensCached
		r.out += p.TokensOut
		r.cost += p.CostUSD
		if p.Pool == pipeline.PoolFallback {
			r.costFallback += p.CostUSD
		} else {
			r.costPrimary += p.CostUSD
		}
	}
	type agg struct {
		reviews, calls, in, cached, out int
		cost, primary, fallback         float64
	}
	want := map[string]*agg{}
	for _, r := range reviews {
		a := want[r.day]
		if a == nil {
			a = &agg{}
			want[r.day] = a
		}
		a.reviews++
		a.calls += r.calls
		a.in += r.in
		a.cached += r.cached
		a.out += r.out
		a.cost += r.cost
		a.primary += r.costPrimary
		a.fallback += r.costFallback
	}
	rows := l.query(t, "cost_per_1000_reviews", days...)
	require.Len(t, rows, len(want))
	for _, r := range rows {
		w := want[r[0]]
		require.NotNil(t, w, "row %v", r)
		require.Equal(t, strconv.Itoa(w.reviews), r[1])
		require.Equal(t, strconv.Itoa(w.calls), r[2])
		require.Equal(t, strconv.Itoa(w.in), r[3])
		require.Equal(t, strconv.Itoa(w.cached), r[4])
		require.Positive(t, w.cached, "the sample has cached tokens")
		requireClose(t, float64(w.cached)/float64(w.in), r[5], 1e-9)
		require.Equal(t, strconv.Itoa(w.out), r[6])
		requireClose(t, w.primary, r[7], 1e-9)
		requireClose(t, w.fallback, r[8], 1e-9)
		requireClose(t, w.cost, r[9], 1e-9)
		requireClose(t, 1000*w.cost/float64(w.reviews), r[10], 1e-9)
	}
}

// testModeratorPrecision checks moderator_precision_category_week against
// the same counts done here: flagged verdicts only, weeks from Monday.
func testModeratorPrecision(t *testing.T, l *testLake, feedback []pipeline.LakeEvent, days []string) {
	type agg struct{ n, kept, same int }
	want := map[string]*agg{}
	for _, ev := range feedback {
		p := ev.Payload.(pipeline.ModeratorFeedback)
		if p.VerdictLabel != pipeline.LabelAbusive && p.VerdictLabel != pipeline.LabelSuspicious {
			continue
		}
		d := ev.OccurredAt.UTC()
		monday := d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7)).Format(time.DateOnly)
		k := monday + "|" + string(p.VerdictCategory)
		if want[k] == nil {
			want[k] = &agg{}
		}
		want[k].n++
		if p.DecidedLabel != pipeline.LabelClean {
			want[k].kept++
			if p.DecidedCategory == p.VerdictCategory {
				want[k].same++
			}
		}
	}
	rows := l.query(t, "moderator_precision_category_week", days...)
	require.Len(t, rows, len(want))
	for _, r := range rows {
		w := want[r[0]+"|"+r[1]]
		require.NotNil(t, w, "row %v", r)
		require.Equal(t, strconv.Itoa(w.n), r[2])
		require.Equal(t, strconv.Itoa(w.kept), r[3])
		requireClose(t, float64(w.kept)/float64(w.n), r[4], 1e-9)
		requireClose(t, float64(w.same)/float64(w.n), r[5], 1e-9)
	}
}
