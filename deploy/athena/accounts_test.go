package athena_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// TestTopAccountsByAbusiveRoomsPerWeek runs the query on a lake written for
// it: an account's room counts once over its windows, a room the newest
// decision relabelled counts as overturned (an older relabelling a later
// decision undid does not), another week is another row, and suspicious
// verdicts, verdicts without subjects and days outside the range count
// nowhere.
func TestTopAccountsByAbusiveRoomsPerWeek(t *testing.T) {
	t.Parallel()
	n := 0
	ev := func(at time.Time, payload any) pipeline.LakeEvent {
		n++
		e := pipeline.LakeEvent{EventID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), OccurredAt: at, SchemaVersion: pipeline.LakeEventSchemaVersion, Payload: payload}
		switch payload.(type) {
		case pipeline.VerdictEvent:
			e.EventType = pipeline.EventVerdict
		case pipeline.ModeratorFeedback:
			e.EventType = pipeline.EventModeratorFeedback
		}
		return e
	}
	a, b := "hmac:"+fmt.Sprintf("%024x", 0xa), "hmac:"+fmt.Sprintf("%024x", 0xb)
	mon := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) // an ISO week's Monday
	verdict := func(room string, at time.Time, label pipeline.Label, subjects ...string) pipeline.LakeEvent {
		return ev(at, pipeline.VerdictEvent{RoomID: room, WindowStart: at.Add(-time.Hour).Truncate(time.Hour), WindowEnd: at.Truncate(time.Hour),
			PipelineVersion: "v1", RunID: "rt-1", Status: pipeline.StatusDone, Label: label, Category: pipeline.CategoryExternalPayment,
			Severity: 4, Confidence: 0.9, Action: pipeline.ActionRestrict, Attempts: 1, Subjects: subjects})
	}
	decide := func(v pipeline.LakeEvent, after time.Duration, label pipeline.Label) pipeline.LakeEvent {
		p := v.Payload.(pipeline.VerdictEvent)
		return ev(v.OccurredAt.Add(after), pipeline.ModeratorFeedback{RoomID: p.RoomID, WindowStart: p.WindowStart, WindowEnd: p.WindowEnd,
			PipelineVersion: p.PipelineVersion, ModeratorID: "mod-1", VerdictLabel: p.Label, VerdictCategory: p.Category,
			DecidedLabel: label, DecidedCategory: p.Category, ActionTaken: pipeline.ActionWarn})
	}
	r1a := verdict("r1", mon.Add(10*time.Hour+5*time.Minute), pipeline.LabelAbusive, a, b)
	r3 := verdict("r3", mon.Add(34*time.Hour), pipeline.LabelAbusive, a)
	evs := []pipeline.LakeEvent{
		r1a,
		verdict("r1", mon.Add(11*time.Hour+5*time.Minute), pipeline.LabelAbusive, a), // the same room, another window
		verdict("r2", mon.Add(30*time.Hour), pipeline.LabelAbusive, a),
		r3,
		decide(r3, 2*24*time.Hour, pipeline.LabelClean), // overturned, two days later
		decide(r1a, time.Hour, pipeline.LabelClean),
		decide(r1a, 2*time.Hour, pipeline.LabelAbusive), // the newest decision stands
		verdict("r5", mon.Add(40*time.Hour), pipeline.LabelSuspicious, b),
		verdict("r6", mon.Add(41*time.Hour), pipeline.LabelAbusive), // no subjects
		verdict("r7", mon.Add(7*24*time.Hour+time.Hour), pipeline.LabelAbusive, a),
		verdict("r8", mon.Add(-3*24*time.Hour), pipeline.LabelAbusive, b), // before the range
	}
	l := setupEvents(t, evs)
	rows := l.query(t, "top_accounts_abusive_rooms_week", "'2026-11-02'", "'2026-11-15'")
	require.Equal(t, [][]string{
		{"2026-11-02", a, "2", "1"},
		{"2026-11-02", b, "1", "0"},
		{"2026-11-09", a, "1", "0"},
	}, rows)
}
