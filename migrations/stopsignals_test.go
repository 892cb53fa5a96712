package migrations

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
)

// TestStopSignalsPendingMigrationKeepsTheTrail: rows written before the
// pending outcome existed are finished when they were written, the table
// stays append-only across the migration, and migrating down turns a row
// left pending into a failed one rather than losing it.
func TestStopSignalsPendingMigrationKeepsTheTrail(t *testing.T) {
	t.Parallel()
	db, _ := stacktest.MySQL(t)
	ctx := testCtx(t)
	p, err := provider(db)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 10)
	require.NoError(t, err)
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	_, err = db.ExecContext(ctx, `INSERT INTO stop_signals (requested_at, identity, remote_addr, outcome, http_status, room_id)
		VALUES (?, 'console', '10.0.0.1:1', 'accepted', 202, 'room-old')`, at)
	require.NoError(t, err)

	_, err = p.UpTo(ctx, 11)
	require.NoError(t, err)
	var finished *time.Time
	require.NoError(t, db.QueryRowContext(ctx, `SELECT finished_at FROM stop_signals WHERE room_id = 'room-old'`).Scan(&finished))
	require.NotNil(t, finished)
	require.Equal(t, at, *finished)
	_, err = db.ExecContext(ctx, `UPDATE stop_signals SET outcome = 'failed' WHERE room_id = 'room-old'`)
	require.ErrorContains(t, err, "append-only")
	_, err = db.ExecContext(ctx, `INSERT INTO stop_signals (requested_at, identity, remote_addr, outcome, http_status, room_id)
		VALUES (?, 'console', '10.0.0.1:1', 'pending', 0, 'room-new')`, at)
	require.NoError(t, err)

	_, err = p.DownTo(ctx, 10)
	require.NoError(t, err)
	var outcome string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT outcome FROM stop_signals WHERE room_id = 'room-new'`).Scan(&outcome))
	require.Equal(t, "failed", outcome)
	_, err = db.ExecContext(ctx, `UPDATE stop_signals SET outcome = 'accepted' WHERE room_id = 'room-new'`)
	require.ErrorContains(t, err, "append-only")
	_, err = db.ExecContext(ctx, `DELETE FROM stop_signals`)
	require.ErrorContains(t, err, "append-only")

	_, err = Up(ctx, db)
	require.NoError(t, err)
}
