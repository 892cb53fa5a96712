package moderationtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// T0 is the suites' clock: every time they pass is T0 plus an offset.
var T0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// Mark returns a campaign mark (a keyed pseudonym, as the pipeline writes
// them) unique to n.
func Mark(n int) string { return fmt.Sprintf("hmac:%024x", 0xc0ffee000000+n) }

// Verdict returns a done, flagged verdict of room, window starting at T0,
// carrying the campaign marks given.
func Verdict(room string, marks ...string) pipeline.Verdict {
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: room, WindowStart: T0, WindowEnd: T0.Add(time.Hour), PipelineVersion: "v1-conf"},
		RunID: "run-conf", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment,
		Severity: 4, Confidence: 0.9, Action: pipeline.ActionWarn, Attempts: 1, PublishedAt: T0, StartedAt: T0, FinishedAt: T0.Add(time.Hour)}
	for i, m := range marks {
		v.Campaigns = append(v.Campaigns, pipeline.CampaignCount{Kind: pipeline.CampaignScript, Mark: m, MessageID: fmt.Sprintf("m%d", i+1), Rooms: 3, Senders: 2})
	}
	return v
}

// Seed stores v as a revision of its key (the first, for a new key) and
// returns its id.
func Seed(t testing.TB, s moderation.Verdicts, v pipeline.Verdict) uint64 {
	t.Helper()
	ctx := testCtx(t)
	_, _, err := s.Revise(ctx, v)
	require.NoError(t, err)
	id, err := s.VerdictID(ctx, v.Key)
	require.NoError(t, err)
	return id
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// requirePermanent asserts err is a *pipeline.PermanentError.
func requirePermanent(t *testing.T, err error) {
	t.Helper()
	var perm *pipeline.PermanentError
	require.ErrorAs(t, err, &perm)
}

// TakesStore is what the takes suite runs on: the port, and verdicts and
// decisions to take (a decided room is not open).
type TakesStore interface {
	moderation.Verdicts
	moderation.Takes
	moderation.Decisions
}

// RunTakesConformance checks moderation.Takes: one holder per item, a
// holder renews and keeps TakenAt, another moderator gets a *TakenError
// naming the holder until the take goes stale or is forced, only the
// holder releases or touches, bad input is permanent, concurrent takes
// have one winner, and a campaign is taken (open rooms only, others' live
// takes left and counted) and released as one. newStore returns a store
// over empty, isolated storage.
func RunTakesConformance(t *testing.T, newStore func(t *testing.T) TakesStore) {
	t.Helper()
	t.Run("hold renew stale force release", func(t *testing.T) {
		t.Parallel()
		runTakeLifecycle(t, newStore(t))
	})
	t.Run("bad input is permanent", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), testCtx(t)
		_, err := s.TakeItem(ctx, 987654321, "mod-a", T0, staleAt(T0), false)
		requirePermanent(t, err)
		require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
		id := Seed(t, s, Verdict("room-take-bad"))
		_, err = s.TakeItem(ctx, id, "", T0, staleAt(T0), false)
		requirePermanent(t, err)
		_, err = s.TakeCampaign(ctx, "", "mod-a", T0, staleAt(T0))
		requirePermanent(t, err)
	})
	t.Run("concurrent takes have one winner", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), testCtx(t)
		id := Seed(t, s, Verdict("room-take-race"))
		const n = 8
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []string
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				who := fmt.Sprintf("mod-%d", i)
				_, err := s.TakeItem(ctx, id, who, T0, staleAt(T0), false)
				if err == nil {
					mu.Lock()
					wins = append(wins, who)
					mu.Unlock()
					return
				}
				if !errors.Is(err, moderation.ErrTaken) {
					t.Errorf("take: %v", err)
				}
			}()
		}
		wg.Wait()
		require.Len(t, wins, 1)
		tk, _, err := s.TakeOf(ctx, id)
		require.NoError(t, err)
		require.Equal(t, wins[0], tk.Moderator)
	})
	t.Run("campaign", func(t *testing.T) { runCampaignTakes(t, newStore(t)) })
}

// runTakeLifecycle holds, renews, refuses, takes over a stale take, forces,
// touches and releases one item.
func runTakeLifecycle(t *testing.T, s TakesStore) {
	ctx := testCtx(t)
	id := Seed(t, s, Verdict("room-take-1"))
	got, err := s.TakeItem(ctx, id, "mod-a", T0, staleAt(T0), false)
	require.NoError(t, err)
	require.Equal(t, moderation.Take{VerdictID: id, Moderator: "mod-a", TakenAt: T0, ActiveAt: T0}, got)
	at := T0.Add(time.Minute + 1500*time.Nanosecond)
	got, err = s.TakeItem(ctx, id, "mod-a", at, staleAt(at), false)
	require.NoError(t, err)
	require.Equal(t, T0, got.TakenAt, "a renewal keeps TakenAt")
	require.Equal(t, at.Truncate(time.Microsecond), got.ActiveAt, "microseconds, UTC")
	_, err = s.TakeItem(ctx, id, "mod-b", at, staleAt(at), false)
	var te *moderation.TakenError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, moderation.ErrTaken)
	require.Equal(t, "mod-a", te.Holder.Moderator)
	later := at.Add(11 * time.Minute)
	got, err = s.TakeItem(ctx, id, "mod-b", later, staleAt(later), false)
	require.NoError(t, err, "a stale take is anyone's")
	require.Equal(t, moderation.Take{VerdictID: id, Moderator: "mod-b", TakenAt: later.Truncate(time.Microsecond), ActiveAt: later.Truncate(time.Microsecond)}, got)
	got, err = s.TakeItem(ctx, id, "mod-c", later, staleAt(later), true)
	require.NoError(t, err, "force overrides a live take")
	require.Equal(t, "mod-c", got.Moderator)
	ok, err := s.ReleaseItem(ctx, id, "mod-b")
	require.NoError(t, err)
	require.False(t, ok, "nobody releases another moderator's take")
	ok, err = s.TouchTake(ctx, id, "mod-b", later)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = s.TouchTake(ctx, id, "mod-c", later.Add(-time.Minute))
	require.NoError(t, err)
	require.True(t, ok)
	tk, held, err := s.TakeOf(ctx, id)
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, later.Truncate(time.Microsecond), tk.ActiveAt, "a touch never moves the activity back")
	ok, err = s.ReleaseItem(ctx, id, "mod-c")
	require.NoError(t, err)
	require.True(t, ok)
	_, held, err = s.TakeOf(ctx, id)
	require.NoError(t, err)
	require.False(t, held)
}

// staleAt is the stale-before time of a take at now: ten minutes idle.
func staleAt(now time.Time) time.Time { return now.Add(-10 * time.Minute) }

func runCampaignTakes(t *testing.T, s TakesStore) {
	ctx, mark := testCtx(t), Mark(1)
	stale := T0.Add(-10 * time.Minute)
	var ids []uint64
	for i := range 4 {
		ids = append(ids, Seed(t, s, Verdict(fmt.Sprintf("room-camp-%d", i), mark)))
	}
	Seed(t, s, Verdict("room-camp-other", Mark(2)))
	_, err := s.AddDecision(ctx, moderation.Decision{VerdictID: ids[3], Moderator: "mod-x", Decision: moderation.DecisionConfirm,
		Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, DecidedAt: T0})
	require.NoError(t, err)
	n, err := s.CountOpenCampaignRooms(ctx, mark)
	require.NoError(t, err)
	require.Equal(t, 3, n, "a decided room is not open")
	_, err = s.TakeItem(ctx, ids[0], "mod-b", T0, stale, false)
	require.NoError(t, err)
	_, err = s.TakeItem(ctx, ids[1], "mod-c", T0.Add(-time.Hour), T0.Add(-2*time.Hour), false)
	require.NoError(t, err)
	got, err := s.TakeCampaign(ctx, mark, "mod-a", T0, stale)
	require.NoError(t, err)
	require.Equal(t, moderation.CampaignTakes{Mine: 2, Others: map[string]int{"mod-b": 1}}, got, "a live take left, a stale one taken")
	_, held, err := s.TakeOf(ctx, ids[3])
	require.NoError(t, err)
	require.False(t, held, "a decided room is not taken")
	released, err := s.ReleaseCampaign(ctx, mark, "mod-a")
	require.NoError(t, err)
	require.Equal(t, 2, released)
	tk, held, err := s.TakeOf(ctx, ids[0])
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, "mod-b", tk.Moderator, "nobody else's take is released")
	got, err = s.TakeCampaign(ctx, Mark(99), "mod-a", T0, stale)
	require.NoError(t, err)
	require.Zero(t, got.Mine)
}

// DecisionsStore is what the decisions suite runs on.
type DecisionsStore interface {
	moderation.Verdicts
	moderation.Decisions
}

// RunDecisionsConformance checks moderation.Decisions: ids grow, the
// newest (latest DecidedAt, then highest id) comes first, limit holds,
// invalid decisions and unknown verdicts are permanent, a long note is
// cut, concurrent adds all record, and a sent mark keeps its first time.
func RunDecisionsConformance(t *testing.T, newStore func(t *testing.T) DecisionsStore) {
	t.Helper()
	t.Run("order limit and marks", func(t *testing.T) {
		t.Parallel()
		runDecisionOrder(t, newStore(t))
	})
	t.Run("invalid is permanent", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), testCtx(t)
		id := Seed(t, s, Verdict("room-dec-bad"))
		good := moderation.Decision{VerdictID: id, Moderator: "mod-a", Decision: moderation.DecisionConfirm, Label: pipeline.LabelAbusive,
			Category: pipeline.CategoryExternalPayment, DecidedAt: T0}
		for _, bad := range []func(d *moderation.Decision){
			func(d *moderation.Decision) { d.Decision = "maybe" },
			func(d *moderation.Decision) { d.Label = "" },
			func(d *moderation.Decision) { d.Category = "nonsense" },
			func(d *moderation.Decision) { d.Moderator = "" },
			func(d *moderation.Decision) { d.DecidedAt = time.Time{} },
			func(d *moderation.Decision) { d.Reverses = 1 },
			func(d *moderation.Decision) { d.Decision = moderation.DecisionUndo },
		} {
			d := good
			bad(&d)
			_, err := s.AddDecision(ctx, d)
			requirePermanent(t, err)
		}
		d := good
		d.VerdictID = 987654321
		_, err := s.AddDecision(ctx, d)
		requirePermanent(t, err)
		require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
		got, err := s.Decisions(ctx, id, 10)
		require.NoError(t, err)
		require.Empty(t, got, "nothing was recorded")
	})
	t.Run("concurrent adds all record", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), testCtx(t)
		id := Seed(t, s, Verdict("room-dec-race"))
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.AddDecision(ctx, moderation.Decision{VerdictID: id, Moderator: fmt.Sprintf("mod-%d", i), Decision: moderation.DecisionConfirm,
					Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, DecidedAt: T0, Note: string(make([]rune, moderation.MaxNoteRunes+5))})
				if err != nil {
					t.Errorf("add: %v", err)
				}
			}()
		}
		wg.Wait()
		got, err := s.Decisions(ctx, id, 10)
		require.NoError(t, err)
		require.Len(t, got, 6)
		require.Len(t, []rune(got[0].Note), moderation.MaxNoteRunes, "a long note is stored cut")
	})
	t.Run("refuses what does not mean what it says", func(t *testing.T) { t.Parallel(); runDecisionRefusals(t, newStore(t)) })
	t.Run("undo reverses", func(t *testing.T) { t.Parallel(); runDecisionUndo(t, newStore(t)) })
}

// runDecisionRefusals: an overturn to the verdict's own label and category,
// and a confirm carrying another label or category, are refused as
// permanent with their sentinel, and nothing is recorded.
func runDecisionRefusals(t *testing.T, s DecisionsStore) {
	ctx := testCtx(t)
	id := Seed(t, s, Verdict("room-dec-mean"))
	base := moderation.Decision{VerdictID: id, Moderator: "mod-a", Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, DecidedAt: T0}
	for _, tc := range []struct {
		decision string
		label    pipeline.Label
		category pipeline.Category
		want     error
	}{
		{moderation.DecisionOverturn, pipeline.LabelAbusive, pipeline.CategoryExternalPayment, moderation.ErrNoChange},
		{moderation.DecisionConfirm, pipeline.LabelSuspicious, pipeline.CategoryExternalPayment, moderation.ErrConfirmChanged},
		{moderation.DecisionConfirm, pipeline.LabelAbusive, pipeline.CategoryPhishingLink, moderation.ErrConfirmChanged},
		{moderation.DecisionConfirm, pipeline.LabelAbusive, "", moderation.ErrConfirmChanged},
	} {
		d := base
		d.Decision, d.Label, d.Category = tc.decision, tc.label, tc.category
		_, err := s.AddDecision(ctx, d)
		requirePermanent(t, err)
		require.ErrorIs(t, err, tc.want, "%s to %s/%s", tc.decision, tc.label, tc.category)
	}
	got, err := s.Decisions(ctx, id, 10)
	require.NoError(t, err)
	require.Empty(t, got, "nothing was recorded")
	for _, ok := range []struct {
		decision string
		label    pipeline.Label
		category pipeline.Category
	}{{moderation.DecisionOverturn, pipeline.LabelAbusive, pipeline.CategoryPhishingLink}, {moderation.DecisionOverturn, pipeline.LabelSuspicious,
		pipeline.CategoryExternalPayment}, {moderation.DecisionOverturn, pipeline.LabelClean, ""}, {moderation.DecisionConfirm, pipeline.LabelAbusive,
		pipeline.CategoryExternalPayment}} {
		d := base
		d.Decision, d.Label, d.Category = ok.decision, ok.label, ok.category
		_, err := s.AddDecision(ctx, d)
		require.NoError(t, err, "%s to %s/%s", ok.decision, ok.label, ok.category)
	}
}

// runDecisionUndo: an undo of one's own decision in force is recorded as
// a row of its own with that decision's label and category, its feedback
// owed nothing; the decision stays, marked reversed, and the one before it
// is in force again. An undo of a decision not in force (reversed
// already, or older), of another moderator's, of an undo, or on an unknown
// verdict is refused as permanent.
func runDecisionUndo(t *testing.T, s DecisionsStore) {
	ctx := testCtx(t)
	id := Seed(t, s, Verdict("room-dec-undo"))
	add := func(d moderation.Decision) (uint64, error) {
		d.VerdictID = id
		return s.AddDecision(ctx, d)
	}
	first, err := add(moderation.Decision{Moderator: "mod-a", Decision: moderation.DecisionConfirm, Label: pipeline.LabelAbusive,
		Category: pipeline.CategoryExternalPayment, DecidedAt: T0})
	require.NoError(t, err)
	second, err := add(moderation.Decision{Moderator: "mod-b", Decision: moderation.DecisionOverturn, Label: pipeline.LabelClean, DecidedAt: T0.Add(time.Minute)})
	require.NoError(t, err)
	undo := moderation.Decision{Moderator: "mod-b", Decision: moderation.DecisionUndo, DecidedAt: T0.Add(2 * time.Minute), Note: "wrong key"}
	for _, bad := range []moderation.Decision{
		{Moderator: "mod-a", Decision: moderation.DecisionUndo, Reverses: second, DecidedAt: T0.Add(2 * time.Minute)},
		{Moderator: "mod-a", Decision: moderation.DecisionUndo, Reverses: first, DecidedAt: T0.Add(2 * time.Minute)},
	} {
		_, err := add(bad)
		requirePermanent(t, err)
		require.ErrorIs(t, err, moderation.ErrCannotUndo)
	}
	undo.Reverses = second
	uid, err := add(undo)
	require.NoError(t, err)
	require.Greater(t, uid, second)
	got, err := s.Decisions(ctx, id, 10)
	require.NoError(t, err)
	require.Len(t, got, 3, "the undone decision stays recorded")
	require.Equal(t, []uint64{uid, second, first}, []uint64{got[0].ID, got[1].ID, got[2].ID})
	require.Equal(t, moderation.DecisionUndo, got[0].Decision)
	require.Equal(t, second, got[0].Reverses)
	require.Equal(t, pipeline.LabelClean, got[0].Label, "an undo carries what it reverses")
	require.True(t, got[0].FeedbackSentAt.IsZero(), "an undo owes a feedback event: its row is in the outbox")
	require.Equal(t, T0.Add(2*time.Minute), got[1].ReversedAt)
	require.True(t, got[2].ReversedAt.IsZero())
	in, ok := moderation.InForce(got)
	require.True(t, ok)
	require.Equal(t, first, in.ID, "the decision before is in force again")
	for _, bad := range []moderation.Decision{undo, {Moderator: "mod-b", Decision: moderation.DecisionUndo, Reverses: uid, DecidedAt: T0.Add(3 * time.Minute)}} {
		_, err := add(bad)
		requirePermanent(t, err)
		require.ErrorIs(t, err, moderation.ErrCannotUndo)
	}
	_, err = add(moderation.Decision{Moderator: "mod-a", Decision: moderation.DecisionUndo, Reverses: first, DecidedAt: T0.Add(4 * time.Minute)})
	require.NoError(t, err)
	got, err = s.Decisions(ctx, id, 10)
	require.NoError(t, err)
	_, ok = moderation.InForce(got)
	require.False(t, ok, "every decision undone: none in force")
	_, err = s.AddDecision(ctx, moderation.Decision{VerdictID: 987654321, Moderator: "mod-a", Decision: moderation.DecisionUndo, Reverses: first, DecidedAt: T0})
	requirePermanent(t, err)
	require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
}

// runDecisionOrder checks ids grow, the newest comes first, limit holds,
// and a sent mark keeps its first time.
func runDecisionOrder(t *testing.T, s DecisionsStore) {
	ctx := testCtx(t)
	id := Seed(t, s, Verdict("room-dec-1"))
	d := moderation.Decision{VerdictID: id, Moderator: "mod-a", Decision: moderation.DecisionConfirm, Label: pipeline.LabelAbusive,
		Category: pipeline.CategoryExternalPayment, DecidedAt: T0.Add(time.Minute)}
	first, err := s.AddDecision(ctx, d)
	require.NoError(t, err)
	d.Moderator, d.Decision, d.Label, d.Category, d.DecidedAt = "mod-b", moderation.DecisionOverturn, pipeline.LabelClean, "", T0
	second, err := s.AddDecision(ctx, d)
	require.NoError(t, err)
	d.Moderator, d.DecidedAt = "mod-c", T0
	third, err := s.AddDecision(ctx, d)
	require.NoError(t, err)
	require.Less(t, first, second)
	require.Less(t, second, third)
	got, err := s.Decisions(ctx, id, 10)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []uint64{first, third, second}, []uint64{got[0].ID, got[1].ID, got[2].ID}, "latest time first, then highest id")
	require.Equal(t, "mod-a", got[0].Moderator)
	require.True(t, got[0].FeedbackSentAt.IsZero())
	got, err = s.Decisions(ctx, id, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NoError(t, s.MarkFeedbackSent(ctx, T0.Add(time.Hour), first, 987654321))
	require.NoError(t, s.MarkFeedbackSent(ctx, T0.Add(2*time.Hour), first))
	got, err = s.Decisions(ctx, id, 1)
	require.NoError(t, err)
	require.Equal(t, T0.Add(time.Hour), got[0].FeedbackSentAt, "the first mark stays")
	none, err := s.Decisions(ctx, 987654321, 10)
	require.NoError(t, err)
	require.Empty(t, none)
}

// RunActionLogConformance checks moderation.ActionLog: every valid record
// is stored as given (its time in UTC, microseconds; a long detail cut),
// ids grow, concurrent records all land with distinct ids, and an invalid
// record is permanent and stores nothing. read returns the record stored
// under id (an error when there is none).
func RunActionLogConformance(t *testing.T, newLog func(t *testing.T) (moderation.ActionLog, func(id uint64) (moderation.AuditRecord, error))) {
	t.Helper()
	full := moderation.AuditRecord{At: T0.Add(1500 * time.Nanosecond), Moderator: "mod-a", Action: moderation.ActionOverrideDecided, VerdictID: 42,
		RoomID: "room-7", Mark: Mark(3), Decision: moderation.DecisionOverturn, Label: pipeline.LabelClean, Override: true, Holder: "mod-b",
		DecisionID: 9, Rooms: 3, Detail: "skipped: 1 taken"}
	t.Run("round trip and order", func(t *testing.T) {
		t.Parallel()
		log, read := newLog(t)
		ctx := testCtx(t)
		first, err := log.RecordAction(ctx, full)
		require.NoError(t, err)
		got, err := read(first)
		require.NoError(t, err)
		want := full
		want.At = T0.Add(time.Microsecond)
		require.Equal(t, want, got)
		long := moderation.AuditRecord{At: T0, Moderator: "mod-a", Action: moderation.ActionTakeCampaign, Mark: Mark(4),
			Detail: string(make([]rune, moderation.MaxAuditDetailRunes+10))}
		second, err := log.RecordAction(ctx, long)
		require.NoError(t, err)
		require.Greater(t, second, first)
		got, err = read(second)
		require.NoError(t, err)
		require.Len(t, []rune(got.Detail), moderation.MaxAuditDetailRunes, "a long detail is stored cut")
		require.Zero(t, got.VerdictID)
	})
	t.Run("invalid is permanent", func(t *testing.T) {
		t.Parallel()
		log, read := newLog(t)
		ctx := testCtx(t)
		for _, bad := range []func(r *moderation.AuditRecord){
			func(r *moderation.AuditRecord) { r.At = time.Time{} },
			func(r *moderation.AuditRecord) { r.Moderator = "" },
			func(r *moderation.AuditRecord) { r.Action = "delete_everything" },
			func(r *moderation.AuditRecord) { r.Mark = string(make([]byte, 41)) },
		} {
			r := full
			bad(&r)
			_, err := log.RecordAction(ctx, r)
			requirePermanent(t, err)
		}
		id, err := log.RecordAction(ctx, full)
		require.NoError(t, err)
		_, err = read(id - 1)
		require.Error(t, err, "the invalid records stored nothing")
	})
	t.Run("concurrent records", func(t *testing.T) {
		t.Parallel()
		log, _ := newLog(t)
		ctx := testCtx(t)
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			ids = map[uint64]bool{}
		)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, err := log.RecordAction(ctx, full)
				if err != nil {
					t.Errorf("record: %v", err)
					return
				}
				mu.Lock()
				ids[id] = true
				mu.Unlock()
			}()
		}
		wg.Wait()
		require.Len(t, ids, 8)
	})
}
