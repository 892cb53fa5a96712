package mysql

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

func TestRecordStopIsAppendOnly(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := ctxT(t)
	at := time.Date(2026, 12, 1, 2, 0, 0, 123000, time.UTC)
	require.NoError(t, s.RecordStop(ctx, pipeline.StopAuditEntry{RequestedAt: at, Identity: "console", RemoteAddr: "10.0.0.7:5555",
		Outcome: pipeline.StopAccepted, HTTPStatus: 202, Scope: pipeline.StopScopeReview, RoomID: "room-1",
		WindowStart: at.Add(-time.Hour), WindowEnd: at, TTL: 30 * time.Minute, Reason: "fraud ring"}))
	require.NoError(t, s.RecordStop(ctx, pipeline.StopAuditEntry{RequestedAt: at, RemoteAddr: "10.0.0.8:1", Outcome: pipeline.StopRefused,
		HTTPStatus: 401, Detail: "no bearer token"}))

	var (
		identity, outcome, scope, room string
		ttl                            int64
		start                          *time.Time
	)
	require.NoError(t, db.QueryRowContext(ctx, `SELECT identity, outcome, scope, room_id, ttl_seconds, window_start FROM stop_signals ORDER BY id LIMIT 1`).
		Scan(&identity, &outcome, &scope, &room, &ttl, &start))
	require.Equal(t, []any{"console", "accepted", "review", "room-1", int64(1800)}, []any{identity, outcome, scope, room, ttl})
	require.NotNil(t, start)
	require.Equal(t, at.Add(-time.Hour), *start)

	// The database refuses to rewrite or drop the trail.
	_, err := db.ExecContext(ctx, `UPDATE stop_signals SET identity = 'someone-else'`)
	require.ErrorContains(t, err, "append-only")
	_, err = db.ExecContext(ctx, `DELETE FROM stop_signals`)
	require.ErrorContains(t, err, "append-only")
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM stop_signals`).Scan(&n))
	require.Equal(t, 2, n)

	// An outcome outside the closed set is refused by the schema.
	require.Error(t, s.RecordStop(ctx, pipeline.StopAuditEntry{RequestedAt: at, Outcome: "maybe", HTTPStatus: 200}))
}
