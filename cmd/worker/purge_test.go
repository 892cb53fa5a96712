package main

import (
	"bytes"
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
)

// migratedDB is a fresh database migrated by `worker migrate`.
func migratedDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	db, dsn := stacktest.MySQL(t)
	var out, errb bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"migrate", "--mysql-dsn", dsn}, func(string) string { return "" }, &out, &errb), errb.String())
	return db, dsn
}

// addVerdict inserts a done verdict created age ago with two stage rows.
func addVerdict(t *testing.T, db *sql.DB, room string, age time.Duration) int64 {
	t.Helper()
	created := time.Now().UTC().Add(-age)
	res, err := db.Exec(`INSERT INTO verdicts (room_id, window_start, window_end, pipeline_version, run_id, status,
		published_at, created_at, updated_at) VALUES (?, ?, ?, 'v1', 'run', 'done', ?, ?, ?)`,
		room, created.Add(-time.Hour), created, created, created, created)
	require.NoError(t, err)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO verdict_stages (verdict_id, stage) VALUES (?, 'triage'), (?, 'judge')", id, id)
	require.NoError(t, err)
	return id
}

func count(t *testing.T, db *sql.DB, q string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(q).Scan(&n))
	return n
}

func TestPurgeSubcommand(t *testing.T) {
	t.Parallel()
	db, dsn := migratedDB(t)
	addVerdict(t, db, "room-ancient", 100*24*time.Hour)
	decided := addVerdict(t, db, "room-decided", 100*24*time.Hour)
	_, err := db.Exec("INSERT INTO moderator_decisions (verdict_id, moderator, decision, label, decided_at) VALUES (?, 'mod', 'overturn', 'clean', NOW())", decided)
	require.NoError(t, err)
	addVerdict(t, db, "room-old", 20*24*time.Hour)
	addVerdict(t, db, "room-new", time.Hour)
	env := map[string]string{"CHATGUARD_MYSQL_DSN": dsn, "CHATGUARD_STAGE_RETENTION": "240h"}
	getenv := func(k string) string { return env[k] }
	purge := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := runPurge(context.Background(), args, getenv, &out, &errb, noPauses{clock.Real()})
		return code, out.String(), errb.String()
	}

	code, out, errb := purge("--verdict-retention=720h", "--dry-run")
	require.Equal(t, 0, code, errb)
	require.Contains(t, out, "purge: would delete 4 stage rows")
	require.Contains(t, out, "and 1 verdicts")
	require.Equal(t, 4, count(t, db, "SELECT COUNT(*) FROM verdicts"))

	code, out, errb = purge("--verdict-retention=720h", "--pause=0s", "--batch-size=10")
	require.Equal(t, 0, code, errb)
	require.Regexp(t, `^purge: deleted 4 stage rows \(verdicts created before \S+\) and 1 verdicts \(created before \S+\) in \d+ batches, \S+, \d+ rows/s; 0 expired review claims; 0 take history rows\n$`, out)
	require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM verdicts WHERE room_id = 'room-ancient'"))
	require.Equal(t, 2, count(t, db, "SELECT COUNT(*) FROM verdict_stages s JOIN verdicts v ON v.id = s.verdict_id WHERE v.room_id = 'room-decided'"))
	require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM verdict_stages s JOIN verdicts v ON v.id = s.verdict_id WHERE v.room_id = 'room-old'"))
	require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM verdicts WHERE room_id = 'room-old'"))
	require.Equal(t, 2, count(t, db, "SELECT COUNT(*) FROM verdict_stages s JOIN verdicts v ON v.id = s.verdict_id WHERE v.room_id = 'room-new'"))
}

func TestPurgeSubcommandUsage(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"purge", "--stage-retention=0s", "--verdict-retention=1h", "--batch-size=3", "--purge-timeout=0s", "extra"},
		func(string) string { return "" }, &out, &errb)
	require.Equal(t, 2, code)
	for _, want := range []string{"--mysql-dsn is required", "stage retention must be positive", "batch size 3", "--purge-timeout must be positive", "unexpected arguments"} {
		require.Contains(t, errb.String(), want)
	}
	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"purge", "--help"}, func(string) string { return "" }, &out, &errb))
	require.Contains(t, out.String(), "CHATGUARD_VERDICT_RETENTION")
}

// TestSchemaCheckRefusesLatin1Tables: a starting worker, `worker migrate`
// and `worker purge` all refuse a table that is not utf8mb4, naming it.
func TestSchemaCheckRefusesLatin1Tables(t *testing.T) {
	t.Parallel()
	db, dsn := migratedDB(t)
	ctx := context.Background()
	require.NoError(t, checkSchema(ctx, db, 5*time.Second))
	_, err := db.Exec("ALTER TABLE verdict_stages CONVERT TO CHARACTER SET latin1")
	require.NoError(t, err)

	err = checkSchema(ctx, db, 5*time.Second)
	require.ErrorContains(t, err, "verdict_stages: table default latin1_swedish_ci")
	require.ErrorContains(t, err, "verdict_stages.output: latin1")

	var out, errb bytes.Buffer
	require.Equal(t, 1, run(ctx, []string{"migrate", "--mysql-dsn", dsn}, func(string) string { return "" }, &out, &errb))
	require.Contains(t, errb.String(), "verdict_stages: table default latin1_swedish_ci")
	errb.Reset()
	require.Equal(t, 1, run(ctx, []string{"purge", "--mysql-dsn", dsn}, func(string) string { return "" }, &out, &errb))
	require.Contains(t, errb.String(), "must be utf8mb4")
}

func TestSchemaCheckRefusesAnUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	db, _ := stacktest.MySQL(t)
	require.ErrorContains(t, checkSchema(context.Background(), db, 5*time.Second), "run 'worker migrate'")
}

// noPauses is the wall clock whose timers fire at once: the purge's
// pauses between batches cost the test nothing.
type noPauses struct{ clock.Clock }

func (c noPauses) NewTimer(time.Duration) clock.Timer { return c.Clock.NewTimer(0) }

// TestPurgeEraseSender: --erase-sender deletes that sender's subject and
// participant rows only, keeps the verdicts, counts under --dry-run, and never prints the id.
func TestPurgeEraseSender(t *testing.T) {
	t.Parallel()
	db, dsn := migratedDB(t)
	v1 := addVerdict(t, db, "room-a", time.Hour)
	v2 := addVerdict(t, db, "room-b", time.Hour)
	for _, row := range []struct {
		id     int64
		sender string
	}{{v1, "scam-7"}, {v2, "scam-7"}, {v2, "other-1"}} {
		_, err := db.Exec("INSERT INTO verdict_subjects (verdict_id, sender_id, role, room_id, label, category, decided_at) VALUES (?, ?, 'seller', 'r', 'abusive', 'spam', NOW())", row.id, row.sender)
		require.NoError(t, err)
		_, err = db.Exec("INSERT INTO verdict_participants (verdict_id, sender_id, role, room_id, decided_at) VALUES (?, ?, 'seller', 'r', NOW())", row.id, row.sender)
		require.NoError(t, err)
	}
	purge := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := runPurge(context.Background(), append([]string{"--mysql-dsn", dsn}, args...), func(string) string { return "" }, &out, &errb, noPauses{clock.Real()})
		return code, out.String(), errb.String()
	}
	code, out, errb := purge("--erase-sender", "scam-7", "--dry-run")
	require.Equal(t, 0, code, errb)
	require.Equal(t, "purge: would erase 4 verdict-subject and participant rows of the sender\n", out)
	require.Equal(t, 3, count(t, db, "SELECT COUNT(*) FROM verdict_subjects"))

	code, out, errb = purge("--erase-sender", "scam-7")
	require.Equal(t, 0, code, errb)
	require.Equal(t, "purge: erased 4 verdict-subject and participant rows of the sender\n", out)
	require.NotContains(t, out+errb, "scam-7")
	require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM verdict_subjects WHERE sender_id = 'scam-7'"))
	require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM verdict_subjects WHERE sender_id = 'other-1'"))
	require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM verdict_participants WHERE sender_id = 'scam-7'"))
	require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM verdict_participants WHERE sender_id = 'other-1'"))
	require.Equal(t, 2, count(t, db, "SELECT COUNT(*) FROM verdicts"), "the verdicts stay")
}
