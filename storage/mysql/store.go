// Package mysql is the MySQL/MariaDB verdict store: one verdicts row per
// review key and one verdict_stages row per stage that ran, written together
// in one transaction. The same Store implements the moderation side's ports
// (package moderation: the queue, takes, decisions and their feedback
// outbox, accounts and campaigns, the console's audit record). The schema lives in migrations/ and is applied by
// `worker migrate`, never by this package.
package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/XSAM/otelsql"
	"github.com/go-sql-driver/mysql"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

var (
	_ pipeline.VerdictStore = (*Store)(nil)
	// The moderation side's ports, every one the console needs.
	_ moderation.Store = (*Store)(nil)
)

// Config says how to reach the database and how big the pool is.
type Config struct {
	// DSN is a go-sql-driver DSN; parseTime is forced on and times are UTC.
	DSN string
	// MaxOpenConns bounds the pool; it should cover the worker's job
	// concurrency plus the readiness probe.
	MaxOpenConns int
	// MaxIdleConns defaults to MaxOpenConns.
	MaxIdleConns int
	// ConnMaxLifetime recycles connections so that a failover or a proxy's
	// idle cut does not leave dead ones in the pool.
	ConnMaxLifetime time.Duration
}

// DefaultConfig returns the defaults used by the worker.
func DefaultConfig() Config {
	return Config{MaxOpenConns: 32, ConnMaxLifetime: 5 * time.Minute}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.DSN == "" {
		errs = append(errs, errors.New("mysql dsn is required"))
	} else if _, err := mysql.ParseDSN(c.DSN); err != nil {
		errs = append(errs, fmt.Errorf("mysql dsn: %w", err))
	}
	if c.MaxOpenConns < 1 {
		errs = append(errs, errors.New("mysql max open conns must be at least 1"))
	}
	if c.MaxIdleConns < 0 {
		errs = append(errs, errors.New("mysql max idle conns must not be negative"))
	}
	return errors.Join(errs...)
}

// Store is the MySQL verdict store. It is safe for concurrent use.
type Store struct {
	db *sql.DB
}

// New returns a store over an open handle that the caller keeps owning. The
// handle must have been opened with parseTime=true and without
// clientFoundRows (OpenDB ensures both): Save tells a new row from an
// updated one by the affected-row count, which that flag changes.
func New(db *sql.DB) *Store { return &Store{db: db} }

// OpenDB opens (without connecting) a pool configured from cfg, with
// parseTime on and UTC times, for callers such as `worker migrate` that need
// the raw handle.
func OpenDB(cfg Config) (*sql.DB, error) {
	dc, err := mysql.ParseDSN(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("mysql: dsn: %w", err)
	}
	dc.ParseTime = true
	dc.Loc = time.UTC
	dc.ClientFoundRows = false
	// Without interpolation every statement with arguments is a prepare
	// and an execute: two round trips where one does. At the worker's
	// concurrency those round trips, not the server's work, were most of a
	// job's time outside the models. The driver interpolates
	// only for charsets where escaping is safe and falls back otherwise.
	dc.InterpolateParams = true
	if dc.Timeout == 0 {
		dc.Timeout = 5 * time.Second
	}
	conn, err := mysql.NewConnector(dc)
	if err != nil {
		return nil, fmt.Errorf("mysql: connector: %w", err)
	}
	db := sql.OpenDB(conn)
	if pipeline.TracingEnabled() {
		db = tracedDB(conn, otel.GetTracerProvider())
	}
	open := max(cfg.MaxOpenConns, 1)
	idle := cfg.MaxIdleConns
	if idle == 0 {
		idle = open
	}
	db.SetMaxOpenConns(open)
	db.SetMaxIdleConns(idle)
	db.SetConnMaxLifetime(cfg.ConnMaxLifetime)
	return db, nil
}

// DB returns the underlying handle.
func (s *Store) DB() *sql.DB { return s.db }

// Ping reports whether the database answers within ctx, for readiness.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("mysql: ping: %w", err)
	}
	return nil
}

// verdictCols are the columns an upsert writes, in the order of the
// placeholders. status is handled separately because it has to be assigned
// last (MySQL applies ON DUPLICATE KEY UPDATE assignments left to right, and
// the done-guard of every other column reads the old status).
var verdictCols = []string{
	"run_id", "label", "category", "severity", "confidence", "action", "rationale",
	"evidence_ids", "early_exit", "injection_flagged", "error", "attempts", "pools_used",
	"fallback_used", "tokens_in", "tokens_out", "latency_ms", "published_at", "started_at",
	"finished_at", "oldest_message_at", "newest_message_at",
}

// upsertSQL inserts a verdict or updates the current revision of its key
// (uq_review ends in revision_slot, 0 on the current revision and on every
// row inserted: migration 00022). A done verdict is never overwritten by a
// non-done one: a late failed, expired or stopped attempt (a redelivery
// racing a finished one) must not erase a verdict that was paid for; nor is
// a done explicit re-review (revision above 1) overwritten by a review from
// a queue. LAST_INSERT_ID(id) makes the driver report the existing row's id
// on update.
var upsertSQL = func() string {
	var b strings.Builder
	b.WriteString("INSERT INTO verdicts (room_id, window_start, window_end, pipeline_version, status, ")
	b.WriteString(strings.Join(verdictCols, ", "))
	b.WriteString(", created_at, updated_at) VALUES (?, ?, ?, ?, ?, ")
	b.WriteString(strings.TrimSuffix(strings.Repeat("?, ", len(verdictCols)), ", "))
	b.WriteString(", UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)")
	const keep = "status = 'done' AND (VALUES(status) <> 'done' OR revision > 1)"
	for _, c := range append(verdictCols, "updated_at", "status") {
		fmt.Fprintf(&b, ", %s = IF(%s, %s, VALUES(%s))", c, keep, c, c)
	}
	return b.String()
}()

// selectVerdictSQL reads one revision by its row id.
const selectVerdictSQL = `SELECT room_id, window_start, window_end, pipeline_version, revision, superseded_at,
	run_id, status, label, category, severity, confidence, action,
	COALESCE(rationale, ''), evidence_ids, early_exit, injection_flagged, COALESCE(error, ''), attempts,
	published_at, started_at, finished_at, oldest_message_at, newest_message_at
	FROM verdicts WHERE id = ?`

// currentIDSQL finds the current revision of a key: revision_slot = 0
// completes uq_review, so it is a single-row lookup of the unique key.
const currentIDSQL = `SELECT id FROM verdicts
	WHERE room_id = ? AND window_start = ? AND window_end = ? AND pipeline_version = ? AND revision_slot = 0`

const selectStagesSQL = `SELECT stage, pool, model, attempts, ttft_ms, latency_ms, tokens_in, tokens_out,
	tokens_cached, cost_usd, output, COALESCE(error, '')
	FROM verdict_stages WHERE verdict_id = ?
	ORDER BY FIELD(stage, 'triage', 'extract', 'vision', 'judge'), stage`

// Get returns the current revision of the verdict under key with its stage
// results in pipeline order, or an error wrapping
// pipeline.ErrVerdictNotFound.
//
// Most calls are the worker's admission check on a review it has not seen
// yet: one statement outside a transaction answers those (a
// transaction's begin and rollback were two more of the job's round trips). A
// verdict that exists is then read with its stage rows in one read-only
// transaction, so that the two are consistent.
func (s *Store) Get(ctx context.Context, key pipeline.ReviewKey) (pipeline.Verdict, error) {
	var id uint64
	err := s.db.QueryRowContext(ctx, currentIDSQL, key.RoomID, dbTime(key.WindowStart), dbTime(key.WindowEnd), key.PipelineVersion).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return pipeline.Verdict{}, fmt.Errorf("mysql: get %s: %w", key, pipeline.ErrVerdictNotFound)
	}
	if err != nil {
		return pipeline.Verdict{}, fmt.Errorf("mysql: get: %w", err)
	}
	return s.readRevision(ctx, id)
}

// readRevision reads the revision of row id with its stage results,
// subjects and campaign signals in one read-only transaction.
func (s *Store) readRevision(ctx context.Context, id uint64) (pipeline.Verdict, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return pipeline.Verdict{}, fmt.Errorf("mysql: get: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	return readVerdict(ctx, tx, id)
}

// readVerdict reads the revision of row id in tx: the row, its stage
// results in pipeline order, its subjects and its campaign signals.
func readVerdict(ctx context.Context, tx *sql.Tx, id uint64) (pipeline.Verdict, error) {
	var (
		v                    pipeline.Verdict
		evidence             sql.NullString
		started, finished    sql.NullTime
		oldest, newest       sql.NullTime
		superseded           sql.NullTime
		status, label, cat   string
		action               string
		severity, attempts   int
		published, ws, we    time.Time
		earlyExit, injection bool
	)
	err := tx.QueryRowContext(ctx, selectVerdictSQL, id).Scan(
		&v.Key.RoomID, &ws, &we, &v.Key.PipelineVersion, &v.Revision, &superseded,
		&v.RunID, &status, &label, &cat, &severity, &v.Confidence, &action,
		&v.Rationale, &evidence, &earlyExit, &injection, &v.Error, &attempts,
		&published, &started, &finished, &oldest, &newest)
	if errors.Is(err, sql.ErrNoRows) {
		return pipeline.Verdict{}, fmt.Errorf("mysql: get verdict %d: %w", id, pipeline.ErrVerdictNotFound)
	}
	if err != nil {
		return pipeline.Verdict{}, fmt.Errorf("mysql: get: %w", err)
	}
	v.Key.WindowStart, v.Key.WindowEnd = ws.UTC(), we.UTC()
	v.Status, v.Label, v.Category, v.Action = pipeline.Status(status), pipeline.Label(label), pipeline.Category(cat), pipeline.Action(action)
	v.Severity, v.Attempts = severity, attempts
	v.EarlyExit, v.InjectionFlagged = earlyExit, injection
	v.PublishedAt = published.UTC()
	v.StartedAt, v.FinishedAt = fromNullTime(started), fromNullTime(finished)
	v.OldestMessageAt, v.NewestMessageAt = fromNullTime(oldest), fromNullTime(newest)
	v.SupersededAt = fromNullTime(superseded)
	if evidence.Valid && evidence.String != "" {
		if err := json.Unmarshal([]byte(evidence.String), &v.EvidenceIDs); err != nil {
			return pipeline.Verdict{}, fmt.Errorf("mysql: get: evidence_ids: %w", err)
		}
	}
	if v.Stages, err = readStages(ctx, tx, id); err != nil {
		return pipeline.Verdict{}, err
	}
	if v.Subjects, v.OffenderRole, err = readSubjects(ctx, tx, id); err != nil {
		return pipeline.Verdict{}, err
	}
	if v.Campaigns, v.Sightings, err = readCampaigns(ctx, tx, id); err != nil {
		return pipeline.Verdict{}, err
	}
	return v, nil
}

// readStages reads verdict id's stage rows in pipeline order.
func readStages(ctx context.Context, tx *sql.Tx, id uint64) ([]pipeline.StageResult, error) {
	rows, err := tx.QueryContext(ctx, selectStagesSQL, id)
	if err != nil {
		return nil, fmt.Errorf("mysql: get stages: %w", err)
	}
	defer rows.Close()
	var out []pipeline.StageResult
	for rows.Next() {
		var (
			st             pipeline.StageResult
			stage, pool    string
			ttftMs, latMs  float64
			output         sql.NullString
			att, tin, tout int
		)
		if err := rows.Scan(&stage, &pool, &st.Model, &att, &ttftMs, &latMs, &tin, &tout, &st.TokensCached, &st.CostUSD, &output, &st.Error); err != nil {
			return nil, fmt.Errorf("mysql: get stages: %w", err)
		}
		st.Stage, st.Pool = pipeline.StageName(stage), pipeline.Pool(pool)
		st.Attempts, st.TokensIn, st.TokensOut = att, tin, tout
		st.TTFT, st.Latency = fromMillis(ttftMs), fromMillis(latMs)
		if output.Valid && output.String != "" {
			st.Output = json.RawMessage(output.String)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: get stages: %w", err)
	}
	return out, nil
}

// Save upserts the verdict into the current revision of its key (a new
// key's first row is revision 1) and replaces its stage rows, its subjects
// (verdict_subjects), its participants (verdict_participants: not read
// back by Get) and its campaign signals (verdict_campaigns) in one
// transaction, and when it commits v it writes v.Outbox to the outbox in
// the same transaction (available at v.FinishedAt).
// A stored done verdict is kept when v is not done, and a stored done
// revision above 1 (an explicit re-review, Revise) whatever v is: Save then
// succeeds without changing anything and reports committed false (read back in the
// transaction, under the verdict row's lock). A deadlock or lock wait timeout is retried
// here a few times after a short random pause (internal/retry); Save stops
// early, returning an error that wraps ctx's cause, when ctx ends. Errors are retryable unless the
// verdict cannot be written at all (a *pipeline.PermanentError for data the
// schema rejects).
func (s *Store) Save(ctx context.Context, v pipeline.Verdict) (committed bool, err error) {
	return s.saveReleasing(ctx, v, "")
}

var _ pipeline.ReleasingSaver = (*Store)(nil)

// SaveReleasing implements pipeline.ReleasingSaver: Save, and in the same
// transaction the delete of owner's row in review_claims (Claims, on the
// same database), whether or not the done-guard kept the verdict.
// committed and errors are Save's.
func (s *Store) SaveReleasing(ctx context.Context, v pipeline.Verdict, owner string) (committed bool, err error) {
	return s.saveReleasing(ctx, v, owner)
}

// saveReleasing is Save, releasing owner's claim too unless owner is "".
func (s *Store) saveReleasing(ctx context.Context, v pipeline.Verdict, owner string) (bool, error) {
	if err := checkVerdict(v); err != nil {
		return false, pipeline.Permanent(fmt.Errorf("mysql: save: %w", err))
	}
	if err := checkOutbox(v.Outbox); err != nil {
		return false, fmt.Errorf("mysql: save: %w", err)
	}
	if err := checkActions(v.Actions); err != nil {
		return false, fmt.Errorf("mysql: save: %w", err)
	}
	args, err := upsertArgs(v)
	if err != nil {
		return false, pipeline.Permanent(fmt.Errorf("mysql: save: %w", err))
	}
	// Concurrent saves of one key can still deadlock on the unique index;
	// InnoDB rolls the loser back whole, so trying again is safe, and far
	// cheaper than a queue round trip that pays for the model calls again.
	// The random pause keeps the losers from colliding again in lockstep.
	var committed bool
	err = retry.Do(ctx, saveRetry, retry.Options{Retryable: isLockConflict}, func(ctx context.Context) error {
		var err error
		committed, err = s.save(ctx, v, args, owner)
		return err
	})
	return committed && err == nil, err
}

// saveRetry bounds how often Save tries one verdict before handing the
// failure to the queue, and the full-jitter pause before each retry:
// uniform in [0, min(160 ms, 20 ms·2^(n−1))], so at most ~0.4 s in all.
var saveRetry = retry.Policy{Initial: 20 * time.Millisecond, Max: 160 * time.Millisecond, Attempts: 5}

// isLockConflict reports a deadlock (1213) or lock wait timeout (1205):
// another transaction's locks, not this verdict, made the save fail.
func isLockConflict(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// saveTx runs at READ COMMITTED: under REPEATABLE READ, InnoDB takes gap
// locks on every index range a write scans, and concurrent saves of
// different verdicts, whose stage rows sit next to each other at the end of
// the verdict_stages primary key, then deadlock on each other's gaps. No
// statement here needs a repeatable snapshot: the upsert locks the verdict
// row, so saves of one key are serialised by that row lock, and the
// done-guard is evaluated inside the upsert itself. (On MySQL with binary
// logging, this needs binlog_format ROW or MIXED, the defaults.)
var saveTx = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// save runs one attempt of Save and reports whether v is the stored
// verdict now; a non-empty owner also releases owner's claim on v.Key
// before the commit.
func (s *Store) save(ctx context.Context, v pipeline.Verdict, args []any, owner string) (bool, error) {
	tx, err := s.db.BeginTx(ctx, saveTx)
	if err != nil {
		return false, classify(fmt.Errorf("mysql: save: begin: %w", err))
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, upsertSQL, args...)
	if err != nil {
		return false, classify(fmt.Errorf("mysql: save verdict: %w", err))
	}
	id, err := res.LastInsertId()
	if err != nil || id == 0 {
		return false, classify(fmt.Errorf("mysql: save verdict: no id: %w", err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, classify(fmt.Errorf("mysql: save verdict: rows affected: %w", err))
	}
	// INSERT ... ON DUPLICATE KEY UPDATE affects 1 row when it inserted, 2
	// when it updated and 0 when the row is unchanged (the done-guard kept
	// it). A new row has no stage rows yet, so there is nothing to delete or
	// read back, and skipping both keeps this transaction's locks to the
	// rows it writes. Otherwise the status read back under the row's lock
	// tells whether v is the stored verdict: the done-guard alone keeps
	// one of another status.
	committed := true
	if n == 1 {
		if err := writeChildren(ctx, tx, id, v); err != nil {
			return false, classify(err)
		}
	} else {
		var stored string
		if err := tx.QueryRowContext(ctx, "SELECT status FROM verdicts WHERE id = ?", id).Scan(&stored); err != nil {
			return false, classify(fmt.Errorf("mysql: save verdict: read back: %w", err))
		}
		// A kept row is unchanged (0 rows affected): a done re-review
		// kept against a done v has v's status and is still not v.
		committed = n != 0 && stored == string(v.Status)
		if committed {
			if err := replaceStages(ctx, tx, id, v.Stages); err != nil {
				return false, classify(err)
			}
			if err := replaceSubjects(ctx, tx, id, v, false); err != nil {
				return false, classify(err)
			}
			if err := replaceParticipants(ctx, tx, id, v, false); err != nil {
				return false, classify(err)
			}
			if err := replaceCampaigns(ctx, tx, id, v, false); err != nil {
				return false, classify(err)
			}
		}
	}
	if committed {
		if err := saveAliases(ctx, tx, v, decidedAt(v)); err != nil {
			return false, classify(err)
		}
		if err := insertOutbox(ctx, tx, v.FinishedAt, v.Outbox); err != nil {
			return false, classify(fmt.Errorf("mysql: save verdict: %w", err))
		}
		if err := writeActions(ctx, tx, v.Actions); err != nil {
			return false, classify(err)
		}
	}
	if owner != "" {
		if err := releaseClaim(ctx, tx, v.Key, owner); err != nil {
			return false, classify(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, classify(fmt.Errorf("mysql: save: commit: %w", err))
	}
	return committed, nil
}

// replaceStages makes an existing verdict's stage rows exactly stages.
func replaceStages(ctx context.Context, tx *sql.Tx, id int64, stages []pipeline.StageResult) error {
	names := make([]any, 0, len(stages)+1)
	names = append(names, id)
	for _, st := range stages {
		names = append(names, string(st.Stage))
	}
	del := "DELETE FROM verdict_stages WHERE verdict_id = ?"
	if len(stages) > 0 {
		del += " AND stage NOT IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(stages)), ", ") + ")"
	}
	if _, err := tx.ExecContext(ctx, del, names...); err != nil {
		return fmt.Errorf("mysql: save stages: delete: %w", err)
	}
	return insertStages(ctx, tx, id, stages)
}

// insertStages writes stages, overwriting rows of the same stage.
func insertStages(ctx context.Context, tx *sql.Tx, id int64, stages []pipeline.StageResult) error {
	if len(stages) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("INSERT INTO verdict_stages (verdict_id, stage, pool, model, attempts, ttft_ms, latency_ms, tokens_in, tokens_out, tokens_cached, cost_usd, output, error) VALUES ")
	args := make([]any, 0, len(stages)*13)
	for i, st := range stages {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, id, string(st.Stage), string(st.Pool), st.Model, st.Attempts,
			millis(st.TTFT), millis(st.Latency), st.TokensIn, st.TokensOut, max(st.TokensCached, 0), max(st.CostUSD, 0),
			nullJSON(st.Output), nullString(st.Error))
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE pool = VALUES(pool), model = VALUES(model), attempts = VALUES(attempts), " +
		"ttft_ms = VALUES(ttft_ms), latency_ms = VALUES(latency_ms), tokens_in = VALUES(tokens_in), " +
		"tokens_out = VALUES(tokens_out), tokens_cached = VALUES(tokens_cached), cost_usd = VALUES(cost_usd), output = VALUES(output), error = VALUES(error)")
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("mysql: save stages: %w", err)
	}
	return nil
}

func upsertArgs(v pipeline.Verdict) ([]any, error) {
	var evidence any
	if v.EvidenceIDs != nil {
		b, err := json.Marshal(v.EvidenceIDs)
		if err != nil {
			return nil, fmt.Errorf("evidence_ids: %w", err)
		}
		evidence = string(b)
	}
	var (
		tokIn, tokOut int
		pools         []string
		fallback      bool
	)
	for _, st := range v.Stages {
		tokIn += st.TokensIn
		tokOut += st.TokensOut
		if st.Pool == pipeline.PoolFallback {
			fallback = true
		}
		if st.Pool != "" && !contains(pools, string(st.Pool)) {
			pools = append(pools, string(st.Pool))
		}
	}
	var latency float64
	if !v.StartedAt.IsZero() && !v.FinishedAt.IsZero() {
		latency = millis(v.FinishedAt.Sub(v.StartedAt))
	}
	k := v.Key
	return []any{
		k.RoomID, dbTime(k.WindowStart), dbTime(k.WindowEnd), k.PipelineVersion, string(v.Status),
		v.RunID, string(v.Label), string(v.Category), v.Severity, v.Confidence, string(v.Action), nullString(v.Rationale),
		evidence, v.EarlyExit, v.InjectionFlagged, nullString(v.Error), v.Attempts, strings.Join(pools, ","),
		fallback, tokIn, tokOut, latency, dbTime(v.PublishedAt), nullTime(v.StartedAt),
		nullTime(v.FinishedAt), nullTime(v.OldestMessageAt), nullTime(v.NewestMessageAt),
	}, nil
}

// checkVerdict rejects what the schema cannot hold, before any round trip.
func checkVerdict(v pipeline.Verdict) error {
	var errs []error
	k := v.Key
	if k.RoomID == "" || len(k.RoomID) > 128 {
		errs = append(errs, errors.New("room id must be 1 to 128 bytes"))
	}
	if k.PipelineVersion == "" || len(k.PipelineVersion) > 64 {
		errs = append(errs, errors.New("pipeline version must be 1 to 64 bytes"))
	}
	if k.WindowStart.IsZero() || k.WindowEnd.IsZero() {
		errs = append(errs, errors.New("window bounds are required"))
	}
	switch v.Status {
	case pipeline.StatusDone, pipeline.StatusExpired, pipeline.StatusStopped, pipeline.StatusFailed:
	default:
		errs = append(errs, fmt.Errorf("unknown status %q", v.Status))
	}
	if v.Severity < 0 || v.Severity > 255 || v.Attempts < 0 {
		errs = append(errs, errors.New("severity and attempts must be in range"))
	}
	if err := checkClosedSets(v); err != nil {
		errs = append(errs, err)
	}
	if err := checkSubjects(v); err != nil {
		errs = append(errs, err)
	}
	if err := checkParticipants(v); err != nil {
		errs = append(errs, err)
	}
	if err := checkCampaigns(v); err != nil {
		errs = append(errs, err)
	}
	if err := checkAliases(v); err != nil {
		errs = append(errs, err)
	}
	seen := map[pipeline.StageName]bool{}
	for _, st := range v.Stages {
		if st.Stage == "" || len(st.Stage) > 16 || seen[st.Stage] {
			errs = append(errs, fmt.Errorf("stage %q is empty, too long or repeated", st.Stage))
		}
		seen[st.Stage] = true
		if len(st.Output) > 0 && !json.Valid(st.Output) {
			errs = append(errs, fmt.Errorf("stage %q output is not JSON", st.Stage))
		}
	}
	return errors.Join(errs...)
}

// classify marks database failures retryable: a lost connection, a
// deadlock or a lock wait timeout all go away on a later attempt, and the
// upsert makes the retry harmless.
func classify(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1406, 1366, 1264, 3140, 4025, 3819: // data too long, bad value, out of range, invalid JSON, CHECK failed (MariaDB, MySQL)
			return pipeline.Permanent(err)
		}
	}
	return pipeline.Retryable(err, 0)
}

func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return dbTime(t)
}

// fromNullTime is the zero time for NULL (unknown), else the time in UTC.
func fromNullTime(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fromMillis(ms float64) time.Duration {
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Microsecond)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// tracedDB opens the pool over conn with otelsql's spans (queries,
// executions, transactions) under a sampled span only, and the statement
// text and arguments never recorded: statements carry room and account
// ids as arguments, and interpolation puts them in the text.
func tracedDB(conn driver.Connector, tp trace.TracerProvider) *sql.DB {
	return otelsql.OpenDB(conn, otelsql.WithTracerProvider(tp),
		otelsql.WithAttributes(attribute.String("db.system.name", "mysql")),
		otelsql.WithSpanOptions(otelsql.SpanOptions{
			DisableQuery: true, OmitConnResetSession: true, OmitConnPrepare: true, OmitRows: true, OmitConnectorConnect: true,
			SpanFilter: func(ctx context.Context, _ otelsql.Method, _ string, _ []driver.NamedValue) bool {
				return trace.SpanFromContext(ctx).IsRecording()
			},
		}))
}
