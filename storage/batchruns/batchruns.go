// Package batchruns records every attempt of a batch run in MySQL (the
// batch_runs table of migrations/sql/00002_batch_runs.sql), so an operator
// can see which windows were published, by which attempt, with what counts,
// and why an attempt failed.
package batchruns

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// Status is the state of one attempt.
type Status = pipeline.BatchRunStatus

// The statuses an attempt moves through: running, then succeeded or failed.
// An attempt left running had its process killed before it could finish.
const (
	StatusRunning   = pipeline.BatchRunRunning
	StatusSucceeded = pipeline.BatchRunSucceeded
	StatusFailed    = pipeline.BatchRunFailed
)

// maxErrorLen matches the error column; longer messages are cut, not
// rejected, because losing the whole record over a long message is worse.
const maxErrorLen = 1024

// beginTries bounds the retries when two attempts of one run start at once
// and collide on (run_id, attempt).
const beginTries = 5

// Run is one attempt of a batch run.
type Run = pipeline.BatchRun

// Store reads and writes batch_runs. It is safe for concurrent use.
type Store struct {
	db  *sql.DB
	clk clock.Clock // stamps started_at and finished_at
	// owned is set when Open opened db, so that Close closes it.
	owned bool
}

var _ pipeline.BatchRunStore = (*Store)(nil)

// New returns a Store over db, which must have the migrations applied. The
// caller keeps db and closes it; Close on this Store does nothing.
func New(db *sql.DB, opts ...Option) *Store {
	s := &Store{db: db, clk: clock.Real()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Option sets what a Store is built with besides its database.
type Option func(*Store)

// WithClock stamps runs' start and finish times from c instead of the
// wall clock (nil keeps the wall clock).
func WithClock(c clock.Clock) Option { return func(s *Store) { s.clk = clock.Or(c) } }

// now is the time a run's start or finish is stamped with.
func (s *Store) now() time.Time { return s.clk.Now().UTC() }

// openConns is the pool size Open sets: a batch run holds at most one
// statement at a time, and a second connection covers Finish racing a
// connection the server dropped.
const openConns = 2

// pingTimeout bounds Open's check that the database answers.
const pingTimeout = 10 * time.Second

// Open connects to the MySQL of dsn (go-sql-driver format), whose schema
// must have the migrations applied, and checks that it answers within
// pingTimeout (or until ctx ends). The returned Store owns the connection
// pool; Close releases it. It fails, with the pool closed, when the DSN is
// malformed, the server does not answer, or ctx ends.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("batchruns: open: %w", err)
	}
	db.SetMaxOpenConns(openConns)
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("batchruns: open: %w", err)
	}
	s := New(db, opts...)
	s.owned = true
	return s, nil
}

// Close releases the connection pool when Open made it; on a Store from New
// it does nothing, the pool being the caller's.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("batchruns: close: %w", err)
	}
	return nil
}

// Begin records a new running attempt of runID over [start, end) and
// returns it with its attempt number: one more than the highest attempt
// recorded for runID so far. It fails on a database error or when ctx ends.
func (s *Store) Begin(ctx context.Context, runID string, start, end time.Time) (Run, error) {
	r := Run{
		RunID:       runID,
		WindowStart: start.UTC(),
		WindowEnd:   end.UTC(),
		Status:      StatusRunning,
		StartedAt:   s.now(),
	}
	var err error
	for range beginTries {
		if err = s.insert(ctx, &r); err == nil {
			return r, nil
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1062 { // 1062: duplicate key
			break
		}
	}
	return Run{}, fmt.Errorf("batchruns: begin %s: %w", runID, err)
}

func (s *Store) insert(ctx context.Context, r *Run) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var last int
	if err := tx.QueryRowContext(ctx,
		`SELECT COALESCE(MAX(attempt), 0) FROM batch_runs WHERE run_id = ?`, r.RunID).Scan(&last); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx,
		`INSERT INTO batch_runs (run_id, attempt, window_start, window_end, status, started_at)
		 VALUES (?, ?, ?, ?, ?, ?)`,
		r.RunID, last+1, r.WindowStart, r.WindowEnd, string(r.Status), r.StartedAt)
	if err != nil {
		return err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	r.ID, r.Attempt = id, last+1
	return nil
}

// Finish records the outcome of the attempt r.ID: its status (succeeded or
// failed), counts, query execution id and error text, stamped with the
// finish time. Callers pass a context that outlives a cancelled run, so that
// a run stopped by SIGTERM is still recorded as failed.
func (s *Store) Finish(ctx context.Context, r Run) error {
	if r.Status != StatusSucceeded && r.Status != StatusFailed {
		return fmt.Errorf("batchruns: finish %s attempt %d: status %q is not final", r.RunID, r.Attempt, r.Status)
	}
	var qid, msg sql.NullString
	if r.QueryExecutionID != "" {
		qid = sql.NullString{String: r.QueryExecutionID, Valid: true}
	}
	if r.Error != "" {
		msg = sql.NullString{String: truncate(r.Error, maxErrorLen), Valid: true}
	}
	res, err := s.db.ExecContext(ctx,
		`UPDATE batch_runs SET status = ?, query_execution_id = ?, rows_read = ?, published = ?, failed = ?,
		        error = ?, finished_at = ?
		  WHERE id = ?`,
		string(r.Status), qid, r.Rows, r.Published, r.Failed, msg, s.now(), r.ID)
	if err != nil {
		return fmt.Errorf("batchruns: finish %s attempt %d: %w", r.RunID, r.Attempt, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("batchruns: finish %s attempt %d: no such attempt (id %d)", r.RunID, r.Attempt, r.ID)
	}
	return nil
}

// Attempts returns every attempt of runID, oldest first.
func (s *Store) Attempts(ctx context.Context, runID string) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, run_id, attempt, window_start, window_end, status, query_execution_id,
		        rows_read, published, failed, error, started_at, finished_at
		   FROM batch_runs WHERE run_id = ? ORDER BY attempt`, runID)
	if err != nil {
		return nil, fmt.Errorf("batchruns: attempts %s: %w", runID, err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var (
			r        Run
			status   string
			qid, msg sql.NullString
			finished sql.NullTime
		)
		if err := rows.Scan(&r.ID, &r.RunID, &r.Attempt, &r.WindowStart, &r.WindowEnd, &status, &qid,
			&r.Rows, &r.Published, &r.Failed, &msg, &r.StartedAt, &finished); err != nil {
			return nil, fmt.Errorf("batchruns: attempts %s: %w", runID, err)
		}
		r.Status, r.QueryExecutionID, r.Error = Status(status), qid.String, msg.String
		r.WindowStart, r.WindowEnd, r.StartedAt = r.WindowStart.UTC(), r.WindowEnd.UTC(), r.StartedAt.UTC()
		if finished.Valid {
			r.FinishedAt = finished.Time.UTC()
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("batchruns: attempts %s: %w", runID, err)
	}
	return out, nil
}

// truncate cuts s to at most n runes, the unit of a MySQL VARCHAR length.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n-1 {
			break
		}
		count++
	}
	return s[:i] + "…"
}
