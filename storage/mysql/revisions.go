package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

// Verdict revisions (migration 00022): every verdicts row is one revision
// of its review key; revision_slot is 0 on the key's current revision (and
// superseded_at NULL), the revision's number on a superseded one, and
// uq_review (key, revision_slot) holds at most one current revision per
// key. A review from a queue saves over the current revision (Save); an
// explicit re-review writes a new one (Revise), so that the decisions,
// takes and participants of the earlier revision keep pointing at the
// verdict they were about.

var _ pipeline.VerdictReviser = (*Store)(nil)

// insertRevisionSQL inserts a verdicts row with an explicit revision
// number; it is a current revision (revision_slot 0, superseded_at NULL).
var insertRevisionSQL = "INSERT INTO verdicts (room_id, window_start, window_end, pipeline_version, status, " +
	strings.Join(verdictCols, ", ") + ", revision, created_at, updated_at) VALUES (?, ?, ?, ?, ?, " +
	strings.Repeat("?, ", len(verdictCols)) + "?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))"

// lockCurrentSQL reads and locks the current revision of a key.
const lockCurrentSQL = `SELECT id, revision, status FROM verdicts
	WHERE room_id = ? AND window_start = ? AND window_end = ? AND pipeline_version = ? AND revision_slot = 0
	FOR UPDATE`

// Revise implements pipeline.VerdictReviser: in one transaction, it locks
// the key's current revision, marks it superseded and inserts v as the
// next revision with its stage, subject, participant and campaign rows (or
// inserts revision 1 when the key has none), and v.Actions (the planner's,
// pipeline.ActionPlanner) with the outbox rows of the `on` ones, each
// rebound to the revision numbered here (pipeline.ActionRecord.AtRevision). When v is not done and the
// current revision is, nothing changes and committed is false. Two first
// revisions of one key racing each other (a duplicate key), deadlocks and
// lock wait timeouts are retried as Save retries them; it stops early,
// returning an error that wraps ctx's cause, when ctx ends. A verdict the
// schema cannot hold is a *pipeline.PermanentError.
func (s *Store) Revise(ctx context.Context, v pipeline.Verdict) (revision int, committed bool, err error) {
	if err := checkVerdict(v); err != nil {
		return 0, false, pipeline.Permanent(fmt.Errorf("mysql: revise: %w", err))
	}
	if err := checkActions(v.Actions); err != nil {
		return 0, false, fmt.Errorf("mysql: revise: %w", err)
	}
	args, err := upsertArgs(v)
	if err != nil {
		return 0, false, pipeline.Permanent(fmt.Errorf("mysql: revise: %w", err))
	}
	retryable := func(err error) bool { return isLockConflict(err) || isDuplicate(err) }
	err = retry.Do(ctx, saveRetry, retry.Options{Retryable: retryable}, func(ctx context.Context) error {
		var err error
		revision, committed, err = s.revise(ctx, v, args)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return revision, committed, nil
}

// isDuplicate reports a duplicate key (1062): here, another transaction
// inserted the key's first revision after this one found none.
func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// revise is one attempt of Revise.
func (s *Store) revise(ctx context.Context, v pipeline.Verdict, args []any) (int, bool, error) {
	tx, err := s.db.BeginTx(ctx, saveTx)
	if err != nil {
		return 0, false, classify(fmt.Errorf("mysql: revise: begin: %w", err))
	}
	defer func() { _ = tx.Rollback() }()
	k := v.Key
	var (
		curID  int64
		curRev int
		status string
	)
	err = tx.QueryRowContext(ctx, lockCurrentSQL, k.RoomID, dbTime(k.WindowStart), dbTime(k.WindowEnd), k.PipelineVersion).Scan(&curID, &curRev, &status)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// Usually a new key; but retention may have purged a current
		// revision and kept a decided earlier one: number after it.
		err = tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(revision), 0) FROM verdicts
			WHERE room_id = ? AND window_start = ? AND window_end = ? AND pipeline_version = ?`,
			k.RoomID, dbTime(k.WindowStart), dbTime(k.WindowEnd), k.PipelineVersion).Scan(&curRev)
		if err != nil {
			return 0, false, classify(fmt.Errorf("mysql: revise: last revision: %w", err))
		}
	case err != nil:
		return 0, false, classify(fmt.Errorf("mysql: revise: current revision: %w", err))
	case status == string(pipeline.StatusDone) && v.Status != pipeline.StatusDone:
		// The done-guard: a failed re-review does not hide a done verdict.
		return curRev, false, nil
	default:
		if _, err := tx.ExecContext(ctx, "UPDATE verdicts SET revision_slot = revision, superseded_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6) WHERE id = ?", curID); err != nil {
			return 0, false, classify(fmt.Errorf("mysql: revise: supersede: %w", err))
		}
	}
	rev := curRev + 1
	res, err := tx.ExecContext(ctx, insertRevisionSQL, append(args[:len(args):len(args)], rev)...)
	if err != nil {
		return 0, false, classify(fmt.Errorf("mysql: revise: insert: %w", err))
	}
	id, err := res.LastInsertId()
	if err != nil || id == 0 {
		return 0, false, classify(fmt.Errorf("mysql: revise: no id: %w", err))
	}
	if err := writeChildren(ctx, tx, id, v); err != nil {
		return 0, false, classify(err)
	}
	if err := writeActions(ctx, tx, actionsAt(v.Actions, rev)); err != nil {
		return 0, false, classify(err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, classify(fmt.Errorf("mysql: revise: commit: %w", err))
	}
	return rev, true, nil
}

// actionsAt rebinds a re-review's planned actions to the revision the
// transaction numbered (pipeline.ActionRecord.AtRevision).
func actionsAt(recs []pipeline.ActionRecord, rev int) []pipeline.ActionRecord {
	out := make([]pipeline.ActionRecord, len(recs))
	for i, r := range recs {
		out[i] = r.AtRevision(rev)
	}
	return out
}

// writeChildren writes a new verdicts row's stage, subject, participant
// and campaign rows.
func writeChildren(ctx context.Context, tx *sql.Tx, id int64, v pipeline.Verdict) error {
	if err := insertStages(ctx, tx, id, v.Stages); err != nil {
		return err
	}
	if err := replaceSubjects(ctx, tx, id, v, true); err != nil {
		return err
	}
	if err := replaceParticipants(ctx, tx, id, v, true); err != nil {
		return err
	}
	return replaceCampaigns(ctx, tx, id, v, true)
}

// Revisions implements pipeline.VerdictReviser: every revision of key,
// oldest first, read in one read-only transaction.
func (s *Store) Revisions(ctx context.Context, key pipeline.ReviewKey) ([]pipeline.Verdict, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("mysql: revisions: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	ids, err := revisionIDs(ctx, tx, key)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("mysql: revisions %s: %w", key, pipeline.ErrVerdictNotFound)
	}
	out := make([]pipeline.Verdict, 0, len(ids))
	for _, id := range ids {
		v, err := readVerdict(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// revisionIDs are the row ids of key's revisions, oldest first (a range
// of uq_review).
func revisionIDs(ctx context.Context, tx *sql.Tx, key pipeline.ReviewKey) ([]uint64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM verdicts
		WHERE room_id = ? AND window_start = ? AND window_end = ? AND pipeline_version = ?
		ORDER BY revision, id`, key.RoomID, dbTime(key.WindowStart), dbTime(key.WindowEnd), key.PipelineVersion)
	if err != nil {
		return nil, fmt.Errorf("mysql: revisions: %w", err)
	}
	defer rows.Close()
	var ids []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("mysql: revisions: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: revisions: %w", err)
	}
	return ids, nil
}
