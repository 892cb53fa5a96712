package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
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
	require.Equal(t, moderation.Take{VerdictID: id, Moderator: "mod-a", TakenAt: t0, ActiveAt: t0}, got)

	// Another moderator is refused and told who holds it.
	_, err = s.TakeItem(ctx, id, "mod-b", t0.Add(time.Minute), stale(t0.Add(time.Minute)), false)
	require.ErrorIs(t, err, moderation.ErrTaken)
	var te *moderation.TakenError
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
	require.ErrorIs(t, err, moderation.ErrTaken, "active 7 minutes ago: not stale yet")

	// Ten minutes after the last activity the take is stale: anyone takes it.
	now := t0.Add(18*time.Minute + time.Second)
	got, err = s.TakeItem(ctx, id, "mod-b", now, stale(now), false)
	require.NoError(t, err)
	require.Equal(t, moderation.Take{VerdictID: id, Moderator: "mod-b", TakenAt: now, ActiveAt: now}, got)

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
			var te *moderation.TakenError
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
	page, err := s.ListQueue(ctx, moderation.QueueFilter{}, "")
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
	_, err := s.AddDecision(ctx, moderation.Decision{VerdictID: decided, Moderator: "mod-a", Decision: moderation.DecisionConfirm, Label: pipeline.LabelAbusive,
		Category: pipeline.CategoryPhishingLink, DecidedAt: now})
	require.NoError(t, err)

	c, err := s.CountQueue(ctx, now)
	require.NoError(t, err)
	require.Equal(t, map[pipeline.Category]int{pipeline.CategorySpam: 2, pipeline.CategoryPhishingLink: 1}, c.ByCategory)
	require.Equal(t, []int{1, 1, 1}, []int{c.Under1h, c.Under24h, c.Older})
	require.Equal(t, 3, c.Total())
}

// markRooms gives each verdict a campaign row carrying mark, as the
// pipeline's save would.
func markRooms(t *testing.T, db *sql.DB, mark string, ids ...uint64) {
	t.Helper()
	for _, id := range ids {
		_, err := db.ExecContext(ctxT(t), `INSERT INTO verdict_campaigns (verdict_id, kind, mark, message_id, rooms, senders, room_id, label, category, decided_at)
			SELECT id, 'script', ?, 'm1', 4, 2, room_id, label, category, finished_at FROM verdicts WHERE id = ?`, mark, id)
		require.NoError(t, err)
	}
}

func TestTakeCampaignLeavesLiveTakesOfOthers(t *testing.T) {
	db, s := migrated(t)
	ctx := ctxT(t)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	stale := func(now time.Time) time.Time { return now.Add(-10 * time.Minute) }
	const mark = "hmac:0123456789abcdef01234567"
	var ids []uint64
	for _, room := range []string{"camp-free", "camp-b", "camp-c-stale", "camp-decided", "camp-a"} {
		ids = append(ids, takeVerdict(t, s, room, t0.Add(-3*time.Hour)))
	}
	other := takeVerdict(t, s, "not-in-campaign", t0.Add(-3*time.Hour))
	markRooms(t, db, mark, ids...)
	_, err := s.TakeItem(ctx, ids[1], "mod-b", t0.Add(-time.Minute), stale(t0.Add(-time.Minute)), false)
	require.NoError(t, err)
	_, err = s.TakeItem(ctx, ids[2], "mod-c", t0.Add(-time.Hour), stale(t0.Add(-time.Hour)), false)
	require.NoError(t, err)
	_, err = s.TakeItem(ctx, ids[4], "mod-a", t0.Add(-2*time.Minute), stale(t0.Add(-2*time.Minute)), false)
	require.NoError(t, err)
	_, err = s.AddDecision(ctx, moderation.Decision{VerdictID: ids[3], Moderator: "mod-d", Decision: moderation.DecisionConfirm,
		Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam, DecidedAt: t0.Add(-time.Hour)})
	require.NoError(t, err)

	open, err := s.CountOpenCampaignRooms(ctx, mark)
	require.NoError(t, err)
	require.Equal(t, 4, open, "the decided room is not open")

	got, err := s.TakeCampaign(ctx, mark, "mod-a", t0, stale(t0))
	require.NoError(t, err)
	require.Equal(t, moderation.CampaignTakes{Mine: 3, Others: map[string]int{"mod-b": 1}}, got)
	holder := func(id uint64) moderation.Take {
		tk, ok, err := s.TakeOf(ctx, id)
		require.NoError(t, err)
		if !ok {
			return moderation.Take{}
		}
		return tk
	}
	require.Equal(t, moderation.Take{VerdictID: ids[0], Moderator: "mod-a", TakenAt: t0, ActiveAt: t0}, holder(ids[0]))
	require.Equal(t, moderation.Take{VerdictID: ids[1], Moderator: "mod-b", TakenAt: t0.Add(-time.Minute), ActiveAt: t0.Add(-time.Minute)}, holder(ids[1]),
		"a live take of another moderator is not stolen")
	require.Equal(t, moderation.Take{VerdictID: ids[2], Moderator: "mod-a", TakenAt: t0, ActiveAt: t0}, holder(ids[2]), "a stale take is taken over")
	require.Equal(t, moderation.Take{}, holder(ids[3]), "a decided room is not taken")
	require.Equal(t, moderation.Take{VerdictID: ids[4], Moderator: "mod-a", TakenAt: t0.Add(-2 * time.Minute), ActiveAt: t0}, holder(ids[4]),
		"the taker's own take is renewed, its start kept")
	require.Equal(t, moderation.Take{}, holder(other))

	// Bob's single take is refused on the rooms Alice holds now.
	_, err = s.TakeItem(ctx, ids[0], "mod-b", t0.Add(time.Minute), stale(t0.Add(time.Minute)), false)
	require.ErrorIs(t, err, moderation.ErrTaken)

	n, err := s.ReleaseCampaign(ctx, mark, "mod-a")
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, "mod-b", holder(ids[1]).Moderator, "releasing touches only the taker's takes")
	require.Equal(t, moderation.Take{}, holder(ids[0]))

	_, err = s.TakeCampaign(ctx, "", "mod-a", t0, stale(t0))
	var perm *pipeline.PermanentError
	require.ErrorAs(t, err, &perm)
	got, err = s.TakeCampaign(ctx, "hmac:nothingcarriesthismark000000", "mod-a", t0, stale(t0))
	require.NoError(t, err)
	require.Equal(t, moderation.CampaignTakes{Others: map[string]int{}}, got)
}

// Two moderators take the same campaign at once, each from their own
// connection: every open room ends with exactly one holder, and what each
// was told it holds adds up to the rooms.
func TestTakeCampaignConcurrently(t *testing.T) {
	db, s := migrated(t)
	ctx := ctxT(t)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	const mark = "hmac:feedfacefeedfacefeedface"
	var ids []uint64
	for i := range 30 {
		ids = append(ids, takeVerdict(t, s, fmt.Sprintf("conc-%02d", i), t0.Add(-3*time.Hour)))
	}
	markRooms(t, db, mark, ids...)
	var (
		wg  sync.WaitGroup
		res [2]moderation.CampaignTakes
		err [2]error
	)
	for i, mod := range []string{"mod-a", "mod-b"} {
		wg.Go(func() { res[i], err[i] = s.TakeCampaign(ctx, mark, mod, t0, t0.Add(-10*time.Minute)) })
	}
	wg.Wait()
	require.NoError(t, err[0])
	require.NoError(t, err[1])
	held := map[string]int{}
	rows, qerr := db.QueryContext(ctx, "SELECT moderator, COUNT(*) FROM queue_takes GROUP BY moderator")
	require.NoError(t, qerr)
	defer rows.Close()
	for rows.Next() {
		var (
			m string
			n int
		)
		require.NoError(t, rows.Scan(&m, &n))
		held[m] = n
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 30, held["mod-a"]+held["mod-b"], "every room held once")
	// The one that committed last saw the other's takes as others'.
	require.Equal(t, held["mod-a"], res[0].Mine)
	require.Equal(t, held["mod-b"], res[1].Mine)
}
