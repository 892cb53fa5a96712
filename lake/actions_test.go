package lake_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/lake"
	"github.com/chatguard/chatguard/pipeline"
)

// testActionsByRule checks actions_by_rule_day against the same counts
// done here over the events: written forward actions, their distinct
// offenders, publishes, reversals and re-applications, and the protection
// latency percentiles of the published forward actions.
func testActionsByRule(t *testing.T, l *testLake, evs []pipeline.LakeEvent, days []string) {
	type agg struct {
		actions, published, reversals, reapplied int
		accounts                                 map[string]bool
		lat                                      []float64
	}
	want := map[string]*agg{}
	for _, ev := range evs {
		p := ev.Payload.(pipeline.ActionEvent)
		k := fmt.Sprintf("%s|%s|%s", ev.OccurredAt.Format(time.DateOnly), p.RuleID, p.Mode)
		if want[k] == nil {
			want[k] = &agg{accounts: map[string]bool{}}
		}
		a := want[k]
		switch {
		case p.Phase == pipeline.ActionPhaseWritten && p.Reverses == "":
			a.actions++
			if p.Offender != "" {
				a.accounts[p.Offender] = true
			}
		case p.Phase == pipeline.ActionPhasePublished && p.Reverses == "":
			a.published++
			if p.MessageAt != nil {
				a.lat = append(a.lat, p.PublishedAt.Sub(*p.MessageAt).Seconds())
			}
		case p.Phase == pipeline.ActionPhaseWritten && p.Action.Reversal():
			a.reversals++
		case p.Phase == pipeline.ActionPhaseWritten:
			a.reapplied++
		}
	}
	rows := l.query(t, "actions_by_rule_day", days...)
	require.Len(t, rows, len(want))
	reversals := 0
	for _, r := range rows {
		w := want[r[0]+"|"+r[1]+"|"+r[2]]
		require.NotNil(t, w, "row %v", r)
		require.Equal(t, []string{strconv.Itoa(w.actions), strconv.Itoa(len(w.accounts)), strconv.Itoa(w.published), strconv.Itoa(w.reversals), strconv.Itoa(w.reapplied)},
			r[3:8], "row %v", r)
		reversals += w.reversals
		if len(w.lat) == 0 {
			require.Empty(t, r[8], "no publish, no latency: row %v", r)
			continue
		}
		slices.Sort(w.lat)
		p50, p95 := parseF(t, r[8]), parseF(t, r[9])
		require.True(t, near(w.lat, 0.5, p50), "p50 %v of %v", p50, w.lat)
		require.True(t, near(w.lat, 0.95, p95), "p95 %v of %v", p95, w.lat)
	}
	require.Positive(t, reversals, "the sample reverses actions")
}

// testActionsHoldNoRawIDs scans every cell of the protective_action table,
// as Athena reads it, for the raw account ids the generated action bodies
// carry: none may be there.
func testActionsHoldNoRawIDs(t *testing.T, l *testLake) {
	rows := l.run(t, "SELECT * FROM protective_action")
	require.NotEmpty(t, rows)
	offenders := 0
	for _, r := range rows {
		line := strings.Join(r, "\t")
		require.NotContains(t, line, "acct-raw-", "no raw account id in the lake")
		if strings.Contains(line, "hmac2:") {
			offenders++
		}
	}
	require.Positive(t, offenders, "the offenders are there, as keyed pseudonyms")
	q, err := lake.WithDedupViews("SELECT count(*) FROM protective_action_dedup WHERE offender IS NOT NULL AND phase = 'published'")
	require.NoError(t, err)
	require.Equal(t, "0", l.run(t, q)[0][0], "published rows carry no offender")
}
