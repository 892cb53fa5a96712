package lake_test

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
	var es eventSeq
	a, b := "hmac:"+fmt.Sprintf("%024x", 0xa), "hmac:"+fmt.Sprintf("%024x", 0xb)
	mon := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) // an ISO week's Monday
	verdict := func(room string, at time.Time, label pipeline.Label, subjects ...string) pipeline.LakeEvent {
		return es.at(at, pipeline.VerdictEvent{RoomID: room, WindowStart: at.Add(-time.Hour).Truncate(time.Hour), WindowEnd: at.Truncate(time.Hour),
			PipelineVersion: "v1", RunID: "rt-1", Status: pipeline.StatusDone, Label: label, Category: pipeline.CategoryExternalPayment,
			Severity: 4, Confidence: 0.9, Action: pipeline.ActionRestrict, Attempts: 1, Subjects: subjects})
	}
	r1a := verdict("r1", mon.Add(10*time.Hour+5*time.Minute), pipeline.LabelAbusive, a, b)
	r3 := verdict("r3", mon.Add(34*time.Hour), pipeline.LabelAbusive, a)
	evs := []pipeline.LakeEvent{
		r1a,
		verdict("r1", mon.Add(11*time.Hour+5*time.Minute), pipeline.LabelAbusive, a), // the same room, another window
		verdict("r2", mon.Add(30*time.Hour), pipeline.LabelAbusive, a),
		r3,
		es.decide(r3, 2*24*time.Hour, pipeline.LabelClean), // overturned, two days later
		es.decide(r1a, time.Hour, pipeline.LabelClean),
		es.decide(r1a, 2*time.Hour, pipeline.LabelAbusive), // the newest decision stands
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

// eventSeq numbers the lake events a query test writes, so each has its own
// event id.
type eventSeq struct{ n int }

// at is the lake event of payload at time at.
func (es *eventSeq) at(at time.Time, payload any) pipeline.LakeEvent {
	es.n++
	e := pipeline.LakeEvent{EventID: fmt.Sprintf("00000000-0000-4000-8000-%012d", es.n), OccurredAt: at, SchemaVersion: pipeline.LakeEventSchemaVersion, Payload: payload}
	switch payload.(type) {
	case pipeline.VerdictEvent:
		e.EventType = pipeline.EventVerdict
	case pipeline.ModeratorFeedback:
		e.EventType = pipeline.EventModeratorFeedback
	}
	return e
}

// decide is a moderator's decision of label on verdict v, after it.
func (es *eventSeq) decide(v pipeline.LakeEvent, after time.Duration, label pipeline.Label) pipeline.LakeEvent {
	p := v.Payload.(pipeline.VerdictEvent)
	return es.at(v.OccurredAt.Add(after), pipeline.ModeratorFeedback{RoomID: p.RoomID, WindowStart: p.WindowStart, WindowEnd: p.WindowEnd,
		PipelineVersion: p.PipelineVersion, ModeratorID: "mod-1", VerdictLabel: p.Label, VerdictCategory: p.Category,
		DecidedLabel: label, DecidedCategory: p.Category, ActionTaken: pipeline.ActionWarn})
}

// TestCampaignsBySizeAndCategoryPerWeek runs the campaigns query on a lake
// written for it: a mark's rooms count once over their windows and verdicts
// that carry several marks count under each; the senders column is the
// largest count a review saw; a room the newest decision relabelled counts
// as overturned, one it kept as decided only; another category or week is
// another row; verdicts without marks and days outside the range count
// nowhere.
func TestCampaignsBySizeAndCategoryPerWeek(t *testing.T) {
	t.Parallel()
	var es eventSeq
	script, contact := "hmac:"+fmt.Sprintf("%024x", 0x5c), "hmac:"+fmt.Sprintf("%024x", 0xc0)
	mon := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) // an ISO week's Monday
	mark := func(kind pipeline.CampaignKind, m string, senders int) pipeline.VerdictCampaign {
		return pipeline.VerdictCampaign{Kind: kind, Mark: m, Rooms: 9, Senders: senders}
	}
	verdict := func(room string, at time.Time, label pipeline.Label, cat pipeline.Category, marks ...pipeline.VerdictCampaign) pipeline.LakeEvent {
		return es.at(at, pipeline.VerdictEvent{RoomID: room, WindowStart: at.Add(-time.Hour).Truncate(time.Hour), WindowEnd: at.Truncate(time.Hour),
			PipelineVersion: "v1", RunID: "rt-1", Status: pipeline.StatusDone, Label: label, Category: cat,
			Severity: 4, Confidence: 0.9, Action: pipeline.ActionRestrict, Attempts: 1, Campaigns: marks})
	}
	pay, fraud := pipeline.CategoryExternalPayment, pipeline.CategoryOffPlatform
	r1 := verdict("r1", mon.Add(10*time.Hour), pipeline.LabelAbusive, pay, mark(pipeline.CampaignScript, script, 2), mark(pipeline.CampaignContact, contact, 1))
	r2 := verdict("r2", mon.Add(12*time.Hour), pipeline.LabelAbusive, pay, mark(pipeline.CampaignScript, script, 3))
	r3 := verdict("r3", mon.Add(13*time.Hour), pipeline.LabelSuspicious, pay, mark(pipeline.CampaignScript, script, 3))
	evs := []pipeline.LakeEvent{
		r1, r2, r3,
		verdict("r1", mon.Add(11*time.Hour), pipeline.LabelAbusive, pay, mark(pipeline.CampaignScript, script, 2)), // another window
		es.decide(r2, time.Hour, pipeline.LabelClean),
		es.decide(r2, 2*time.Hour, pipeline.LabelAbusive),  // the newest decision keeps it
		es.decide(r3, 3*24*time.Hour, pipeline.LabelClean), // overturned, days later
		verdict("r4", mon.Add(20*time.Hour), pipeline.LabelAbusive, fraud, mark(pipeline.CampaignScript, script, 4)),
		verdict("r5", mon.Add(21*time.Hour), pipeline.LabelAbusive, pay), // no marks
		verdict("r6", mon.Add(7*24*time.Hour+time.Hour), pipeline.LabelAbusive, pay, mark(pipeline.CampaignContact, contact, 1)),
		verdict("r7", mon.Add(-3*24*time.Hour), pipeline.LabelAbusive, pay, mark(pipeline.CampaignScript, script, 2)), // before the range
	}
	l := setupEvents(t, evs)
	rows := l.query(t, "campaigns_by_size_category_week", "'2026-11-02'", "'2026-11-15'")
	// week, kind, mark, category, rooms, max senders, abusive, decided, overturned;
	// the biggest first, then by mark
	require.Equal(t, [][]string{
		{"2026-11-02", "script", script, string(pay), "3", "3", "2", "2", "1"},
		{"2026-11-02", "script", script, string(fraud), "1", "4", "1", "0", "0"},
		{"2026-11-02", "contact", contact, string(pay), "1", "1", "1", "0", "0"},
		{"2026-11-09", "contact", contact, string(pay), "1", "1", "1", "0", "0"},
	}, rows)
}
