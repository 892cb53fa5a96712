package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// RunVerdictReviserConformance checks that a pipeline.VerdictReviser keeps
// a key's history as the console and the job loop rely on: a key's first
// verdict is revision 1 whether Save or Revise wrote it; Revise writes the
// next revision and makes it current, leaving the earlier one unchanged
// and superseded; a review from a queue (Save) updates the current
// revision in place, never a superseded one, and never overwrites a done
// re-review; a non-done re-review does not hide a done verdict; concurrent
// re-reviews of one key get distinct revisions, one of them current.
// newStore must return a store over empty, isolated storage.
func RunVerdictReviserConformance(t *testing.T, newStore func(t *testing.T) pipeline.VerdictReviser) {
	t.Helper()
	reviserRevisions(t, newStore)
	reviserQueue(t, newStore)
	reviserConcurrent(t, newStore)
}

// reviseVerdict revises with v, which must succeed, and returns the
// revision and whether it committed.
func reviseVerdict(t *testing.T, s pipeline.VerdictReviser, v pipeline.Verdict) (int, bool) {
	t.Helper()
	rev, committed, err := s.Revise(verdictCtx(t), v)
	require.NoError(t, err)
	return rev, committed
}

// reReview is v as an on-demand review of the same window answers it.
func reReview(v pipeline.Verdict) pipeline.Verdict {
	r := v
	r.RunID = "ondemand:mod-1:review-1"
	r.Label, r.Category, r.Severity, r.Action = pipeline.LabelSuspicious, pipeline.CategoryOffPlatform, 2, pipeline.ActionWarn
	r.Stages = v.Stages[:2]
	r.FinishedAt = v.FinishedAt.Add(time.Hour)
	return r
}

// reviserRevisions checks that the first verdict is revision 1 and that a
// re-review is a new current revision, the earlier kept.
func reviserRevisions(t *testing.T, newStore func(t *testing.T) pipeline.VerdictReviser) {
	t.Helper()
	t.Run("a key's first verdict is revision 1", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		saved, revised := SampleVerdict("room-rev-first-save"), SampleVerdict("room-rev-first-revise")
		MustSave(t, verdictCtx(t), s, saved)
		rev, committed := reviseVerdict(t, s, revised)
		require.True(t, committed)
		require.Equal(t, 1, rev)
		for _, v := range []pipeline.Verdict{saved, revised} {
			got, err := s.Get(verdictCtx(t), v.Key)
			require.NoError(t, err)
			requireSame(t, v, got)
			require.Equal(t, 1, got.Revision)
			require.True(t, got.SupersededAt.IsZero(), "the only revision is current")
		}
		_, err := s.Revisions(verdictCtx(t), SampleVerdict("room-rev-none").Key)
		require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
	})

	t.Run("a re-review is a new current revision; the first is kept", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		v := SampleVerdict("room-rev-two")
		MustSave(t, verdictCtx(t), s, v)
		r := reReview(v)
		rev, committed := reviseVerdict(t, s, r)
		require.True(t, committed)
		require.Equal(t, 2, rev)
		got, err := s.Get(verdictCtx(t), v.Key)
		require.NoError(t, err)
		requireSame(t, r, got)
		require.Equal(t, 2, got.Revision)
		revs, err := s.Revisions(verdictCtx(t), v.Key)
		require.NoError(t, err)
		require.Len(t, revs, 2)
		requireSame(t, v, revs[0])
		require.Equal(t, 1, revs[0].Revision)
		require.False(t, revs[0].SupersededAt.IsZero(), "the first revision is superseded")
		requireSame(t, r, revs[1])
		require.True(t, revs[1].SupersededAt.IsZero())

		third := reReview(v)
		third.Label, third.Category = pipeline.LabelClean, pipeline.CategoryClean
		rev, _ = reviseVerdict(t, s, third)
		require.Equal(t, 3, rev)
		revs, err = s.Revisions(verdictCtx(t), v.Key)
		require.NoError(t, err)
		require.Len(t, revs, 3)
		require.Equal(t, []int{1, 2, 3}, []int{revs[0].Revision, revs[1].Revision, revs[2].Revision})
		require.Equal(t, pipeline.LabelSuspicious, revs[1].Label, "revision 2 unchanged")
		require.False(t, revs[1].SupersededAt.IsZero())
	})
}

// reviserQueue checks how a review from a queue (Save) and a failed
// re-review meet the revisions.
func reviserQueue(t *testing.T, newStore func(t *testing.T) pipeline.VerdictReviser) {
	t.Helper()
	t.Run("a review from a queue does not overwrite a done re-review", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		v := SampleVerdict("room-rev-late")
		MustSave(t, verdictCtx(t), s, v)
		r := reReview(v)
		reviseVerdict(t, s, r)
		require.False(t, MustSave(t, verdictCtx(t), s, v), "a redelivered batch review is kept out")
		late := pipeline.Verdict{Key: v.Key, RunID: "run-late", Status: pipeline.StatusFailed, Error: "late", Attempts: 5, PublishedAt: v.PublishedAt}
		require.False(t, MustSave(t, verdictCtx(t), s, late))
		got, err := s.Get(verdictCtx(t), v.Key)
		require.NoError(t, err)
		requireSame(t, r, got)
		revs, err := s.Revisions(verdictCtx(t), v.Key)
		require.NoError(t, err)
		require.Len(t, revs, 2)
		requireSame(t, v, revs[0])
	})

	t.Run("a review from a queue updates a failed current revision in place", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		v := SampleVerdict("room-rev-retry")
		failed := pipeline.Verdict{Key: v.Key, RunID: v.RunID, Status: pipeline.StatusFailed, Error: "timeout", Attempts: 1, PublishedAt: v.PublishedAt}
		MustSave(t, verdictCtx(t), s, failed)
		require.True(t, MustSave(t, verdictCtx(t), s, v), "the retry's done verdict replaces the failed one")
		revs, err := s.Revisions(verdictCtx(t), v.Key)
		require.NoError(t, err)
		require.Len(t, revs, 1, "a retry from the queue is no new revision")
		requireSame(t, v, revs[0])
		require.Equal(t, 1, revs[0].Revision)
	})

	t.Run("a failed re-review does not hide a done verdict", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		v := SampleVerdict("room-rev-guard")
		MustSave(t, verdictCtx(t), s, v)
		failed := pipeline.Verdict{Key: v.Key, RunID: "ondemand:mod-1:r", Status: pipeline.StatusFailed, Error: "model down", PublishedAt: v.PublishedAt}
		rev, committed := reviseVerdict(t, s, failed)
		require.False(t, committed)
		require.Equal(t, 1, rev, "the current revision stays")
		revs, err := s.Revisions(verdictCtx(t), v.Key)
		require.NoError(t, err)
		require.Len(t, revs, 1)
		requireSame(t, v, revs[0])
	})
}

// reviserConcurrent checks concurrent re-reviews and a cancelled context.
func reviserConcurrent(t *testing.T, newStore func(t *testing.T) pipeline.VerdictReviser) {
	t.Helper()
	t.Run("concurrent re-reviews get distinct revisions", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		v := SampleVerdict("room-rev-race")
		MustSave(t, verdictCtx(t), s, v)
		const n = 6
		var wg sync.WaitGroup
		revs := make([]int, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := reReview(v)
				r.Attempts = 10 + i
				revs[i], _, errs[i] = s.Revise(verdictCtx(t), r)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.ElementsMatch(t, []int{2, 3, 4, 5, 6, 7}, revs)
		all, err := s.Revisions(verdictCtx(t), v.Key)
		require.NoError(t, err)
		require.Len(t, all, n+1)
		current := 0
		for i, r := range all {
			require.Equal(t, i+1, r.Revision)
			if r.SupersededAt.IsZero() {
				current++
			}
		}
		require.Equal(t, 1, current, "exactly one revision is current")
		got, err := s.Get(verdictCtx(t), v.Key)
		require.NoError(t, err)
		require.Equal(t, n+1, got.Revision)
		require.Equal(t, all[n].Attempts, got.Attempts)
	})

	t.Run("cancelled context", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c, cancel := context.WithCancel(context.Background())
		cancel()
		_, committed, err := s.Revise(c, SampleVerdict("room-rev-cancel"))
		require.Error(t, err)
		require.False(t, committed)
		_, err = s.Revisions(verdictCtx(t), SampleVerdict("room-rev-cancel").Key)
		require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
	})
}
