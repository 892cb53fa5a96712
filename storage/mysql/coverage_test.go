package mysql

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// TestCoveredReadsCommittedDoneWindowsOnly saves verdicts of every status
// around one hour and checks that only the done ones overlapping the hour
// come back, under every pipeline version, for the rooms asked.
func TestCoveredReadsCommittedDoneWindowsOnly(t *testing.T) {
	t.Parallel()
	_, s := migrated(t)
	hour := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return hour.Add(time.Duration(m) * time.Minute) }
	save := func(room string, start, end time.Time, version string, status pipeline.Status) {
		v := storetest.SampleVerdict(room)
		v.Key.WindowStart, v.Key.WindowEnd, v.Key.PipelineVersion, v.Status = start, end, version, status
		if status != pipeline.StatusDone {
			v.Label, v.Category, v.Severity, v.Action, v.Error = "", "", 0, "", "review "+string(status)
		}
		storetest.MustSave(t, ctxT(t), s, v)
	}
	save("a", at(1), at(6), "v1", pipeline.StatusDone)                   // inside
	save("a", at(-30), at(2), "v1", pipeline.StatusDone)                 // straddles the start
	save("a", at(58), at(70), "v0", pipeline.StatusDone)                 // straddles the end, older version
	save("a", at(-60), at(0), "v1", pipeline.StatusDone)                 // ends at the start: no overlap
	save("a", at(60), at(65), "v1", pipeline.StatusDone)                 // starts at the end: no overlap
	save("a", at(-23*60), at(30), "v1", pipeline.StatusDone)             // a long window from the day before
	save("a", at(10), at(15), "v1", pipeline.StatusFailed)               // failed
	save("a", at(20), at(25), "v1", pipeline.StatusExpired)              // expired
	save("a", at(30), at(35), "v1", pipeline.StatusStopped)              // stopped
	save("b", at(0), at(60), "v1", pipeline.StatusDone)                  // another room asked
	save("c", at(0), at(60), "v1", pipeline.StatusDone)                  // a room not asked
	save("a", hour.Add(-25*time.Hour), at(1), "v1", pipeline.StatusDone) // longer than a worker accepts

	got, err := s.Covered(ctxT(t), []string{"a", "b", "nobody"}, hour, hour.Add(time.Hour))
	require.NoError(t, err)
	var lines []string
	for _, w := range got {
		lines = append(lines, fmt.Sprintf("%s %s %s %s", w.RoomID, w.Start.Format("15:04"), w.End.Format("15:04"), w.PipelineVersion))
		require.Equal(t, time.UTC, w.Start.Location())
	}
	slices.Sort(lines)
	require.Equal(t, []string{
		"a 09:30 10:02 v1",
		"a 10:01 10:06 v1",
		"a 10:58 11:10 v0",
		"a 11:00 10:30 v1",
		"b 10:00 11:00 v1",
	}, lines)

	none, err := s.Covered(ctxT(t), nil, hour, hour.Add(time.Hour))
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = s.Covered(ctxT(t), make([]string, MaxCoverageRooms+1), hour, hour.Add(time.Hour))
	require.ErrorContains(t, err, "at most 1000")
}

// TestCoveragePlanRangesOverTheReviewKey EXPLAINs the sweep's coverage
// statement for a full chunk of rooms on generated data: a range over the
// review key's (room_id, window_start) prefix, window_end checked on the
// index entries, never a scan of verdicts.
func TestCoveragePlanRangesOverTheReviewKey(t *testing.T) {
	t.Parallel()
	end := time.Now().UTC().Truncate(time.Hour)
	db, _, _ := generated(t, 20000, end)
	rows, err := db.QueryContext(ctxT(t), `SELECT DISTINCT room_id FROM verdicts ORDER BY room_id LIMIT ?`, MaxCoverageRooms)
	require.NoError(t, err)
	var rooms []string
	for rows.Next() {
		var r string
		require.NoError(t, rows.Scan(&r))
		rooms = append(rooms, r)
	}
	require.NoError(t, rows.Err())
	require.Greater(t, len(rooms), 100, "enough rooms for the optimizer to choose")
	q, args := coverageQuery(rooms, end.Add(-time.Hour), end)
	plan := explain(t, db, q, args...)
	requirePlan(t, plan, "verdicts", []string{"uq_review"}, false)
	require.Equal(t, "range", plan[0].typ, "%+v", plan)
	require.True(t, strings.Contains(plan[0].extra, "Using index condition"), "window_end is filtered on the index: %+v", plan)
}
