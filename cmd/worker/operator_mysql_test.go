package main

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/bearer"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
)

// mysqlOperator serves the operator API over a migrated database of its
// own, audited by the MySQL store as deployed.
func mysqlOperator(t *testing.T, pub pipeline.StopPublisher) (*httptest.Server, *sql.DB, *prometheus.Registry, *syncBuffer) {
	t.Helper()
	db, _ := stacktest.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	tokens, err := bearer.LoadDir(tokensDir(t))
	require.NoError(t, err)
	reg, logs := prometheus.NewRegistry(), &syncBuffer{}
	api := newOperatorAPI(tokens, pub, mysql.New(db), reg, slog.New(slog.NewJSONHandler(logs, nil)))
	srv := httptest.NewServer(api.handler())
	t.Cleanup(srv.Close)
	return srv, db, reg, logs
}

// stopRow is the audit row as MySQL keeps it.
type stopRow struct {
	identity, outcome, detail, room string
	status                          int
	finished                        sql.NullTime
}

func stopRows(t *testing.T, db *sql.DB) []stopRow {
	t.Helper()
	out, err := queryStopRows(t.Context(), db)
	require.NoError(t, err)
	return out
}

func queryStopRows(ctx context.Context, db *sql.DB) ([]stopRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT identity, outcome, detail, room_id, http_status, finished_at FROM stop_signals ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []stopRow
	for rows.Next() {
		var r stopRow
		if err := rows.Scan(&r.identity, &r.outcome, &r.detail, &r.room, &r.status, &r.finished); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// TestOperatorStopAuditedBeforeItActsInMySQL: against the real database,
// a stop's row is written before it is published and carries its outcome
// after; when the row cannot be written (the table is gone, or the
// database connection is closed) the stop is not published and the
// answer is 503; when the outcome cannot be recorded the stop stays
// published once, the row stays pending, and the failure is counted.
func TestOperatorStopAuditedBeforeItActsInMySQL(t *testing.T) {
	t.Parallel()
	const body = `{"room_id":"room-1","reason":"fraud ring, call 010-1234-5678"}`

	t.Run("published and recorded", func(t *testing.T) {
		t.Parallel()
		pub := &memPublisher{}
		srv, db, reg, _ := mysqlOperator(t, pub)
		var (
			atPublish []stopRow
			queryErr  error
		)
		pub.onPublish = func() { atPublish, queryErr = queryStopRows(context.Background(), db) }
		require.Equal(t, 202, post(t, srv.URL, "Bearer "+consoleToken, body))
		require.Equal(t, 1, pub.count())
		require.NoError(t, queryErr)
		require.Len(t, atPublish, 1, "the row exists before the stop is published")
		require.Equal(t, "pending", atPublish[0].outcome)
		require.False(t, atPublish[0].finished.Valid)
		rows := stopRows(t, db)
		require.Len(t, rows, 1)
		require.Equal(t, stopRow{identity: "console", outcome: "accepted", room: "room-1", status: 202, finished: rows[0].finished}, rows[0])
		require.True(t, rows[0].finished.Valid, "the outcome is recorded on the same row")
		require.Zero(t, metricValue(t, reg, "chatguard_operator_audit_errors_total", ""))
		require.Zero(t, metricValue(t, reg, "chatguard_operator_audit_outcome_errors_total", ""))

		// Redis fails: the same row says so.
		pub.mu.Lock()
		pub.onPublish, pub.err = nil, context.DeadlineExceeded
		pub.mu.Unlock()
		require.Equal(t, 503, post(t, srv.URL, "Bearer "+consoleToken, body))
		rows = stopRows(t, db)
		require.Len(t, rows, 2)
		require.Equal(t, "failed", rows[1].outcome)
		require.Equal(t, 503, rows[1].status)
		require.Contains(t, rows[1].detail, "deadline exceeded")

		// A recorded outcome is final: the database refuses to change it.
		_, err := db.ExecContext(t.Context(), `UPDATE stop_signals SET outcome = 'refused' WHERE outcome = 'accepted'`)
		require.ErrorContains(t, err, "append-only")
	})

	t.Run("table dropped", func(t *testing.T) {
		t.Parallel()
		pub := &memPublisher{}
		srv, db, reg, logs := mysqlOperator(t, pub)
		_, err := db.ExecContext(t.Context(), `DROP TABLE stop_signals`)
		require.NoError(t, err)
		require.Equal(t, 503, post(t, srv.URL, "Bearer "+consoleToken, body))
		require.Zero(t, pub.count(), "a stop that could not be audited is not published")
		require.Equal(t, 1.0, metricValue(t, reg, "chatguard_operator_audit_errors_total", ""))
		require.Equal(t, 1.0, metricValue(t, reg, "chatguard_operator_stop_requests_total", "failed"))
		require.Contains(t, logs.tail(1<<20), "mysql: begin stop")
		require.Contains(t, logs.tail(1<<20), `"room_id":"room-1"`, "the log line keeps the request")
		require.NotContains(t, logs.tail(1<<20), "1234-5678")
	})

	t.Run("database closed", func(t *testing.T) {
		t.Parallel()
		pub := &memPublisher{}
		srv, db, reg, _ := mysqlOperator(t, pub)
		require.NoError(t, db.Close())
		require.Equal(t, 503, post(t, srv.URL, "Bearer "+consoleToken, body))
		require.Zero(t, pub.count())
		require.Equal(t, 1.0, metricValue(t, reg, "chatguard_operator_audit_errors_total", ""))
	})

	t.Run("outcome not recorded", func(t *testing.T) {
		t.Parallel()
		pub := &memPublisher{}
		srv, db, reg, logs := mysqlOperator(t, pub)
		// The table goes away between the pending row and its outcome.
		var renameErr error
		pub.onPublish = func() {
			_, renameErr = db.ExecContext(context.Background(), `RENAME TABLE stop_signals TO stop_signals_away`)
		}
		require.Equal(t, 202, post(t, srv.URL, "Bearer "+consoleToken, body), "the stop took effect")
		require.NoError(t, renameErr)
		require.Equal(t, 1, pub.count(), "published once, never again for the outcome")
		require.Equal(t, 1.0, metricValue(t, reg, "chatguard_operator_audit_outcome_errors_total", ""))
		require.Zero(t, metricValue(t, reg, "chatguard_operator_audit_errors_total", ""))
		require.Contains(t, logs.tail(1<<20), "stays pending")
		require.Contains(t, logs.tail(1<<20), `"outcome":"accepted"`)
		_, err := db.ExecContext(t.Context(), `RENAME TABLE stop_signals_away TO stop_signals`)
		require.NoError(t, err)
		rows := stopRows(t, db)
		require.Len(t, rows, 1)
		require.Equal(t, "pending", rows[0].outcome, "the trail says the stop may have taken effect")
	})
}
