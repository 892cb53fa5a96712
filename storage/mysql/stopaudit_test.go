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
		finished                       *time.Time
	)
	require.NoError(t, db.QueryRowContext(ctx, `SELECT identity, outcome, scope, room_id, ttl_seconds, window_start, finished_at FROM stop_signals ORDER BY id LIMIT 1`).
		Scan(&identity, &outcome, &scope, &room, &ttl, &start, &finished))
	require.Equal(t, []any{"console", "accepted", "review", "room-1", int64(1800)}, []any{identity, outcome, scope, room, ttl})
	require.NotNil(t, start)
	require.Equal(t, at.Add(-time.Hour), *start)
	require.NotNil(t, finished, "a request that never acts is finished when written")
	require.Equal(t, at, *finished)

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

// TestPendingStopTakesItsOutcomeOnce: a stop is written pending before it
// acts; its outcome is recorded on the same row once, and the database
// refuses any other change to the row, pending or not.
func TestPendingStopTakesItsOutcomeOnce(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := ctxT(t)
	at := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	e := pipeline.StopAuditEntry{RequestedAt: at, Identity: "oncall-kim", RemoteAddr: "10.0.0.9:4000", Outcome: pipeline.StopAccepted,
		HTTPStatus: 202, Scope: pipeline.StopScopeRun, RunID: "run-7", TTL: time.Hour, Reason: "bad window"}
	id, err := s.BeginStop(ctx, e)
	require.NoError(t, err)
	require.Positive(t, id)

	row := func() (outcome string, status int, finished *time.Time) {
		require.NoError(t, db.QueryRowContext(ctx, `SELECT outcome, http_status, finished_at FROM stop_signals WHERE id = ?`, id).Scan(&outcome, &status, &finished))
		return
	}
	outcome, status, finished := row()
	require.Equal(t, "pending", outcome, "written before it acts, whatever the entry said")
	require.Zero(t, status)
	require.Nil(t, finished)

	// Only the outcome may change, and only while pending.
	_, err = db.ExecContext(ctx, `UPDATE stop_signals SET run_id = 'run-8', outcome = 'accepted', finished_at = NOW(6) WHERE id = ?`, id)
	require.ErrorContains(t, err, "append-only")
	_, err = db.ExecContext(ctx, `UPDATE stop_signals SET reason = 'BAD WINDOW', outcome = 'accepted', finished_at = NOW(6) WHERE id = ?`, id)
	require.ErrorContains(t, err, "append-only", "a case change is a change")
	_, err = db.ExecContext(ctx, `UPDATE stop_signals SET outcome = 'accepted' WHERE id = ?`, id)
	require.ErrorContains(t, err, "append-only", "an outcome comes with its time")

	e.FinishedAt = at.Add(20 * time.Millisecond)
	require.NoError(t, s.FinishStop(ctx, id, e))
	outcome, status, finished = row()
	require.Equal(t, "accepted", outcome)
	require.Equal(t, 202, status)
	require.NotNil(t, finished)
	require.Equal(t, e.FinishedAt, *finished)

	e.Outcome, e.HTTPStatus = pipeline.StopFailed, 503
	require.ErrorIs(t, s.FinishStop(ctx, id, e), ErrStopNotPending, "an outcome is recorded once")
	require.ErrorIs(t, s.FinishStop(ctx, id+1000, e), ErrStopNotPending)
	_, err = db.ExecContext(ctx, `UPDATE stop_signals SET outcome = 'failed', finished_at = NOW(6) WHERE id = ?`, id)
	require.ErrorContains(t, err, "append-only")
	outcome, _, _ = row()
	require.Equal(t, "accepted", outcome)
}

// TestStopRecordsTheConsoleModerator: a stop the console sends names the
// moderator in a column of its own, which a pending row's outcome cannot
// change.
func TestStopRecordsTheConsoleModerator(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := ctxT(t)
	at := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	id, err := s.BeginStop(ctx, pipeline.StopAuditEntry{RequestedAt: at, Identity: "console", Moderator: "mod-0123456789abcdef",
		RemoteAddr: "10.0.0.7:1", Scope: pipeline.StopScopeRoom, RoomID: "room-9", TTL: 10 * time.Minute, Reason: "console: stopped by mod-0123456789abcdef"})
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `UPDATE stop_signals SET moderator = 'mod-someone-else', outcome = 'accepted', finished_at = ? WHERE id = ?`, at, id)
	require.ErrorContains(t, err, "append-only", "the moderator cannot be rewritten with the outcome")
	require.NoError(t, s.FinishStop(ctx, id, pipeline.StopAuditEntry{Outcome: pipeline.StopAccepted, HTTPStatus: 202, FinishedAt: at}))
	var moderator string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT moderator FROM stop_signals WHERE id = ?`, id).Scan(&moderator))
	require.Equal(t, "mod-0123456789abcdef", moderator)
}
