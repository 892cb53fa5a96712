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
