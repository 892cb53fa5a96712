package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// purgeRig is a database with verdicts of known ages: ids ascend with
// created_at, as AUTO_INCREMENT gives them.
type purgeRig struct {
	db  *sql.DB
	s   *Store
	now time.Time
	// ids by group.
	groups map[string][]uint64
}

func newPurgeRig(t *testing.T) *purgeRig {
	t.Helper()
	db, s := migrated(t)
	r := &purgeRig{db: db, s: s, now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), groups: map[string][]uint64{}}
	ctx := ctxT(t)
	add := func(group string, n, stages int, age time.Duration, decided int) {
		for i := range n {
			created := r.now.Add(-age).Add(time.Duration(i) * time.Second)
			res, err := db.ExecContext(ctx, `INSERT INTO verdicts (room_id, window_start, window_end, pipeline_version, run_id,
				status, label, published_at, created_at, updated_at) VALUES (?, ?, ?, 'v1', 'run', 'done', 'abusive', ?, ?, ?)`,
				fmt.Sprintf("%s-%d", group, i), created.Add(-time.Hour), created, created, created, created)
			require.NoError(t, err)
			id, err := res.LastInsertId()
			require.NoError(t, err)
			for _, st := range []string{"triage", "extract", "vision", "judge"}[:stages] {
				_, err := db.ExecContext(ctx, "INSERT INTO verdict_stages (verdict_id, stage, pool) VALUES (?, ?, 'primary')", id, st)
				require.NoError(t, err)
			}
			g := group
			if i < decided {
				g += "-decided"
				_, err := db.ExecContext(ctx, `INSERT INTO moderator_decisions (verdict_id, moderator, decision, label, category, decided_at)
					VALUES (?, 'mod-1', 'confirm', 'abusive', 'spam', ?)`, id, r.now)
				require.NoError(t, err)
			}
			r.groups[g] = append(r.groups[g], uint64(id))
		}
	}
	add("ancient", 25, 4, 40*24*time.Hour, 3) // past both retentions
	add("old", 30, 3, 20*24*time.Hour, 2)     // past the stage retention only
	add("recent", 15, 2, 24*time.Hour, 0)     // within both
	return r
}

func (r *purgeRig) config() PurgeConfig {
	return PurgeConfig{
		StageRetention: 10 * 24 * time.Hour, VerdictRetention: 30 * 24 * time.Hour,
		BatchSize: 10, Pause: 250 * time.Millisecond,
	}
}

// counts returns, per group, how many verdicts and stage rows are left.
func (r *purgeRig) counts(t *testing.T) map[string][2]int {
	t.Helper()
	out := map[string][2]int{}
	for g, ids := range r.groups {
		var v, s int
		for _, id := range ids {
			var n int
			require.NoError(t, r.db.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM verdicts WHERE id = ?", id).Scan(&n))
			v += n
			require.NoError(t, r.db.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM verdict_stages WHERE verdict_id = ?", id).Scan(&n))
			s += n
		}
		out[g] = [2]int{v, s}
	}
	return out
}

// recorder records the batches and the pauses of a purge. It is the
// purge's clock too: a Fake reading the rig's now whose timers, the pauses
// and the waits between tries, end at once. Purge calls it from one
// goroutine.
type recorder struct {
	*clock.Fake
	batches []PurgeBatch
	pauses  []time.Duration
	// failAt, when positive, makes that pause the one during which the
	// purge's context is cancelled (with cancel).
	failAt int
	cancel context.CancelFunc
}

func (r *purgeRig) recorder() *recorder { return &recorder{Fake: clock.NewFake(r.now)} }

func (rec *recorder) NewTimer(d time.Duration) clock.Timer {
	rec.pauses = append(rec.pauses, d)
	if rec.failAt > 0 && len(rec.pauses) == rec.failAt {
		rec.cancel()
		return rec.Fake.NewTimer(d) // never fires: the fake does not move
	}
	return rec.Fake.NewTimer(0)
}

func (rec *recorder) attach(c PurgeConfig) PurgeConfig {
	c.OnBatch = func(b PurgeBatch) { rec.batches = append(rec.batches, b) }
	return c
}

func TestPurgeKeepsRecentAndDecidedVerdicts(t *testing.T) {
	t.Parallel()
	r := newPurgeRig(t)
	before := r.counts(t)
	require.Equal(t, map[string][2]int{
		"ancient": {22, 88}, "ancient-decided": {3, 12}, "old": {28, 84}, "old-decided": {2, 6}, "recent": {15, 30},
	}, before)

	// A dry run counts and deletes nothing.
	dry := r.recorder()
	cfg := dry.attach(r.config())
	cfg.DryRun = true
	rep, err := r.s.Purge(ctxT(t), cfg, dry)
	require.NoError(t, err)
	require.Equal(t, int64(88+84), rep.StageRows)
	require.Equal(t, int64(22), rep.Verdicts)
	require.Contains(t, rep.String(), "would delete 172 stage rows")
	require.Equal(t, before, r.counts(t))

	rec := r.recorder()
	rep, err = r.s.Purge(ctxT(t), rec.attach(r.config()), rec)
	require.NoError(t, err)
	require.Equal(t, map[string][2]int{
		"ancient": {0, 0}, "ancient-decided": {3, 12}, "old": {28, 0}, "old-decided": {2, 6}, "recent": {15, 30},
	}, r.counts(t))
	require.Equal(t, int64(88+84), rep.StageRows)
	require.Equal(t, int64(22), rep.Verdicts)
	require.Equal(t, r.now.Add(-10*24*time.Hour), rep.StageCutoff)
	require.Equal(t, r.now.Add(-30*24*time.Hour), rep.VerdictCutoff)
	require.Contains(t, rep.String(), "purge: deleted 172 stage rows")
	require.Contains(t, rep.String(), "and 22 verdicts")
	require.Equal(t, rep.Batches, len(rec.batches))
	require.Equal(t, len(dry.batches), len(rec.batches), "a dry run walks the same ranges")

	// Bounded batches over contiguous, non-overlapping key ranges that
	// stop at the last due verdict, never reading the recent ones.
	var sum int64
	prev := map[string]uint64{}
	deleting := 0
	for _, b := range rec.batches {
		require.LessOrEqual(t, b.Rows, int64(10), "%+v", b)
		require.Less(t, b.FromID, b.ToID)
		if p, ok := prev[b.Table]; ok {
			require.Equal(t, p, b.FromID, "ranges follow each other")
		}
		prev[b.Table] = b.ToID
		require.LessOrEqual(t, b.ToID, r.groups["recent"][0], "the walk stops before the recent verdicts")
		sum += b.Rows
		if b.Rows > 0 {
			deleting++
		}
	}
	require.Equal(t, rep.StageRows+rep.Verdicts, sum)
	require.Greater(t, len(rec.batches), 172/10, "stage rows went in many batches")
	// A pause after each batch that deleted rows, except a table's last.
	require.GreaterOrEqual(t, len(rec.pauses), deleting-2)
	require.LessOrEqual(t, len(rec.pauses), deleting)
	for _, p := range rec.pauses {
		require.Equal(t, 250*time.Millisecond, p)
	}

	// Nothing is left to do: a second run deletes nothing.
	rep, err = r.s.Purge(ctxT(t), r.config(), r.recorder())
	require.NoError(t, err)
	require.Zero(t, rep.StageRows+rep.Verdicts)
}

func TestPurgeStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	r := newPurgeRig(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	rec := r.recorder()
	rec.failAt, rec.cancel = 3, cancel
	rep, err := r.s.Purge(ctx, rec.attach(r.config()), rec)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "mysql: purge stage rows")
	require.Len(t, rec.pauses, 3)
	var done int64
	for _, b := range rec.batches {
		done += b.Rows
	}
	require.Equal(t, done, rep.StageRows, "the report counts what went before the stop")
	require.Positive(t, done)
	require.Less(t, done, int64(88+84))
	// The next run finishes the work.
	rep, err = r.s.Purge(ctxT(t), r.config(), r.recorder())
	require.NoError(t, err)
	require.Equal(t, int64(88+84)-done, rep.StageRows)
	require.Equal(t, int64(22), rep.Verdicts)
}

func TestPurgeConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, DefaultPurgeConfig().Validate())
	err := PurgeConfig{StageRetention: 0, VerdictRetention: -time.Hour, BatchSize: 5, Pause: -time.Second}.Validate()
	for _, want := range []string{"stage retention must be positive", "verdict retention must be positive", "batch size 5", "pause must not be negative"} {
		require.ErrorContains(t, err, want)
	}
	err = PurgeConfig{StageRetention: 48 * time.Hour, VerdictRetention: 24 * time.Hour, BatchSize: 100}.Validate()
	require.ErrorContains(t, err, "at least the stage retention")
	_, err = New(nil).Purge(context.Background(), PurgeConfig{}, nil)
	require.ErrorContains(t, err, "mysql: purge:")
}

// TestDecidedVerdictCannotBeDeleted is the foreign key that makes a purge
// racing a new decision safe: the delete is refused (and the batch is
// retried, when the NOT-decided check runs again).
func TestDecidedVerdictCannotBeDeleted(t *testing.T) {
	t.Parallel()
	r := newPurgeRig(t)
	_, err := r.db.ExecContext(ctxT(t), "DELETE FROM verdicts WHERE id = ?", r.groups["ancient-decided"][0])
	require.Error(t, err)
	require.True(t, purgeRetryable(err), "%v", err)
	require.False(t, purgeRetryable(errors.New("other")))
}

func TestPurgeDeletesReviewClaimsLongExpired(t *testing.T) {
	t.Parallel()
	r := newPurgeRig(t)
	ctx := ctxT(t)
	claim := func(room string, expiredFor time.Duration) {
		// Taken a TTL before it expires, on a clock set back accordingly.
		at := r.now.Add(-expiredFor - time.Minute)
		c := NewClaims(r.db, clock.NewFake(at))
		got, err := c.Claim(ctx, pipeline.ReviewKey{RoomID: room, WindowStart: r.now.Add(-2 * time.Hour), WindowEnd: r.now.Add(-time.Hour), PipelineVersion: "v1"}, "pod-dead", time.Minute)
		require.NoError(t, err)
		require.True(t, got.Held)
	}
	for i := range 25 {
		claim(fmt.Sprintf("left-%d", i), 2*time.Hour) // a dead worker's, long expired
	}
	claim("just-expired", 30*time.Minute) // may still be taken over: kept
	claim("live", -time.Minute)           // held now
	rows := func() int {
		var n int
		require.NoError(t, r.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM review_claims").Scan(&n))
		return n
	}
	require.Equal(t, 27, rows())

	cfg := r.config()
	cfg.DryRun = true
	rep, err := r.s.Purge(ctx, cfg, r.recorder())
	require.NoError(t, err)
	require.Equal(t, int64(25), rep.Claims)
	require.Equal(t, 27, rows())

	rec := r.recorder()
	rep, err = r.s.Purge(ctx, rec.attach(r.config()), rec)
	require.NoError(t, err)
	require.Equal(t, int64(25), rep.Claims)
	require.Contains(t, rep.String(), "; 25 expired review claims")
	require.Equal(t, 2, rows(), "the recent and the live claim stay")
}
