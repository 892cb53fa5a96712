package migrations

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// koreanVerdict is a verdict whose free text needs utf8mb4: Hangul (three
// bytes in UTF-8) and an emoji (four bytes, which MySQL's old utf8/utf8mb3
// cannot hold either).
func koreanVerdict(room string) pipeline.Verdict {
	v := storetest.SampleVerdict(room)
	v.Rationale = "판매자가 안전결제 대신 개인 계좌로 선입금을 요구함 🚫"
	v.Stages[0].Error = "시간 초과"
	return v
}

func requireKoreanRoundTrip(t *testing.T, db *sql.DB, room string) {
	t.Helper()
	ctx := testCtx(t)
	s := mysql.New(db)
	v := koreanVerdict(room)
	storetest.MustSave(t, ctx, s, v)
	got, err := s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Equal(t, v.Rationale, got.Rationale)
	require.Equal(t, v.Stages[0].Error, got.Stages[0].Error)
}

func TestLatin1DatabaseGetsUtf8mb4Tables(t *testing.T) {
	t.Parallel()
	db, _ := stacktest.MySQLCharset(t, "latin1")
	ctx := testCtx(t)
	_, err := Up(ctx, db)
	require.NoError(t, err)
	require.NoError(t, CheckCharset(ctx, db))
	requireKoreanRoundTrip(t, db, "room-ko")

	// Room ids compare byte for byte: two rooms that differ only in case
	// are two verdicts, not one overwritten by the other.
	s := mysql.New(db)
	upper, lower := storetest.SampleVerdict("Room-Case"), storetest.SampleVerdict("room-case")
	lower.Label = pipeline.LabelClean
	storetest.MustSave(t, ctx, s, upper)
	storetest.MustSave(t, ctx, s, lower)
	got, err := s.Get(ctx, upper.Key)
	require.NoError(t, err)
	require.Equal(t, pipeline.LabelAbusive, got.Label)
	got, err = s.Get(ctx, lower.Key)
	require.NoError(t, err)
	require.Equal(t, pipeline.LabelClean, got.Label)
}

// TestConvertsTablesCreatedLatin1 is a database migrated before the table
// options were declared: its tables took the server's latin1 default. The
// conversion keeps the text already there and makes Korean text savable.
func TestConvertsTablesCreatedLatin1(t *testing.T) {
	t.Parallel()
	db, _ := stacktest.MySQLCharset(t, "latin1")
	ctx := testCtx(t)
	p, err := provider(db)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 2)
	require.NoError(t, err)
	for _, table := range []string{"verdicts", "verdict_stages", "batch_runs"} {
		_, err := db.ExecContext(ctx, "ALTER TABLE "+table+" CONVERT TO CHARACTER SET latin1")
		require.NoError(t, err)
	}
	// What such a database could hold: latin1 text.
	_, err = db.ExecContext(ctx, `INSERT INTO verdicts (room_id, window_start, window_end, pipeline_version, run_id,
		status, rationale, published_at, created_at, updated_at)
		VALUES ('room-old', '2026-01-01', '2026-01-01 01:00', 'v0', 'run-old', 'done', 'café crème', NOW(), NOW(), NOW())`)
	require.NoError(t, err)
	// ... and what it could not (in SQL of the schema's own age: today's
	// store writes columns a database at version 2 does not have yet).
	_, err = db.ExecContext(ctx, `INSERT INTO verdicts (room_id, window_start, window_end, pipeline_version, run_id,
		status, rationale, published_at, created_at, updated_at)
		VALUES ('room-ko', '2026-01-01', '2026-01-01 01:00', 'v0', 'run-ko', 'done', '선입금 요구', NOW(), NOW(), NOW())`)
	require.ErrorContains(t, err, "Incorrect string value")

	var ce *CharsetError
	require.ErrorAs(t, CheckCharset(ctx, db), &ce)
	for _, want := range []string{"batch_runs: table default latin1_swedish_ci, engine InnoDB",
		"verdict_stages: table default latin1_swedish_ci, engine InnoDB", "verdicts: table default latin1_swedish_ci, engine InnoDB",
		"verdicts.room_id: latin1", "verdicts.rationale: latin1"} {
		require.Contains(t, ce.Problems, want)
	}

	applied, err := Up(ctx, db)
	require.NoError(t, err)
	require.NotEmpty(t, applied)
	require.NoError(t, CheckCharset(ctx, db))
	var rationale string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT rationale FROM verdicts WHERE room_id = 'room-old'").Scan(&rationale))
	require.Equal(t, "café crème", rationale)
	requireKoreanRoundTrip(t, db, "room-ko")

	var typ, collation string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COLUMN_TYPE, COLLATION_NAME FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'verdicts' AND COLUMN_NAME = 'rationale'`).Scan(&typ, &collation))
	require.Equal(t, "text", typ, "the conversion restores the declared type")
	require.Equal(t, "utf8mb4_unicode_ci", collation)
}

func TestCheckRefusesLatin1LeftByHand(t *testing.T) {
	t.Parallel()
	db, _ := stacktest.MySQL(t)
	ctx := testCtx(t)
	_, err := Up(ctx, db)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "ALTER TABLE verdicts MODIFY rationale TEXT CHARACTER SET latin1 NULL")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "ALTER TABLE batch_runs CONVERT TO CHARACTER SET latin1")
	require.NoError(t, err)

	err = CheckCharset(ctx, db)
	var ce *CharsetError
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Problems, "verdicts.rationale: latin1")
	require.Contains(t, ce.Problems, "batch_runs: table default latin1_swedish_ci, engine InnoDB")
	require.Contains(t, ce.Problems, "batch_runs.run_id: latin1")
	for _, p := range ce.Problems {
		require.NotContains(t, p, "verdict_stages", "only what is wrong is named")
	}
	require.ErrorContains(t, err, "must be utf8mb4")
	require.ErrorContains(t, err, "CONVERT TO CHARACTER SET utf8mb4")
}

func TestCheckCharsetNamesCanceledContext(t *testing.T) {
	t.Parallel()
	db, _ := stacktest.MySQL(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := CheckCharset(ctx, db)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
}

// TestTablesListsEveryTable keeps Tables (what the startup check reads)
// in step with what the migrations create.
func TestTablesListsEveryTable(t *testing.T) {
	t.Parallel()
	db, _ := stacktest.MySQL(t)
	ctx := testCtx(t)
	_, err := Up(ctx, db)
	require.NoError(t, err)
	rows, err := db.QueryContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		if n != "goose_db_version" {
			got = append(got, n)
		}
	}
	require.NoError(t, rows.Err())
	want := slices.Clone(Tables)
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got)
}
