package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

// checkAliases bounds a verdict's pseudonym aliases as pseudonym_aliases
// stores them: at most pipeline.MaxAliases subject or campaign pairs, each
// a legacy keyed pseudonym and a current one.
func checkAliases(v pipeline.Verdict) error {
	if len(v.Aliases) > pipeline.MaxAliases {
		return fmt.Errorf("%d pseudonym aliases, at most %d", len(v.Aliases), pipeline.MaxAliases)
	}
	for _, a := range v.Aliases {
		if (a.Purpose != pipeline.AliasSubject && a.Purpose != pipeline.AliasCampaign) ||
			!pseudonym.IsLegacy(a.Legacy) || !pseudonym.IsKeyed(a.Current) || pseudonym.IsLegacy(a.Current) {
			return errors.New("a pseudonym alias is not a subject or campaign pair of a legacy and a current pseudonym")
		}
	}
	return nil
}

// saveAliases records v's legacy-to-current pairs (first seen at, kept
// when already there) and moves the verdict_campaigns rows of each legacy
// campaign mark to its current mark, so that the campaign queries, which
// look a mark up by its value, find the rooms counted before the change
// under the mark rooms get now. The statements run in the legacy values'
// order, so that saves re-keying the same marks lock them in one order.
func saveAliases(ctx context.Context, tx *sql.Tx, v pipeline.Verdict, at time.Time) error {
	if len(v.Aliases) == 0 {
		return nil
	}
	as := slices.Clone(v.Aliases)
	slices.SortFunc(as, func(a, b pipeline.PseudonymAlias) int {
		return cmp.Or(cmp.Compare(a.Purpose, b.Purpose), cmp.Compare(a.Legacy, b.Legacy))
	})
	as = slices.CompactFunc(as, func(a, b pipeline.PseudonymAlias) bool { return a.Purpose == b.Purpose && a.Legacy == b.Legacy })
	if err := insertAliases(ctx, tx, as, at); err != nil {
		return err
	}
	for _, a := range as {
		if a.Purpose != pipeline.AliasCampaign {
			continue
		}
		// IGNORE: a verdict carrying both forms of one mark keeps its row
		// of the current form rather than failing the save.
		if _, err := tx.ExecContext(ctx, "UPDATE IGNORE verdict_campaigns SET mark = ? WHERE mark = ?", a.Current, a.Legacy); err != nil {
			return fmt.Errorf("mysql: save aliases: re-key campaign mark: %w", err)
		}
	}
	return nil
}

// insertAliases writes pairs, keeping any already recorded.
func insertAliases(ctx context.Context, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, as []pipeline.PseudonymAlias, at time.Time) error {
	var b strings.Builder
	b.WriteString("INSERT IGNORE INTO pseudonym_aliases (purpose, legacy_value, current_value, first_seen) VALUES ")
	args := make([]any, 0, 4*len(as))
	for i, a := range as {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?)")
		args = append(args, a.Purpose, a.Legacy, a.Current, dbTime(at))
	}
	if _, err := q.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("mysql: save aliases: %w", err)
	}
	return nil
}

// RekeyModerator moves what MySQL holds under a moderator's legacy id (the
// unkeyed "mod-" hash of their e-mail) to their current keyed id, and
// records the pair in pseudonym_aliases, in one transaction: their
// decisions and their takes. The console calls it when the moderator signs
// in while --legacy-pseudonyms is on, the only moment both ids are known.
// It returns how many decision and take rows it moved (none on every call
// after the first) and honours ctx; it is safe to run concurrently and
// again.
func (s *Store) RekeyModerator(ctx context.Context, legacy, current string, at time.Time) (int64, error) {
	if !strings.HasPrefix(legacy, pseudonym.LegacyModeratorPrefix) || strings.HasPrefix(legacy, "mod2-") ||
		!strings.HasPrefix(current, "mod2-") || len(legacy) > 64 || len(current) > 64 {
		return 0, pipeline.Permanent(errors.New("mysql: rekey moderator: a legacy 'mod-' id and a current 'mod2-' id are required"))
	}
	tx, err := s.db.BeginTx(ctx, saveTx)
	if err != nil {
		return 0, fmt.Errorf("mysql: rekey moderator: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if err := insertAliases(ctx, tx, []pipeline.PseudonymAlias{{Purpose: pipeline.AliasModerator, Legacy: legacy, Current: current}}, at); err != nil {
		return 0, fmt.Errorf("mysql: rekey moderator: %w", err)
	}
	var moved int64
	// IGNORE on the takes: a verdict holds one take, so a take under the
	// legacy id of an item the current id holds too is left to go stale.
	for _, q := range []string{"UPDATE moderator_decisions SET moderator = ? WHERE moderator = ?",
		"UPDATE IGNORE queue_takes SET moderator = ? WHERE moderator = ?"} {
		res, err := tx.ExecContext(ctx, q, current, legacy)
		if err != nil {
			return 0, fmt.Errorf("mysql: rekey moderator: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("mysql: rekey moderator: %w", err)
		}
		moved += n
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("mysql: rekey moderator: %w", err)
	}
	return moved, nil
}

// PseudonymAliases returns the recorded pairs of one purpose whose legacy
// or current value is one of values: what an operator or a test reads to
// see which legacy values a current one stands for. It honours ctx.
func (s *Store) PseudonymAliases(ctx context.Context, purpose string, values ...string) ([]pipeline.PseudonymAlias, error) {
	if len(values) == 0 {
		return nil, nil
	}
	in := strings.TrimSuffix(strings.Repeat("?, ", len(values)), ", ")
	args := []any{purpose}
	for range 2 {
		for _, v := range values {
			args = append(args, v)
		}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT purpose, legacy_value, current_value FROM pseudonym_aliases
		WHERE purpose = ? AND (legacy_value IN (`+in+`) OR current_value IN (`+in+`)) ORDER BY legacy_value`, args...)
	if err != nil {
		return nil, fmt.Errorf("mysql: pseudonym aliases: %w", err)
	}
	defer rows.Close()
	var out []pipeline.PseudonymAlias
	for rows.Next() {
		var a pipeline.PseudonymAlias
		if err := rows.Scan(&a.Purpose, &a.Legacy, &a.Current); err != nil {
			return nil, fmt.Errorf("mysql: pseudonym aliases: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: pseudonym aliases: %w", err)
	}
	return out, nil
}

// decidedAt is the time a verdict's rows are dated with: its finish time,
// else its window's end.
func decidedAt(v pipeline.Verdict) time.Time {
	if v.FinishedAt.IsZero() {
		return v.Key.WindowEnd
	}
	return v.FinishedAt
}
