package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
)

// checkSubjects bounds a verdict's subjects as the verdict_subjects table
// stores them: at most pipeline.MaxSubjects distinct ids of 1 to 128 bytes,
// with the offender role they were found under; none on a clean verdict.
func checkSubjects(v pipeline.Verdict) error {
	if len(v.Subjects) == 0 {
		return nil
	}
	var errs []error
	if len(v.Subjects) > pipeline.MaxSubjects {
		errs = append(errs, fmt.Errorf("%d subjects, at most %d", len(v.Subjects), pipeline.MaxSubjects))
	}
	if v.OffenderRole != pipeline.RoleBuyer && v.OffenderRole != pipeline.RoleSeller {
		errs = append(errs, fmt.Errorf("subjects need an offender role of buyer or seller, not %q", v.OffenderRole))
	}
	if v.Label == pipeline.LabelClean || v.Status != pipeline.StatusDone {
		errs = append(errs, errors.New("only a done verdict that is not clean has subjects"))
	}
	seen := map[string]bool{}
	for _, s := range v.Subjects {
		if s == "" || len(s) > 128 || seen[s] {
			errs = append(errs, errors.New("a subject id is empty, longer than 128 bytes or repeated"))
			break
		}
		seen[s] = true
	}
	return errors.Join(errs...)
}

// replaceSubjects makes verdict id's subject rows exactly v's subjects; a
// new verdict (fresh) has none to delete. decided_at is the verdict's
// finish time, the time the history's 30-day window is measured on.
func replaceSubjects(ctx context.Context, tx *sql.Tx, id int64, v pipeline.Verdict, fresh bool) error {
	if !fresh {
		if _, err := tx.ExecContext(ctx, "DELETE FROM verdict_subjects WHERE verdict_id = ?", id); err != nil {
			return fmt.Errorf("mysql: save subjects: delete: %w", err)
		}
	}
	if len(v.Subjects) == 0 {
		return nil
	}
	decided := v.FinishedAt
	if decided.IsZero() {
		decided = v.Key.WindowEnd
	}
	var b strings.Builder
	b.WriteString("INSERT INTO verdict_subjects (verdict_id, sender_id, role, room_id, label, category, decided_at) VALUES ")
	args := make([]any, 0, 7*len(v.Subjects))
	for i, s := range v.Subjects {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?)")
		args = append(args, id, s, string(v.OffenderRole), v.Key.RoomID, string(v.Label), string(v.Category), dbTime(decided))
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("mysql: save subjects: %w", err)
	}
	return nil
}

// readSubjects reads verdict id's subjects and their role back, sorted.
func readSubjects(ctx context.Context, tx *sql.Tx, id uint64) ([]string, pipeline.SenderRole, error) {
	rows, err := tx.QueryContext(ctx, "SELECT sender_id, role FROM verdict_subjects WHERE verdict_id = ? ORDER BY sender_id", id)
	if err != nil {
		return nil, "", fmt.Errorf("mysql: get subjects: %w", err)
	}
	defer rows.Close()
	var (
		out  []string
		role string
	)
	for rows.Next() {
		var s string
		if err := rows.Scan(&s, &role); err != nil {
			return nil, "", fmt.Errorf("mysql: get subjects: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("mysql: get subjects: %w", err)
	}
	return out, pipeline.SenderRole(role), nil
}

// EraseSender deletes every subject and participant row naming senderID,
// on request (a data-subject erasure), in one transaction: the verdicts
// stay, no longer about or with anyone. It returns how many rows it
// deleted. The lake keeps only keyed pseudonyms,
// which erasing the key's use for that id cannot undo: see
// docs/privacy.md.
func (s *Store) EraseSender(ctx context.Context, senderID string) (int64, error) {
	if senderID == "" || len(senderID) > 128 {
		return 0, errors.New("mysql: erase sender: the sender id must be 1 to 128 bytes")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("mysql: erase sender: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	var total int64
	for _, q := range []string{"DELETE FROM verdict_subjects WHERE sender_id = ?", "DELETE FROM verdict_participants WHERE sender_id = ?"} {
		res, err := tx.ExecContext(ctx, q, senderID)
		if err != nil {
			return 0, fmt.Errorf("mysql: erase sender: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("mysql: erase sender: %w", err)
		}
		total += n
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("mysql: erase sender: %w", err)
	}
	return total, nil
}

// CountSenderSubjects counts the subject and participant rows naming
// senderID: what EraseSender would delete.
func (s *Store) CountSenderSubjects(ctx context.Context, senderID string) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM verdict_subjects WHERE sender_id = ?)
		+ (SELECT COUNT(*) FROM verdict_participants WHERE sender_id = ?)`, senderID, senderID).Scan(&n); err != nil {
		return 0, fmt.Errorf("mysql: count sender subjects: %w", err)
	}
	return n, nil
}

// historySQL counts distinct rooms per role (the CASE maps each asked
// sender to its role in the room under review), label, category and
// whether the newest moderator decision overturned the verdict, leaving
// out the room under review. It reads the subjects by
// ix_verdict_subjects_sender (room_id is in the index, so leaving the room
// out reads no row) and each subject row's newest decision by
// ix_moderator_decisions_verdict (forced: on small or fresh tables the
// optimizer otherwise walks ix_moderator_decisions_decided, every decision
// ever made, for the ORDER BY). The verdicts row of each subject row left
// is a primary-key probe (STRAIGHT_JOIN: subjects first, whatever the
// tables' sizes), for its revision_slot: only current revisions
// count (a re-reviewed window is one room with its newest verdict). The
// first %s is the CASE's WHEN pairs, the second the IN list.
const historySQL = `SELECT CASE s.sender_id %s END AS who, s.label, s.category,
    COALESCE((SELECT d.decision = 'overturn' FROM moderator_decisions d FORCE INDEX (ix_moderator_decisions_verdict)
              WHERE d.verdict_id = s.verdict_id AND d.reversed_at IS NULL AND d.decision <> 'undo' ORDER BY d.decided_at DESC, d.id DESC LIMIT 1), FALSE) AS overturned,
    COUNT(DISTINCT s.room_id) AS rooms
FROM verdict_subjects s STRAIGHT_JOIN verdicts v ON v.id = s.verdict_id
WHERE s.sender_id IN (%s) AND s.decided_at >= ? AND s.room_id <> ? AND v.revision_slot = 0
GROUP BY who, s.label, s.category, overturned
ORDER BY rooms DESC, who, s.label, s.category, overturned
LIMIT 64`

var _ pipeline.AccountHistory = (*Store)(nil)

// AccountHistory implements pipeline.AccountHistory: one query over
// verdict_subjects for at most pipeline.MaxHistoryAccounts accounts.
func (s *Store) AccountHistory(ctx context.Context, q pipeline.HistoryQuery) ([]pipeline.HistoryCount, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("mysql: account history: %w", err)
	}
	if len(q.Accounts) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 3*len(q.Accounts)+2)
	for _, a := range q.Accounts {
		args = append(args, a.SenderID, string(a.Role))
	}
	for _, a := range q.Accounts {
		args = append(args, a.SenderID)
	}
	args = append(args, dbTime(q.Since), q.ExcludeRoom)
	query := fmt.Sprintf(historySQL, strings.TrimSuffix(strings.Repeat("WHEN ? THEN ? ", len(q.Accounts)), " "),
		strings.TrimSuffix(strings.Repeat("?, ", len(q.Accounts)), ", "))
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("mysql: account history: %w", err)
	}
	defer rows.Close()
	var out []pipeline.HistoryCount
	for rows.Next() {
		var (
			h                     pipeline.HistoryCount
			role, label, category string
		)
		if err := rows.Scan(&role, &label, &category, &h.Overturned, &h.Rooms); err != nil {
			return nil, fmt.Errorf("mysql: account history: %w", err)
		}
		h.Role, h.Label, h.Category = pipeline.SenderRole(role), pipeline.Label(label), pipeline.Category(category)
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: account history: %w", err)
	}
	return out, nil
}
