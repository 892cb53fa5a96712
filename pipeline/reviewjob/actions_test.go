package reviewjob

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/storage/storetest"
)

// planner attaches one marker action per plan and records what it was
// told.
type planner struct {
	mu        sync.Mutex
	err       error
	sources   []pipeline.ActionSource
	committed []pipeline.Verdict
}

func (p *planner) Plan(_ context.Context, v pipeline.Verdict, src pipeline.ActionSource) (pipeline.Verdict, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sources = append(p.sources, src)
	if p.err != nil {
		return v, p.err
	}
	a := storetest.SampleAction(v.Key.RoomID, "u1", "rule", pipeline.ActionWarnSender, pipeline.ModeOn, v.FinishedAt)
	a.IdempotencyKey, a.Key = "k-"+v.Key.RoomID, v.Key
	v.Actions = []pipeline.ActionRecord{a}
	return v, nil
}

func (p *planner) Committed(v pipeline.Verdict) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.committed = append(p.committed, v)
}

// savedActions is a store that remembers the actions of each save.
type savedActions struct {
	*storetest.Memory
	mu    sync.Mutex
	saves [][]pipeline.ActionRecord
}

func (s *savedActions) Save(ctx context.Context, v pipeline.Verdict) (bool, error) {
	s.mu.Lock()
	s.saves = append(s.saves, v.Actions)
	s.mu.Unlock()
	return s.Memory.Save(ctx, v)
}

func TestADoneVerdictIsSavedWithItsActions(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	p := &planner{}
	store := &savedActions{Memory: r.store}
	deps := r.deps()
	deps.Store, deps.Actions = store, p
	r.build(deps)
	out := r.h.Handle(context.Background(), msg(r.body(t, func(ev *pipeline.ReviewEvent) { ev.Source = pipeline.SourceRealtime }), 1, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	require.Equal(t, []pipeline.ActionSource{pipeline.ActionSourceRealtime}, p.sources)
	require.Len(t, store.saves, 1)
	require.Equal(t, "k-room-1", store.saves[0][0].IdempotencyKey)
	require.Len(t, p.committed, 1)

	// The redelivery finds the review done: no plan, no save, no action.
	out = r.h.Handle(context.Background(), msg(r.body(t), 2, 5))
	require.Equal(t, jobloop.Delete, out.Action)
	require.Len(t, p.sources, 1)
	require.Len(t, store.saves, 1)
}

func TestAPlanThatCannotReadTheRecordSavesNothing(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	p := &planner{err: pipeline.Retryable(errors.New("mysql: down"), 0)}
	store := &savedActions{Memory: r.store}
	deps := r.deps()
	deps.Store, deps.Actions = store, p
	r.build(deps)
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.NotEqual(t, jobloop.Delete, out.Action)
	for _, acts := range store.saves {
		require.Empty(t, acts)
	}
	_, err := r.store.Get(context.Background(), r.key())
	if err == nil {
		v, _ := r.store.Get(context.Background(), r.key())
		require.NotEqual(t, pipeline.StatusDone, v.Status, "no done verdict without its actions")
	}
	require.Empty(t, p.committed)
}

// TestActionsCarryTheirOffendersPseudonym: the action's lake event gets
// its offender as the reviewer's keyed pseudonym, and none without a key;
// the body keeps the raw id the chat service needs.
func TestActionsCarryTheirOffendersPseudonym(t *testing.T) {
	t.Parallel()
	for _, keyed := range []bool{true, false} {
		r := setupReview(t)
		store := &savedActions{Memory: r.store}
		deps := r.deps()
		deps.Store, deps.Actions = store, &planner{}
		if keyed {
			deps.Reviewer = keyedReviewer{r.rev}
		}
		r.build(deps)
		require.Equal(t, jobloop.Delete, r.h.Handle(context.Background(), msg(r.body(t), 1, 5)).Action)
		require.Len(t, store.saves, 1)
		a := store.saves[0][0]
		require.Equal(t, "u1", a.Creator.ID)
		if keyed {
			require.Equal(t, "hmac:0000000000000000000000a1", a.Offender)
		} else {
			require.Empty(t, a.Offender, "no key: no offender, never the raw id")
		}
	}
}
