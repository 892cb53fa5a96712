package mysql

import (
	"context"

	"github.com/chatguard/chatguard/pipeline"
)

// HistorySQLForTest is historySQL, for the EXPLAIN test.
const HistorySQLForTest = historySQL

// SeedAction writes an action's row as a verdict's save does, for the
// action-history suite.
func (s *Store) SeedAction(ctx context.Context, r pipeline.ActionRecord) error {
	return insertAction(ctx, s.db, r)
}

// WriteAction writes an action as a verdict's save does: its row with its
// outbox messages (the queue's when `on`), for the action-control suite.
func (s *Store) WriteAction(ctx context.Context, r pipeline.ActionRecord) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := writeActions(ctx, tx, []pipeline.ActionRecord{r}); err != nil {
		return err
	}
	return tx.Commit()
}
