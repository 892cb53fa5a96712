package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/chatguard/chatguard/pipeline"
)

// Queue assignment (migration 00014): a moderator takes a verdict of the
// queue so that nobody else decides it meanwhile. Every change is one
// conditional statement, so console replicas need no lock of their own:
// the row is the one holder.

// Take is who holds a queue item.
type Take struct {
	VerdictID uint64
	// Moderator is the console's pseudonymous moderator id.
	Moderator string
	TakenAt   time.Time
	// ActiveAt is the taker's last action on the item; a take whose
	// ActiveAt is before the caller's stale cut-off no longer holds.
	ActiveAt time.Time
}

// ErrTaken is wrapped by a *TakenError.
var ErrTaken = errors.New("taken by another moderator")

// TakenError says that another moderator holds the item.
type TakenError struct{ Holder Take }

func (e *TakenError) Error() string {
	return fmt.Sprintf("verdict %d is taken by %s (active %s)", e.Holder.VerdictID, e.Holder.Moderator,
		e.Holder.ActiveAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrTaken) true.
func (e *TakenError) Is(target error) bool { return target == ErrTaken }

// maxTakeTries bounds TakeItem's retries when the row changes between its
// statements (released or taken by someone else in between).
const maxTakeTries = 3

// TakeItem makes moderator the holder of verdictID at now and returns the
// take. It succeeds when nobody holds the item, when moderator already
// does (the take's activity is renewed), when the holder's last activity
// is before staleBefore, or when force is set (an override the caller has
// audited). Otherwise it returns a *TakenError naming the holder. A
// verdict id no row has is a *pipeline.PermanentError wrapping
// pipeline.ErrVerdictNotFound.
func (s *Store) TakeItem(ctx context.Context, verdictID uint64, moderator string, now, staleBefore time.Time, force bool) (Take, error) {
	if verdictID == 0 || moderator == "" || len(moderator) > 128 || now.IsZero() {
		return Take{}, pipeline.Permanent(errors.New("mysql: take: verdict id, a moderator of 1..128 bytes and a time are required"))
	}
	at := dbTime(now)
	for range maxTakeTries {
		_, err := s.db.ExecContext(ctx, `INSERT INTO queue_takes (verdict_id, moderator, taken_at, active_at) VALUES (?, ?, ?, ?)`,
			verdictID, moderator, at, at)
		if err == nil {
			return Take{VerdictID: verdictID, Moderator: moderator, TakenAt: at, ActiveAt: at}, nil
		}
		if isForeignKey(err) {
			return Take{}, pipeline.Permanent(fmt.Errorf("mysql: take: verdict %d: %w", verdictID, pipeline.ErrVerdictNotFound))
		}
		if !isDuplicateKey(err) {
			return Take{}, fmt.Errorf("mysql: take: %w", err)
		}
		// taken_at is assigned before moderator: MySQL and MariaDB
		// assign left to right, so the IF still sees the old holder.
		_, err = s.db.ExecContext(ctx, `UPDATE queue_takes SET taken_at = IF(moderator = ?, taken_at, ?), moderator = ?, active_at = ?
			WHERE verdict_id = ? AND (moderator = ? OR active_at < ? OR ?)`,
			moderator, at, moderator, at, verdictID, moderator, dbTime(staleBefore), force)
		if err != nil {
			return Take{}, fmt.Errorf("mysql: take: %w", err)
		}
		// Read back rather than trust the affected-row count: an update
		// that changes nothing (the same moderator at the same instant)
		// reports 0 rows.
		t, ok, err := s.TakeOf(ctx, verdictID)
		if err != nil {
			return Take{}, fmt.Errorf("mysql: take: %w", err)
		}
		if !ok {
			continue // released in between: insert again
		}
		if t.Moderator != moderator {
			return Take{}, &TakenError{Holder: t}
		}
		return t, nil
	}
	return Take{}, fmt.Errorf("mysql: take: verdict %d changed hands %d times while taking it; try again", verdictID, maxTakeTries)
}

// TakeOf returns the take of verdictID, stale or not, and whether there is
// one.
func (s *Store) TakeOf(ctx context.Context, verdictID uint64) (Take, bool, error) {
	t := Take{VerdictID: verdictID}
	err := s.db.QueryRowContext(ctx, `SELECT moderator, taken_at, active_at FROM queue_takes WHERE verdict_id = ?`, verdictID).
		Scan(&t.Moderator, &t.TakenAt, &t.ActiveAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Take{}, false, nil
	}
	if err != nil {
		return Take{}, false, fmt.Errorf("mysql: take of %d: %w", verdictID, err)
	}
	t.TakenAt, t.ActiveAt = t.TakenAt.UTC(), t.ActiveAt.UTC()
	return t, true, nil
}

// TouchTake renews moderator's take of verdictID at now and reports
// whether moderator holds it (a stale take of theirs is renewed too: it
// is theirs until someone else takes it).
func (s *Store) TouchTake(ctx context.Context, verdictID uint64, moderator string, now time.Time) (bool, error) {
	if _, err := s.db.ExecContext(ctx, `UPDATE queue_takes SET active_at = GREATEST(active_at, ?) WHERE verdict_id = ? AND moderator = ?`,
		dbTime(now), verdictID, moderator); err != nil {
		return false, fmt.Errorf("mysql: touch take: %w", err)
	}
	t, ok, err := s.TakeOf(ctx, verdictID)
	if err != nil {
		return false, fmt.Errorf("mysql: touch take: %w", err)
	}
	return ok && t.Moderator == moderator, nil
}

// ReleaseItem ends moderator's take of verdictID and reports whether there
// was one: nobody releases another moderator's take (they override it by
// taking it with force).
func (s *Store) ReleaseItem(ctx context.Context, verdictID uint64, moderator string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM queue_takes WHERE verdict_id = ? AND moderator = ?`, verdictID, moderator)
	if err != nil {
		return false, fmt.Errorf("mysql: release: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("mysql: release: %w", err)
	}
	return n == 1, nil
}

// isDuplicateKey reports an insert that hit an existing key (1062).
func isDuplicateKey(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}
