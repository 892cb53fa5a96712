package moderationtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// HistoryStore is what the take history suite runs on: the port, and
// verdicts and decisions to measure.
type HistoryStore interface {
	moderation.Verdicts
	moderation.Decisions
	moderation.TakeHistory
}

// RunTakeHistoryConformance checks moderation.TakeHistory: each decision
// of the window is listed once with its item's queued time, the first
// take by anyone (picked up) and the decider's own latest take before the
// decision; takes after the decision do not count; a decision without a
// take has no take times; invalid records are permanent; the purge
// deletes only rows before its cutoff, at most limit of them. newStore
// returns a store over empty, isolated storage.
func RunTakeHistoryConformance(t *testing.T, newStore func(t *testing.T) HistoryStore) {
	t.Helper()
	t.Run("handled items", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := testCtx(t)
		a := Seed(t, s, Verdict("room-hist-a"))
		b := Seed(t, s, Verdict("room-hist-b"))
		queued := T0.Add(time.Hour) // Verdict's FinishedAt
		take := func(id uint64, mod string, at time.Duration, ev moderation.TakeEvent) {
			require.NoError(t, s.RecordTake(ctx, moderation.TakeRecord{At: queued.Add(at), VerdictID: id, Moderator: mod, Event: ev}))
		}
		take(a, "mod-x", 10*time.Second, moderation.TakeStarted)
		take(a, "mod-x", 20*time.Second, moderation.TakeReleased)
		take(a, "mod-y", 30*time.Second, moderation.TakeStarted)
		take(a, "mod-y", 95*time.Second, moderation.TakeStarted) // after the decision
		decide := func(id uint64, mod, kind string, at time.Duration) {
			// A confirm carries the verdict's label; an overturn changes it.
			label := pipeline.LabelAbusive
			if kind == moderation.DecisionOverturn {
				label = pipeline.LabelSuspicious
			}
			_, err := s.AddDecision(ctx, moderation.Decision{VerdictID: id, Moderator: mod, Decision: kind, Label: label,
				Category: "external_payment", DecidedAt: queued.Add(at)})
			require.NoError(t, err)
		}
		decide(a, "mod-y", moderation.DecisionConfirm, 90*time.Second+500*time.Microsecond)
		decide(b, "mod-x", moderation.DecisionOverturn, 100*time.Second)
		decide(b, "mod-x", moderation.DecisionConfirm, 10*time.Hour) // outside the window
		got, err := s.HandledItems(ctx, queued, queued.Add(time.Hour))
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, moderation.HandledItem{VerdictID: a, Moderator: "mod-y", Decision: moderation.DecisionConfirm, QueuedAt: queued,
			PickedAt: queued.Add(10 * time.Second), TakenAt: queued.Add(30 * time.Second), DecidedAt: queued.Add(90*time.Second + 500*time.Microsecond)}, got[0])
		require.Equal(t, moderation.HandledItem{VerdictID: b, Moderator: "mod-x", Decision: moderation.DecisionOverturn, QueuedAt: queued,
			DecidedAt: queued.Add(100 * time.Second)}, got[1])
		r := moderation.Summarize(got)
		require.Equal(t, 2, r.Team.Decisions)
		require.Equal(t, 1, r.Team.Overturns)
		require.Equal(t, 60*time.Second+500*time.Microsecond, r.Team.MeanHandle())
		require.Equal(t, 10*time.Second, r.Team.MeanPickup())
	})
	t.Run("invalid is permanent, purge by cutoff and limit", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := testCtx(t)
		for _, bad := range []moderation.TakeRecord{
			{VerdictID: 1, Moderator: "m", Event: moderation.TakeStarted},
			{At: T0, Moderator: "m", Event: moderation.TakeStarted},
			{At: T0, VerdictID: 1, Event: moderation.TakeStarted},
			{At: T0, VerdictID: 1, Moderator: "m", Event: "decide"},
		} {
			requirePermanent(t, s.RecordTake(ctx, bad))
		}
		id := Seed(t, s, Verdict("room-hist-purge"))
		for i := range 5 {
			require.NoError(t, s.RecordTake(ctx, moderation.TakeRecord{At: T0.Add(time.Duration(i) * time.Hour), VerdictID: id,
				Moderator: fmt.Sprintf("mod-%d", i), Event: moderation.TakeStarted}))
		}
		n, err := s.PurgeTakeHistory(ctx, T0.Add(3*time.Hour), 2)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		n, err = s.PurgeTakeHistory(ctx, T0.Add(3*time.Hour), 10)
		require.NoError(t, err)
		require.Equal(t, 1, n, "only the rows before the cutoff")
		_, err = s.AddDecision(ctx, moderation.Decision{VerdictID: id, Moderator: "mod-4", Decision: moderation.DecisionConfirm,
			Label: "abusive", Category: "external_payment", DecidedAt: T0.Add(5 * time.Hour)})
		require.NoError(t, err)
		got, err := s.HandledItems(ctx, T0, T0.Add(6*time.Hour))
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, T0.Add(3*time.Hour), got[0].PickedAt, "the purged takes are gone")
		require.Equal(t, T0.Add(4*time.Hour), got[0].TakenAt)
	})
}
