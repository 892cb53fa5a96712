package mysql

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// takeVerdict saves one flagged verdict and returns its row id.
func takeVerdict(t *testing.T, s *Store, room string, ws time.Time) uint64 {
	t.Helper()
	ctx := ctxT(t)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"},
		RunID: "run", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam, Severity: 3,
		Action: pipeline.ActionWarn, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: ws}
	storetest.MustSave(t, ctx, s, v)
	id, err := s.VerdictID(ctx, v.Key)
	require.NoError(t, err)
	return id
}

func TestTakeHoldsRenewsGoesStaleAndReleases(t *testing.T) {
	db, s := migrated(t)
	ctx := ctxT(t)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	id := takeVerdict(t, s, "room-take", t0.Add(-2*time.Hour))
	stale := func(now time.Time) time.Time { return now.Add(-10 * time.Minute) }

	got, err := s.TakeItem(ctx, id, "mod-a", t0, stale(t0), false)
	require.NoError(t, err)
	require.Equal(t, Take{VerdictID: id, Moderator: "mod-a", TakenAt: t0, ActiveAt: t0}, got)

	// Another moderator is refused and told who holds it.
	_, err = s.TakeItem(ctx, id, "mod-b", t0.Add(time.Minute), stale(t0.Add(time.Minute)), false)
	require.ErrorIs(t, err, ErrTaken)
	var te *TakenError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "mod-a", te.Holder.Moderator)

	// The holder's activity renews the take (taken_at stays).
	held, err := s.TouchTake(ctx, id, "mod-a", t0.Add(8*time.Minute))
	require.NoError(t, err)
	require.True(t, held)
	held, err = s.TouchTake(ctx, id, "mod-b", t0.Add(8*time.Minute))
	require.NoError(t, err)
	require.False(t, held, "touching changes nothing for a moderator who does not hold it")
	_, err = s.TakeItem(ctx, id, "mod-b", t0.Add(15*time.Minute), stale(t0.Add(15*time.Minute)), false)
	require.ErrorIs(t, err, ErrTaken, "active 7 minutes ago: not stale yet")

	// Ten minutes after the last activity the take is stale: anyone takes it.
	now := t0.Add(18*time.Minute + time.Second)
	got, err = s.TakeItem(ctx, id, "mod-b", now, stale(now), false)
	require.NoError(t, err)
	require.Equal(t, Take{VerdictID: id, Moderator: "mod-b", TakenAt: now, ActiveAt: now}, got)

	// Only the holder releases.
	ok, err := s.ReleaseItem(ctx, id, "mod-a")
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = s.ReleaseItem(ctx, id, "mod-b")
	require.NoError(t, err)
	require.True(t, ok)
	_, held, err = s.TakeOf(ctx, id)
	require.NoError(t, err)
	require.False(t, held)

	// Force is the audited override: it takes a live take over.
	_, err = s.TakeItem(ctx, id, "mod-a", now, stale(now), false)
	require.NoError(t, err)
	got, err = s.TakeItem(ctx, id, "mod-b", now.Add(time.Second), stale(now.Add(time.Second)), true)
	require.NoError(t, err)
	require.Equal(t, "mod-b", got.Moderator)

	_, err = s.TakeItem(ctx, id+1000, "mod-a", now, stale(now), false)
	require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)

	// The foreign key cascades: a purged verdict leaves no take behind.
	_, err = db.ExecContext(ctx, `DELETE FROM verdict_stages WHERE verdict_id = ?`, id)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `DELETE FROM verdicts WHERE id = ?`, id)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM queue_takes`).Scan(&n))
	require.Zero(t, n)
}

// Two stores are two console replicas: of many moderators taking one free
// item at once, exactly one wins and every other is told who did.
func TestTakeHasOneWinnerAcrossReplicas(t *testing.T) {
	db, s := migrated(t)
	replica := New(db)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	id := takeVerdict(t, s, "room-race", t0.Add(-time.Hour))
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []string
		holders = map[string]bool{}
	)
	for i := range n {
		st := s
		if i%2 == 1 {
			st = replica
		}
		mod := "mod-" + string(rune('a'+i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := st.TakeItem(ctx, id, mod, t0, t0.Add(-10*time.Minute), false)
			mu.Lock()
			defer mu.Unlock()
			var te *TakenError
			switch {
			case err == nil:
				winners = append(winners, mod)
			case errors.As(err, &te):
				holders[te.Holder.Moderator] = true
			default:
				t.Errorf("take: %v", err)
			}
		}()
	}
	wg.Wait()
	require.Len(t, winners, 1, "exactly one moderator holds the item")
	for h := range holders {
		require.Equal(t, winners[0], h, "the losers are told the winner's name")
	}
	tk, ok, err := s.TakeOf(ctxT(t), id)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, winners[0], tk.Moderator)
}

func TestQueueShowsWhoTookAnItem(t *testing.T) {
	_, s := migrated(t)
	ctx := ctxT(t)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	taken := takeVerdict(t, s, "room-q1", t0.Add(-time.Hour))
	free := takeVerdict(t, s, "room-q2", t0.Add(-2*time.Hour))
	_, err := s.TakeItem(ctx, taken, "mod-a", t0, t0.Add(-10*time.Minute), false)
	require.NoError(t, err)
	page, err := s.ListQueue(ctx, QueueFilter{}, "")
	require.NoError(t, err)
	require.Equal(t, []uint64{taken, free}, ids(page.Items))
	require.Equal(t, "mod-a", page.Items[0].TakenBy)
	require.Equal(t, t0, page.Items[0].TakenActiveAt)
	require.Empty(t, page.Items[1].TakenBy)
	require.True(t, page.Items[1].TakenActiveAt.IsZero())
}

func TestCountQueueByCategoryAndAge(t *testing.T) {
	_, s := migrated(t)
	ctx := ctxT(t)
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	save := func(room string, cat pipeline.Category, label pipeline.Label, finished time.Time) uint64 {
		ws := finished.Add(-time.Hour)
		v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: room, WindowStart: ws, WindowEnd: finished, PipelineVersion: "v1"},
			RunID: "run", Status: pipeline.StatusDone, Label: label, Category: cat, Severity: 3,
			Action: pipeline.ActionWarn, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: finished}
		storetest.MustSave(t, ctx, s, v)
		id, err := s.VerdictID(ctx, v.Key)
		require.NoError(t, err)
		return id
	}
	save("r1", pipeline.CategorySpam, pipeline.LabelAbusive, now.Add(-10*time.Minute))
	save("r2", pipeline.CategorySpam, pipeline.LabelSuspicious, now.Add(-2*time.Hour))
	save("r3", pipeline.CategoryPhishingLink, pipeline.LabelAbusive, now.Add(-30*time.Hour))
	save("r4", pipeline.CategoryClean, pipeline.LabelClean, now.Add(-time.Minute)) // not in the queue
	decided := save("r5", pipeline.CategoryPhishingLink, pipeline.LabelAbusive, now.Add(-time.Minute))
	_, err := s.AddDecision(ctx, Decision{VerdictID: decided, Moderator: "mod-a", Decision: DecisionConfirm, Label: pipeline.LabelAbusive,
		Category: pipeline.CategoryPhishingLink, DecidedAt: now})
	require.NoError(t, err)

	c, err := s.CountQueue(ctx, now)
	require.NoError(t, err)
	require.Equal(t, map[pipeline.Category]int{pipeline.CategorySpam: 2, pipeline.CategoryPhishingLink: 1}, c.ByCategory)
	require.Equal(t, []int{1, 1, 1}, []int{c.Under1h, c.Under24h, c.Older})
	require.Equal(t, 3, c.Total())
}
