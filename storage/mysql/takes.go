package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// Queue assignment (migration 00014): a moderator takes a verdict of the
// queue so that nobody else decides it meanwhile. Every change is one
// conditional statement, so console replicas need no lock of their own:
// the row is the one holder.

// maxTakeTries bounds TakeItem's retries when the row changes between its
// statements (released or taken by someone else in between).
const maxTakeTries = 3

// TakeItem makes moderator the holder of verdictID at now and returns the
// take. It succeeds when nobody holds the item, when moderator already
// does (the take's activity is renewed), when the holder's last activity
// is before staleBefore, or when force is set (an override the caller has
// audited). Otherwise it returns a *moderation.TakenError naming the holder. A
// verdict id no row has is a *pipeline.PermanentError wrapping
// pipeline.ErrVerdictNotFound.
func (s *Store) TakeItem(ctx context.Context, verdictID uint64, moderator string, now, staleBefore time.Time, force bool) (moderation.Take, error) {
	if verdictID == 0 || moderator == "" || len(moderator) > 128 || now.IsZero() {
		return moderation.Take{}, pipeline.Permanent(errors.New("mysql: take: verdict id, a moderator of 1..128 bytes and a time are required"))
	}
	at := dbTime(now)
	for range maxTakeTries {
		_, err := s.db.ExecContext(ctx, `INSERT INTO queue_takes (verdict_id, moderator, taken_at, active_at) VALUES (?, ?, ?, ?)`,
			verdictID, moderator, at, at)
		if err == nil {
			return moderation.Take{VerdictID: verdictID, Moderator: moderator, TakenAt: at, ActiveAt: at}, nil
		}
		if isForeignKey(err) {
			return moderation.Take{}, pipeline.Permanent(fmt.Errorf("mysql: take: verdict %d: %w", verdictID, pipeline.ErrVerdictNotFound))
		}
		if !isDuplicateKey(err) {
			return moderation.Take{}, fmt.Errorf("mysql: take: %w", err)
		}
		// taken_at is assigned before moderator: MySQL and MariaDB
		// assign left to right, so the IF still sees the old holder.
		_, err = s.db.ExecContext(ctx, `UPDATE queue_takes SET taken_at = IF(moderator = ?, taken_at, ?), moderator = ?, active_at = ?
			WHERE verdict_id = ? AND (moderator = ? OR active_at < ? OR ?)`,
			moderator, at, moderator, at, verdictID, moderator, dbTime(staleBefore), force)
		if err != nil {
			return moderation.Take{}, fmt.Errorf("mysql: take: %w", err)
		}
		// Read back rather than trust the affected-row count: an update
		// that changes nothing (the same moderator at the same instant)
		// reports 0 rows.
		t, ok, err := s.TakeOf(ctx, verdictID)
		if err != nil {
			return moderation.Take{}, fmt.Errorf("mysql: take: %w", err)
		}
		if !ok {
			continue // released in between: insert again
		}
		if t.Moderator != moderator {
			return moderation.Take{}, &moderation.TakenError{Holder: t}
		}
		return t, nil
	}
	return moderation.Take{}, fmt.Errorf("mysql: take: verdict %d changed hands %d times while taking it; try again", verdictID, maxTakeTries)
}

// TakeOf returns the take of verdictID, stale or not, and whether there is
// one.
func (s *Store) TakeOf(ctx context.Context, verdictID uint64) (moderation.Take, bool, error) {
	t := moderation.Take{VerdictID: verdictID}
	err := s.db.QueryRowContext(ctx, `SELECT moderator, taken_at, active_at FROM queue_takes WHERE verdict_id = ?`, verdictID).
		Scan(&t.Moderator, &t.TakenAt, &t.ActiveAt)
	if errors.Is(err, sql.ErrNoRows) {
		return moderation.Take{}, false, nil
	}
	if err != nil {
		return moderation.Take{}, false, fmt.Errorf("mysql: take of %d: %w", verdictID, err)
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

// takeCampaignSQL takes every open room of a campaign (its marks fill the
// %s) in one statement: a
// room nobody holds is inserted; on a room already held, each assignment
// is conditional on the row as it stands under the statement's row lock,
// so a live take of another moderator is left as it is, a stale one or
// the taker's own becomes the taker's. taken_at is assigned first and
// moderator before active_at, and active_at's condition holds whether
// the server reads moderator before or after its assignment. The columns
// are named with their table: moderator_decisions has a moderator too.
const takeCampaignSQL = `INSERT INTO queue_takes (verdict_id, moderator, taken_at, active_at)
SELECT DISTINCT c.verdict_id, ?, ?, ? FROM verdict_campaigns c JOIN verdicts v ON v.id = c.verdict_id
LEFT JOIN moderator_decisions d ON d.verdict_id = c.verdict_id AND d.reversed_at IS NULL AND d.decision <> 'undo'
WHERE c.mark IN (%s) AND c.class IN ('campaign', 'linked') AND v.revision_slot = 0 AND d.verdict_id IS NULL
ON DUPLICATE KEY UPDATE
    taken_at = IF(queue_takes.moderator <> ? AND queue_takes.active_at < ?, ?, queue_takes.taken_at),
    moderator = IF(queue_takes.active_at < ?, ?, queue_takes.moderator),
    active_at = IF(queue_takes.moderator = ? OR queue_takes.active_at < ?, ?, queue_takes.active_at)`

// openCampaignHoldersSQL counts the live holders of a campaign's open
// rooms (its marks fill the %s).
const openCampaignHoldersSQL = `SELECT t.moderator, COUNT(DISTINCT t.verdict_id) FROM verdict_campaigns c
JOIN queue_takes t ON t.verdict_id = c.verdict_id JOIN verdicts v ON v.id = c.verdict_id
LEFT JOIN moderator_decisions d ON d.verdict_id = c.verdict_id AND d.reversed_at IS NULL AND d.decision <> 'undo'
WHERE c.mark IN (%s) AND c.class IN ('campaign', 'linked') AND v.revision_slot = 0 AND d.verdict_id IS NULL AND (t.moderator = ? OR t.active_at >= ?) GROUP BY t.moderator`

// CountOpenCampaignRooms returns the number of rooms of mark's campaign
// (every mark the campaign join put with it) that no moderator has
// decided: what taking the campaign would try to take. It honours ctx.
func (s *Store) CountOpenCampaignRooms(ctx context.Context, mark string) (int, error) {
	marks, err := s.campaignMarks(ctx, mark)
	if err != nil {
		return 0, fmt.Errorf("mysql: count open campaign rooms: %w", err)
	}
	var n int
	err = s.db.QueryRowContext(ctx, `SELECT COUNT(DISTINCT c.verdict_id) FROM verdict_campaigns c JOIN verdicts v ON v.id = c.verdict_id
		LEFT JOIN moderator_decisions d ON d.verdict_id = c.verdict_id AND d.reversed_at IS NULL AND d.decision <> 'undo'
		WHERE c.mark IN (`+placeholders(len(marks))+`) AND c.class IN ('campaign', 'linked') AND v.revision_slot = 0 AND d.verdict_id IS NULL`, markArgs(marks)...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("mysql: count open campaign rooms: %w", err)
	}
	return n, nil
}

// TakeCampaign makes moderator the holder, at now, of every room of
// mark's campaign (every mark the campaign join put with it) that no moderator has decided, except those another moderator
// holds with activity at or after staleBefore: those are left to them and
// counted in the result. It is one transaction of one conditional
// statement and one read, so console replicas taking overlapping
// campaigns or single items at once agree on one holder per room; a
// deadlock between two such statements is retried (at most maxTakeTries
// times). A mark no room carries takes nothing. It honours ctx.
func (s *Store) TakeCampaign(ctx context.Context, mark, moderator string, now, staleBefore time.Time) (moderation.CampaignTakes, error) {
	if mark == "" || len(mark) > 40 || moderator == "" || len(moderator) > 128 || now.IsZero() {
		return moderation.CampaignTakes{}, pipeline.Permanent(errors.New("mysql: take campaign: a mark of 1..40 bytes, a moderator of 1..128 bytes and a time are required"))
	}
	marks, err := s.campaignMarks(ctx, mark)
	if err != nil {
		return moderation.CampaignTakes{}, fmt.Errorf("mysql: take campaign: %w", err)
	}
	for range maxTakeTries {
		var res moderation.CampaignTakes
		res, err = s.takeCampaignOnce(ctx, marks, moderator, dbTime(now), dbTime(staleBefore))
		if !isDeadlock(err) {
			return res, err
		}
	}
	return moderation.CampaignTakes{}, err
}

func (s *Store) takeCampaignOnce(ctx context.Context, marks []string, moderator string, at, stale time.Time) (moderation.CampaignTakes, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return moderation.CampaignTakes{}, fmt.Errorf("mysql: take campaign: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	in := placeholders(len(marks))
	args := slices.Concat([]any{moderator, at, at}, markArgs(marks), []any{moderator, stale, at, stale, moderator, moderator, stale, at})
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(takeCampaignSQL, in), args...); err != nil {
		return moderation.CampaignTakes{}, fmt.Errorf("mysql: take campaign: %w", err)
	}
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(openCampaignHoldersSQL, in), slices.Concat(markArgs(marks), []any{moderator, stale})...)
	if err != nil {
		return moderation.CampaignTakes{}, fmt.Errorf("mysql: take campaign: %w", err)
	}
	defer rows.Close()
	res := moderation.CampaignTakes{Others: map[string]int{}}
	for rows.Next() {
		var (
			who string
			n   int
		)
		if err := rows.Scan(&who, &n); err != nil {
			return moderation.CampaignTakes{}, fmt.Errorf("mysql: take campaign: %w", err)
		}
		if who == moderator {
			res.Mine = n
		} else {
			res.Others[who] = n
		}
	}
	if err := rows.Err(); err != nil {
		return moderation.CampaignTakes{}, fmt.Errorf("mysql: take campaign: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return moderation.CampaignTakes{}, fmt.Errorf("mysql: take campaign: %w", err)
	}
	return res, nil
}

// ReleaseCampaign ends moderator's takes of the rooms of mark's campaign
// and returns how many it ended; nobody else's take is touched.
func (s *Store) ReleaseCampaign(ctx context.Context, mark, moderator string) (int, error) {
	marks, err := s.campaignMarks(ctx, mark)
	if err != nil {
		return 0, fmt.Errorf("mysql: release campaign: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `DELETE t FROM queue_takes t JOIN verdict_campaigns c ON c.verdict_id = t.verdict_id
		WHERE c.mark IN (`+placeholders(len(marks))+`) AND t.moderator = ?`, append(markArgs(marks), moderator)...)
	if err != nil {
		return 0, fmt.Errorf("mysql: release campaign: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("mysql: release campaign: %w", err)
	}
	return int(n), nil
}

// isDeadlock reports a transaction InnoDB chose as a deadlock's victim
// (1213): rolled back, it may be run again.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}
