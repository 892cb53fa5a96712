package migrations

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

// TestRevisionsMigrationKeepsEveryRowReachable converts a database of the
// schema before revisions (migrations up to 00019) holding verdicts with
// stage rows, decisions, takes, subjects and participants: after 00022
// every verdict is revision 1 and current under its own row id, every
// decision, take and participant still names it, the queue and the key
// lookups find the same rows, and a re-review then adds revision 2 beside
// the decided revision 1.
func TestRevisionsMigrationKeepsEveryRowReachable(t *testing.T) {
	t.Parallel()
	db, _ := stacktest.MySQL(t)
	ctx := testCtx(t)
	p, err := provider(db)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 19)
	require.NoError(t, err)

	// Today's rows, written as today's code writes them: the upsert, the
	// child rows, a decision and a take.
	const n = 4
	ids := make([]int64, n)
	keys := make([]pipeline.ReviewKey, n)
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for i := range n {
		v := storetest.SampleVerdict("room-old-" + string(rune('a'+i)))
		keys[i] = v.Key
		res, err := db.ExecContext(ctx, `INSERT INTO verdicts (room_id, window_start, window_end, pipeline_version, run_id, status, label,
			category, severity, confidence, action, published_at, finished_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, 'run-old', 'done', 'abusive', 'external_payment', 4, 0.9, 'restrict', ?, ?, ?, ?)`,
			v.Key.RoomID, v.Key.WindowStart, v.Key.WindowEnd, v.Key.PipelineVersion, at, at, at, at)
		require.NoError(t, err)
		ids[i], err = res.LastInsertId()
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `INSERT INTO verdict_stages (verdict_id, stage, pool, model) VALUES (?, 'judge', 'primary', 'm')`, ids[i])
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `INSERT INTO verdict_subjects (verdict_id, sender_id, role, room_id, label, category, decided_at)
			VALUES (?, 'seller-1', 'seller', ?, 'abusive', 'external_payment', ?)`, ids[i], v.Key.RoomID, at)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `INSERT INTO verdict_participants (verdict_id, sender_id, role, room_id, decided_at)
			VALUES (?, 'seller-1', 'seller', ?, ?), (?, 'buyer-1', 'buyer', ?, ?)`, ids[i], v.Key.RoomID, at, ids[i], v.Key.RoomID, at)
		require.NoError(t, err)
		if i%2 == 0 {
			_, err = db.ExecContext(ctx, `INSERT INTO moderator_decisions (verdict_id, moderator, decision, label, category, decided_at)
				VALUES (?, 'mod-1', 'confirm', 'abusive', 'external_payment', ?)`, ids[i], at.Add(time.Hour))
		} else {
			_, err = db.ExecContext(ctx, `INSERT INTO queue_takes (verdict_id, moderator, taken_at, active_at) VALUES (?, 'mod-2', ?, ?)`, ids[i], at, at)
		}
		require.NoError(t, err)
	}

	_, err = Up(ctx, db)
	require.NoError(t, err)

	s := mysql.New(db)
	for i, k := range keys {
		v, err := s.Get(ctx, k)
		require.NoError(t, err, "key %d is found", i)
		require.Equal(t, 1, v.Revision)
		require.True(t, v.SupersededAt.IsZero(), "every old row is current")
		require.Len(t, v.Stages, 1)
		require.Equal(t, []string{"seller-1"}, v.Subjects)
		id, err := s.VerdictID(ctx, k)
		require.NoError(t, err)
		require.Equal(t, uint64(ids[i]), id, "a row keeps its id")
		byID, err := s.VerdictByID(ctx, id)
		require.NoError(t, err)
		require.Equal(t, k.RoomID, byID.Key.RoomID)
	}
	var decided, taken, participants int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM moderator_decisions d JOIN verdicts v ON v.id = d.verdict_id WHERE v.revision_slot = 0`).Scan(&decided))
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM queue_takes t JOIN verdicts v ON v.id = t.verdict_id WHERE v.revision_slot = 0`).Scan(&taken))
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM verdict_participants p JOIN verdicts v ON v.id = p.verdict_id WHERE v.revision_slot = 0`).Scan(&participants))
	require.Equal(t, []int{n / 2, n / 2, 2 * n}, []int{decided, taken, participants})

	page, err := s.ListQueue(ctx, moderation.QueueFilter{IncludeDecided: true}, "")
	require.NoError(t, err)
	require.Len(t, page.Items, n, "the queue lists every old verdict")
	acct, err := s.AccountVerdicts(ctx, "buyer-1", "", 10)
	require.NoError(t, err)
	require.Len(t, acct.Items, n, "an account lists every old verdict")

	// The decided verdict re-reviewed: revision 2 beside it.
	r := storetest.SampleVerdict("room-old-a")
	r.RunID, r.Label = "ondemand:mod-1:x", pipeline.LabelSuspicious
	rev, committed, err := s.Revise(ctx, r)
	require.NoError(t, err)
	require.True(t, committed)
	require.Equal(t, 2, rev)
	ds, err := s.Decisions(ctx, uint64(ids[0]), 10)
	require.NoError(t, err)
	require.Len(t, ds, 1, "the decision stays on revision 1")
	old, err := s.VerdictByID(ctx, uint64(ids[0]))
	require.NoError(t, err)
	require.Equal(t, "run-old", old.RunID)
	require.False(t, old.SupersededAt.IsZero())
	page, err = s.ListQueue(ctx, moderation.QueueFilter{IncludeDecided: true}, "")
	require.NoError(t, err)
	require.Len(t, page.Items, n, "one item per window: the current revision")

	// Down is refused while a superseded revision exists, changing nothing.
	_, err = p.DownTo(ctx, 19)
	require.Error(t, err)
	// The migrations after 00022 went down before it refused; up again,
	// the verdicts are as they were.
	_, err = Up(ctx, db)
	require.NoError(t, err)
	v, err := s.Get(ctx, keys[0])
	require.NoError(t, err)
	require.Equal(t, 2, v.Revision)
}
