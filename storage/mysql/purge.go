package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/retry"
)

// PurgeConfig says what retention keeps and how gently Purge deletes.
type PurgeConfig struct {
	// StageRetention keeps the stage rows of verdicts created within it;
	// older ones are deleted (they are the bulk: one to four rows a review,
	// each with its model output).
	StageRetention time.Duration
	// VerdictRetention keeps verdicts created within it; older ones are
	// deleted with any stage rows they still have. At least StageRetention.
	VerdictRetention time.Duration
	// BatchSize bounds the rows one DELETE removes (stage rows or verdicts),
	// so that no statement holds its locks long or sends a large event to
	// the replicas.
	BatchSize int
	// Pause is the wait after each batch that deleted rows, so that
	// replicas and other writers keep up.
	Pause time.Duration
	// ClaimGrace is how long after its expiry a review claim is deleted.
	// A claim is normally released with its review; one left by a worker
	// that died, or whose release failed, expires and would stay forever.
	// Zero takes an hour.
	ClaimGrace time.Duration
	// TakeHistoryRetention keeps the take history (take_history: when
	// moderators took and released items) recorded within it. Zero takes
	// DefaultTakeHistoryRetention.
	TakeHistoryRetention time.Duration
	// DryRun counts what would be deleted and deletes nothing.
	DryRun bool
	// OnBatch, when set, is called after every batch, from Purge's
	// goroutine.
	OnBatch func(PurgeBatch)
}

// DefaultPurgeConfig returns the retention `worker purge` applies unless
// told otherwise: stage rows for 30 days, verdicts for 180 days, the take
// history for 90 days, 1000 rows a batch, 100 ms between batches.
func DefaultPurgeConfig() PurgeConfig {
	return PurgeConfig{
		StageRetention:   30 * 24 * time.Hour,
		VerdictRetention: 180 * 24 * time.Hour,
		BatchSize:        1000,
		Pause:            100 * time.Millisecond,
		// The take history is small (a few rows a decision).
		TakeHistoryRetention: DefaultTakeHistoryRetention,
	}
}

// DefaultTakeHistoryRetention is how long the take history is kept when
// PurgeConfig.TakeHistoryRetention is zero: a quarter's shifts, for the
// analysts' pick-up and handle times.
const DefaultTakeHistoryRetention = 90 * 24 * time.Hour

// MaxPurgeBatch bounds PurgeConfig.BatchSize.
const MaxPurgeBatch = 50000

// Validate reports every problem with the configuration.
func (c PurgeConfig) Validate() error {
	var errs []error
	if c.StageRetention <= 0 {
		errs = append(errs, errors.New("stage retention must be positive"))
	}
	if c.VerdictRetention <= 0 {
		errs = append(errs, errors.New("verdict retention must be positive"))
	} else if c.VerdictRetention < c.StageRetention {
		errs = append(errs, errors.New("verdict retention must be at least the stage retention (deleting a verdict deletes its stage rows)"))
	}
	// A verdict has at most four stage rows; a smaller batch could not
	// make progress inside one verdict.
	if c.BatchSize < 10 || c.BatchSize > MaxPurgeBatch {
		errs = append(errs, fmt.Errorf("batch size %d is not in 10..%d", c.BatchSize, MaxPurgeBatch))
	}
	if c.TakeHistoryRetention < 0 {
		errs = append(errs, errors.New("take history retention must not be negative"))
	}
	if c.Pause < 0 {
		errs = append(errs, errors.New("pause must not be negative"))
	}
	return errors.Join(errs...)
}

// PurgeBatch is one batch of a purge: the primary-key range [FromID, ToID)
// of Table it covered and the rows it deleted (or would delete, dry).
type PurgeBatch struct {
	Table        string
	FromID, ToID uint64
	Rows         int64
}

// PurgeReport is what a purge did.
type PurgeReport struct {
	// StageCutoff and VerdictCutoff: rows created before them were due.
	StageCutoff, VerdictCutoff time.Time
	// StageRows and Verdicts deleted (would be deleted, in a dry run).
	StageRows, Verdicts int64
	// Claims is the expired review claims deleted (would be deleted).
	Claims int64
	// TakeHistory is the take history rows deleted (would be deleted).
	TakeHistory int64
	Batches     int
	Elapsed     time.Duration
	DryRun      bool
}

// RowsPerSecond is the purge's rate over its whole run, pauses included.
func (r PurgeReport) RowsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.StageRows+r.Verdicts) / r.Elapsed.Seconds()
}

// String is the report line `worker purge` prints.
func (r PurgeReport) String() string {
	verb := "deleted"
	if r.DryRun {
		verb = "would delete"
	}
	return fmt.Sprintf("purge: %s %d stage rows (verdicts created before %s) and %d verdicts (created before %s) in %d batches, %s, %.0f rows/s; %d expired review claims; %d take history rows",
		verb, r.StageRows, r.StageCutoff.Format(time.RFC3339), r.Verdicts, r.VerdictCutoff.Format(time.RFC3339),
		r.Batches, r.Elapsed.Round(time.Millisecond), r.RowsPerSecond(), r.Claims, r.TakeHistory)
}

// Purge applies retention: it deletes the stage rows of verdicts created
// before now-StageRetention, then the verdicts created before
// now-VerdictRetention, then the review claims expired for ClaimGrace,
// keeping every verdict a moderator decided on (a
// moderator_decisions row), with its stage rows. It walks each table's
// primary key in ranges of at most BatchSize rows, one short READ COMMITTED
// transaction per range (so it locks only the rows it deletes, never a gap
// or a whole table), pausing after each batch that deleted rows. A batch
// that loses a lock conflict, or that races a new decision (the foreign key
// refuses to delete a decided verdict), is tried again. Purge returns what
// it did so far with an error wrapping ctx's when ctx ends (a bounded run:
// the next run continues), or with the database's error. The cutoffs, the
// pauses, the waits between tries and the elapsed time come from clk (nil:
// the wall clock).
func (s *Store) Purge(ctx context.Context, cfg PurgeConfig, clk clock.Clock) (PurgeReport, error) {
	if err := cfg.Validate(); err != nil {
		return PurgeReport{}, fmt.Errorf("mysql: purge: %w", err)
	}
	clk = clock.Or(clk)
	p := &purge{Store: s, cfg: cfg, clk: clk}
	t := clk.Now().UTC()
	r := PurgeReport{
		StageCutoff:   dbTime(t.Add(-cfg.StageRetention)),
		VerdictCutoff: dbTime(t.Add(-cfg.VerdictRetention)),
		DryRun:        cfg.DryRun,
	}
	started := clk.Now()
	n, err := p.purgeTable(ctx, &r, stagePurge, r.StageCutoff)
	r.StageRows = n
	if err != nil {
		r.Elapsed = clk.Since(started)
		return r, fmt.Errorf("mysql: purge stage rows: %w", err)
	}
	n, err = p.purgeTable(ctx, &r, verdictPurge, r.VerdictCutoff)
	r.Verdicts = n
	if err != nil {
		r.Elapsed = clk.Since(started)
		return r, fmt.Errorf("mysql: purge verdicts: %w", err)
	}
	grace := cfg.ClaimGrace
	if grace <= 0 {
		grace = time.Hour
	}
	r.Claims, err = p.purgeClaims(ctx, dbTime(t.Add(-grace)))
	if err != nil {
		r.Elapsed = clk.Since(started)
		return r, fmt.Errorf("mysql: purge review claims: %w", err)
	}
	keep := cfg.TakeHistoryRetention
	if keep == 0 {
		keep = DefaultTakeHistoryRetention
	}
	r.TakeHistory, err = p.purgeTakeHistory(ctx, dbTime(t.Add(-keep)))
	r.Elapsed = clk.Since(started)
	if err != nil {
		return r, fmt.Errorf("mysql: purge take history: %w", err)
	}
	return r, nil
}

// purge is one Purge run: the store, its settings and its clock.
type purge struct {
	*Store
	cfg PurgeConfig
	clk clock.Clock
}

// purgeClaims deletes the claims that expired before cutoff, BatchSize at
// a time. The table holds about one row per review in flight, so a scan of
// it is cheap; no index on the expiry is needed.
func (p *purge) purgeClaims(ctx context.Context, cutoff time.Time) (int64, error) {
	s, cfg := p.Store, p.cfg
	if cfg.DryRun {
		var n int64
		err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM review_claims WHERE expires_at < ?", cutoff).Scan(&n)
		return n, err
	}
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, "DELETE FROM review_claims WHERE expires_at < ? LIMIT ?", cutoff, cfg.BatchSize)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
		if n < int64(cfg.BatchSize) {
			return total, nil
		}
		if cfg.Pause > 0 {
			if err := clock.Sleep(ctx, p.clk, cfg.Pause); err != nil {
				return total, err
			}
		}
	}
}

// purgeTakeHistory deletes the take history recorded before cutoff,
// BatchSize rows at a time, pausing between batches as the other tables'
// purges do.
func (p *purge) purgeTakeHistory(ctx context.Context, cutoff time.Time) (int64, error) {
	if p.cfg.DryRun {
		var n int64
		err := p.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM take_history WHERE at < ?", cutoff).Scan(&n)
		return n, err
	}
	var total int64
	for {
		n, err := p.PurgeTakeHistory(ctx, cutoff, p.cfg.BatchSize)
		total += int64(n)
		if err != nil || n < p.cfg.BatchSize {
			return total, err
		}
		if p.cfg.Pause > 0 {
			if err := clock.Sleep(ctx, p.clk, p.cfg.Pause); err != nil {
				return total, err
			}
		}
	}
}

// purgeTarget is the SQL of one table's purge. Each statement takes the
// range [lo, hi) and the cutoff, in that order.
type purgeTarget struct {
	table string
	// first is the lowest key; next the key BatchSize rows above lo (the
	// end of a batch), or no row when fewer are left.
	first, next string
	// del deletes the due rows of a range; count counts them (dry run).
	del, count string
}

// undecided joins a verdict v to its decisions d; with "d.verdict_id IS
// NULL" in the WHERE clause it keeps every verdict a moderator decided on.
// The anti-join form is a lookup per verdict on the decisions index in both
// MySQL and MariaDB; a NOT EXISTS may be planned as a scan of every decision
// ever made, which would grow with each batch.
const undecided = " LEFT JOIN moderator_decisions d ON d.verdict_id = v.id "

var stagePurge = purgeTarget{
	table: "verdict_stages",
	first: "SELECT MIN(verdict_id) FROM verdict_stages",
	next:  "SELECT verdict_id FROM verdict_stages WHERE verdict_id >= ? ORDER BY verdict_id LIMIT 1 OFFSET ?",
	del: "DELETE s FROM verdict_stages s JOIN verdicts v ON v.id = s.verdict_id" + undecided +
		"WHERE s.verdict_id >= ? AND s.verdict_id < ? AND v.created_at < ? AND d.verdict_id IS NULL",
	count: "SELECT COUNT(*) FROM verdict_stages s JOIN verdicts v ON v.id = s.verdict_id" + undecided +
		"WHERE s.verdict_id >= ? AND s.verdict_id < ? AND v.created_at < ? AND d.verdict_id IS NULL",
}

var verdictPurge = purgeTarget{
	table: "verdicts",
	first: "SELECT MIN(id) FROM verdicts",
	next:  "SELECT id FROM verdicts WHERE id >= ? ORDER BY id LIMIT 1 OFFSET ?",
	del:   "DELETE v FROM verdicts v" + undecided + "WHERE v.id >= ? AND v.id < ? AND v.created_at < ? AND d.verdict_id IS NULL",
	count: "SELECT COUNT(*) FROM verdicts v" + undecided + "WHERE v.id >= ? AND v.id < ? AND v.created_at < ? AND d.verdict_id IS NULL",
}

// lastDueSQL finds the newest verdict created before the cutoff: ids grow
// with created_at (AUTO_INCREMENT at insert), so no due row lies much above
// it, and the walk stops there instead of reading the recent rows. A row
// that a concurrent insert placed out of order is left for the next run;
// every DELETE also checks created_at itself. The MAX form reads two index
// entries whatever the optimizer's statistics say (an ORDER BY … LIMIT 1
// form may be planned as a backward scan through every newer row).
const lastDueSQL = `SELECT id FROM verdicts
	WHERE created_at = (SELECT MAX(created_at) FROM verdicts WHERE created_at < ?)
	ORDER BY id DESC LIMIT 1`

// purgeTx deletes only the rows it matches: READ COMMITTED takes no gap
// locks on the range's ends, where the saves of new verdicts never are
// anyway.
var purgeTx = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// purgePolicy retries a batch that lost a lock conflict or raced a decision.
var purgePolicy = retry.Policy{Initial: 50 * time.Millisecond, Max: time.Second, Attempts: 5}

func (p *purge) purgeTable(ctx context.Context, r *PurgeReport, t purgeTarget, cutoff time.Time) (int64, error) {
	s, cfg := p.Store, p.cfg
	var last uint64
	err := s.db.QueryRowContext(ctx, lastDueSQL, cutoff).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last due verdict: %w", err)
	}
	var first sql.Null[uint64]
	if err := s.db.QueryRowContext(ctx, t.first).Scan(&first); err != nil {
		return 0, fmt.Errorf("first key: %w", err)
	}
	if !first.Valid {
		return 0, nil
	}
	var total int64
	for lo := first.V; lo <= last; {
		var hi uint64
		err := s.db.QueryRowContext(ctx, t.next, lo, cfg.BatchSize).Scan(&hi)
		switch {
		case errors.Is(err, sql.ErrNoRows) || (err == nil && hi > last):
			hi = last + 1
		case err != nil:
			return total, fmt.Errorf("next range: %w", err)
		case hi <= lo:
			hi = lo + 1
		}
		var n int64
		err = retry.Do(ctx, purgePolicy, retry.Options{Clock: p.clk, Retryable: purgeRetryable}, func(ctx context.Context) error {
			var err error
			n, err = s.purgeRange(ctx, t, cfg.DryRun, lo, hi, cutoff)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("range [%d, %d): %w", lo, hi, err)
		}
		total += n
		r.Batches++
		if cfg.OnBatch != nil {
			cfg.OnBatch(PurgeBatch{Table: t.table, FromID: lo, ToID: hi, Rows: n})
		}
		lo = hi
		if n > 0 && cfg.Pause > 0 && lo <= last {
			if err := clock.Sleep(ctx, p.clk, cfg.Pause); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// purgeRange deletes (or counts) the due rows of [lo, hi) in one
// transaction.
func (s *Store) purgeRange(ctx context.Context, t purgeTarget, dry bool, lo, hi uint64, cutoff time.Time) (int64, error) {
	if dry {
		var n int64
		err := s.db.QueryRowContext(ctx, t.count, lo, hi, cutoff).Scan(&n)
		return n, err
	}
	tx, err := s.db.BeginTx(ctx, purgeTx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, t.del, lo, hi, cutoff)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// purgeRetryable: a lock conflict (1205, 1213) or a decision that arrived
// between the NOT EXISTS and the delete (1451, the foreign key's refusal)
// goes away when the batch runs again.
func purgeRetryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1205 || me.Number == 1213 || me.Number == 1451)
}
