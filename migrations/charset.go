package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Tables are the tables the migrations create (goose's own version table,
// which holds no text, aside).
var Tables = []string{"verdicts", "verdict_stages", "batch_runs", "moderator_decisions", "review_claims", "stop_signals", "verdict_subjects", "queue_takes", "verdict_campaigns", "verdict_participants", "moderation_actions", "outbox", "pseudonym_aliases", "take_history", "campaign_members", "protective_actions", "notice_suppressions", "action_clearances", "action_policy_runs"}

// CharsetError says which tables or columns of the schema are not utf8mb4
// InnoDB. A verdict with Korean text cannot be saved into a latin1 column
// ("Incorrect string value"), so a worker must not start on one.
type CharsetError struct {
	// Problems are "table: …" or "table.column: …" lines.
	Problems []string
}

func (e *CharsetError) Error() string {
	return fmt.Sprintf("the schema's tables must be utf8mb4 InnoDB, but %s; convert them with "+
		"ALTER TABLE <table> ENGINE=InnoDB, CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin "+
		"(migrations/sql/00003_utf8mb4.sql shows the statements)", strings.Join(e.Problems, "; "))
}

// CheckCharset returns a *CharsetError naming every table of Tables whose
// default character set is not utf8mb4 or whose engine is not InnoDB, and
// every character column of them that is not utf8mb4 (a table's default
// only applies to columns added later). It reads information_schema for
// the connection's database; a missing table is left to the version check.
// Errors from the database are returned wrapped; it honours ctx.
func CheckCharset(ctx context.Context, db *sql.DB) error {
	in := "?" + strings.Repeat(", ?", len(Tables)-1)
	args := make([]any, len(Tables))
	for i, t := range Tables {
		args[i] = t
	}
	var problems []string
	rows, err := db.QueryContext(ctx, `SELECT TABLE_NAME, COALESCE(TABLE_COLLATION, ''), COALESCE(ENGINE, '')
		FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (`+in+`)
		  AND (TABLE_COLLATION IS NULL OR TABLE_COLLATION NOT LIKE 'utf8mb4\_%' OR ENGINE IS NULL OR ENGINE <> 'InnoDB')
		ORDER BY TABLE_NAME`, args...)
	if err != nil {
		return fmt.Errorf("migrations: check charset: %w", err)
	}
	for rows.Next() {
		var table, collation, engine string
		if err := rows.Scan(&table, &collation, &engine); err != nil {
			rows.Close()
			return fmt.Errorf("migrations: check charset: %w", err)
		}
		problems = append(problems, fmt.Sprintf("%s: table default %s, engine %s", table, orNone(collation), orNone(engine)))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrations: check charset: %w", err)
	}
	rows, err = db.QueryContext(ctx, `SELECT TABLE_NAME, COLUMN_NAME, CHARACTER_SET_NAME
		FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (`+in+`)
		  AND CHARACTER_SET_NAME IS NOT NULL AND CHARACTER_SET_NAME <> 'utf8mb4'
		ORDER BY TABLE_NAME, ORDINAL_POSITION`, args...)
	if err != nil {
		return fmt.Errorf("migrations: check charset: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var table, column, charset string
		if err := rows.Scan(&table, &column, &charset); err != nil {
			return fmt.Errorf("migrations: check charset: %w", err)
		}
		problems = append(problems, fmt.Sprintf("%s.%s: %s", table, column, charset))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrations: check charset: %w", err)
	}
	if len(problems) > 0 {
		return &CharsetError{Problems: problems}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
