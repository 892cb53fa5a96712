package mysql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/chatguard/chatguard/moderation/moderationtest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
)

// One protective action by its key and the policy's retraction, by their
// conformance suites on MariaDB (Memory passes the same in
// moderationtest).

func TestActionControlConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunActionControlConformance(t, func(t *testing.T) moderationtest.ControlHarness {
		db, s := setupDB(t)
		return moderationtest.ControlHarness{
			Store:   s,
			Seed:    func(r pipeline.ActionRecord) error { return s.WriteAction(context.Background(), r) },
			Pending: func(key string) (bool, error) { return pendingAction(db, key) },
			Cleared: func(account, rule string, at time.Time) (bool, error) { return clearedAt(s, account, rule, at) },
		}
	})
}

func TestPolicyRetractionsConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunPolicyRetractionsConformance(t, func(t *testing.T) moderationtest.RetractionsHarness {
		_, s := setupDB(t)
		return moderationtest.RetractionsHarness{Store: s, Seed: func(r pipeline.ActionRecord) error { return s.WriteAction(context.Background(), r) }}
	})
}

// pendingAction reports whether the action key's queue message is in the
// outbox, unsent.
func pendingAction(db *sql.DB, key string) (bool, error) {
	var n int
	err := db.QueryRow("SELECT COUNT(*) FROM outbox WHERE destination = ? AND event_id = ? AND sent_at IS NULL",
		string(pipeline.OutboxActions), key).Scan(&n)
	return n > 0, err
}

// clearedAt reads the cleared state back as the planner does.
func clearedAt(s *mysql.Store, account, rule string, at time.Time) (bool, error) {
	st, err := s.ActionState(context.Background(), pipeline.ActionStateQuery{RoomID: "room-any", Accounts: []string{account}, Now: at})
	return st.Cleared[pipeline.ActionClearedKey(account, rule)], err
}

func TestRevisedActionsConformance(t *testing.T) {
	t.Parallel()
	moderationtest.RunRevisedActionsConformance(t, func(t *testing.T) moderationtest.RevisedStore { _, s := setupDB(t); return s })
}
