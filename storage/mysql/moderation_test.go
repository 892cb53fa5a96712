package mysql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/moderation/moderationtest"
	"github.com/chatguard/chatguard/pipeline"
)

// The moderation side's ports, each by its conformance suite on MariaDB
// (the in-memory fake passes the same suites in moderationtest).

func TestTakesConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunTakesConformance(t, func(t *testing.T) moderationtest.TakesStore { return setup(t) })
}

func TestDecisionsConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunDecisionsConformance(t, func(t *testing.T) moderationtest.DecisionsStore { return setup(t) })
}

func TestActionLogConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunActionLogConformance(t, func(t *testing.T) (moderation.ActionLog, func(uint64) (moderation.AuditRecord, error)) {
		s := setup(t)
		return s, func(id uint64) (moderation.AuditRecord, error) { return readAction(s.DB(), id) }
	})
}

// readAction reads moderation_actions row id back as the record it was.
func readAction(db *sql.DB, id uint64) (moderation.AuditRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var (
		r                     moderation.AuditRecord
		action, label, cat    string
		verdictID, decisionID sql.NullInt64
	)
	err := db.QueryRowContext(ctx, `SELECT requested_at, moderator, action, verdict_id, room_id, mark, decision, label, category,
		override, holder, decision_id, rooms, detail FROM moderation_actions WHERE id = ?`, id).
		Scan(&r.At, &r.Moderator, &action, &verdictID, &r.RoomID, &r.Mark, &r.Decision, &label, &cat, &r.Override, &r.Holder,
			&decisionID, &r.Rooms, &r.Detail)
	r.At, r.Action, r.Label, r.Category = r.At.UTC(), moderation.ActionKind(action), pipeline.Label(label), pipeline.Category(cat)
	r.VerdictID, r.DecisionID = uint64(verdictID.Int64), uint64(decisionID.Int64)
	return r, err
}

func TestQueueConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunQueueConformance(t, func(t *testing.T) moderationtest.QueueStore { return setup(t) })
}

func TestFeedbackOutboxConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunFeedbackOutboxConformance(t, func(t *testing.T) moderationtest.OutboxStore { return setup(t) })
}

func TestAccountsConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunAccountsConformance(t, func(t *testing.T) moderationtest.AccountsStore { return setup(t) })
}

func TestCampaignJoinConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunCampaignJoinConformance(t, func(t *testing.T) moderationtest.JoinsStore { return setup(t) })
}

func TestVerdictsConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunVerdictsConformance(t, func(t *testing.T) moderation.Verdicts { return setup(t) })
}

func TestTakeHistoryConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunTakeHistoryConformance(t, func(t *testing.T) moderationtest.HistoryStore { return setup(t) })
}
