package console

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/migrations"
)

// CheckSchema refuses to start on a schema older than this build, as the
// worker does: the console reads moderator_decisions.feedback_sent_at
// (00010), and a pod of a new build on an unmigrated database would fail
// every room page. Migrations are applied by `worker migrate`, never by a
// starting pod. The check is bounded by timeout; MySQL unreachable is an
// error (the pod restarts and tries again).
func CheckSchema(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	latest, err := migrations.Latest()
	if err != nil {
		return err
	}
	v, err := migrations.Version(ctx, db)
	if err != nil {
		return fmt.Errorf("reading the schema version (run 'worker migrate'): %w", err)
	}
	if v < latest {
		return fmt.Errorf("the database schema is at version %d, this build needs %d: run 'worker migrate'", v, latest)
	}
	return nil
}
