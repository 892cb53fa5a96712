package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// SampleVerdict returns a fully populated done verdict for room, with every
// stage, for tests that need a realistic row.
func SampleVerdict(room string) pipeline.Verdict {
	ws := time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC)
	kst := time.FixedZone("KST", 9*3600)
	stages := make([]pipeline.StageResult, 0, len(pipeline.Stages))
	for i, s := range pipeline.Stages {
		pool := pipeline.PoolPrimary
		if s == pipeline.StageVision {
			pool = pipeline.PoolFallback
		}
		stages = append(stages, pipeline.StageResult{
			Stage: s, Pool: pool, Model: "model-" + string(pool), Attempts: 1 + i%2,
			TTFT: time.Duration(40+i) * time.Millisecond, Latency: time.Duration(300+i)*time.Millisecond + 250*time.Microsecond,
			TokensIn: 1000 + i, TokensOut: 100 + i,
			Output: []byte(fmt.Sprintf(`{"stage":%q,"n":%d}`, s, i)),
		})
	}
	return pipeline.Verdict{
		Key:    pipeline.ReviewKey{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1-test"},
		RunID:  "run-2026110304",
		Status: pipeline.StatusDone,
		Label:  pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment,
		Severity: 4, Confidence: 0.875, Action: pipeline.ActionRestrict,
		Rationale:   "seller asks for prepayment to a personal account",
		EvidenceIDs: []string{"m-3", "m-7"},
		Attempts:    2, InjectionFlagged: true,
		Stages:      stages,
		PublishedAt: ws.Add(time.Hour + 5*time.Minute).In(kst),
		StartedAt:   ws.Add(time.Hour + 6*time.Minute + 123456789),
		FinishedAt:  ws.Add(time.Hour + 6*time.Minute + 2*time.Second),
		// In another zone and below a microsecond: stored in UTC, truncated.
		OldestMessageAt: ws.Add(3*time.Minute + 1500).In(kst),
		NewestMessageAt: ws.Add(58*time.Minute + 7*time.Second),
	}
}

// RunVerdictStoreConformance checks that a pipeline.VerdictStore behaves as
// the job loop relies on: not-found is ErrVerdictNotFound, a save round-trips
// in UTC at microsecond precision, a save replaces the row and its stage set,
// keys that differ in any part are distinct, a done verdict survives later
// non-done saves (which report nothing committed, so no verdict event
// contradicts the store), a non-done verdict is replaced by the same status
// again (committed), and concurrent saves of one key leave one consistent row.
// newStore must return a store over empty, isolated storage.
func RunVerdictStoreConformance(t *testing.T, newStore func(t *testing.T) pipeline.VerdictStore) {
	t.Helper()
	verdictReads(t, newStore)
	verdictReplaces(t, newStore)
	verdictDoneGuard(t, newStore)
	verdictConcurrent(t, newStore)
}

// verdictCtx is a subtest's deadline.
func verdictCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// saveVerdict saves v, which must succeed, and reports whether it
// committed.
func saveVerdict(t *testing.T, s pipeline.VerdictStore, v pipeline.Verdict) bool {
	t.Helper()
	committed, err := s.Save(verdictCtx(t), v)
	require.NoError(t, err)
	return committed
}

// verdictReads checks not-found, the round trip and a key given in
// another zone.
func verdictReads(t *testing.T, newStore func(t *testing.T) pipeline.VerdictStore) {
	t.Helper()
	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Get(verdictCtx(t), SampleVerdict("room-none").Key)
		require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
	})

	t.Run("round trip", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		v := SampleVerdict("room-rt")
		require.True(t, saveVerdict(t, s, v), "a new verdict is committed")
		got, err := s.Get(verdictCtx(t), v.Key)
		require.NoError(t, err)
		requireSame(t, v, got)
	})

	t.Run("key in another zone", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		v := SampleVerdict("room-tz")
		saveVerdict(t, s, v)
		kst := time.FixedZone("KST", 9*3600)
		k := v.Key
		k.WindowStart, k.WindowEnd = k.WindowStart.In(kst), k.WindowEnd.In(kst)
		got, err := s.Get(verdictCtx(t), k)
		require.NoError(t, err)
		require.Equal(t, time.UTC, got.Key.WindowStart.Location())
		require.True(t, got.Key.WindowStart.Equal(v.Key.WindowStart))
	})
}

// verdictReplaces checks that a save replaces the row and its stage set,
// and that keys differing in any part are distinct.
func verdictReplaces(t *testing.T, newStore func(t *testing.T) pipeline.VerdictStore) {
	t.Helper()
	t.Run("upsert replaces row and stage set", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		v := SampleVerdict("room-up")
		saveVerdict(t, s, v)
		v2 := v
		v2.Stages = v.Stages[:1]
		v2.Stages[0].Output = []byte(`{"risk":"none"}`)
		v2.EarlyExit, v2.Label, v2.Category, v2.Action = true, pipeline.LabelClean, pipeline.CategoryClean, pipeline.ActionNone
		v2.Severity, v2.Confidence, v2.Attempts, v2.EvidenceIDs, v2.Rationale = 1, 0.5, 3, nil, ""
		// A window with no message has no span: unknown, not the old one.
		v2.OldestMessageAt, v2.NewestMessageAt = time.Time{}, time.Time{}
		require.True(t, saveVerdict(t, s, v2), "done replacing done is committed")
		got, err := s.Get(verdictCtx(t), v.Key)
		require.NoError(t, err)
		requireSame(t, v2, got)
	})

	t.Run("keys are distinct", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		base := SampleVerdict("room-k")
		variants := []func(*pipeline.Verdict){
			func(v *pipeline.Verdict) {},
			func(v *pipeline.Verdict) { v.Key.RoomID = "room-k2" },
			func(v *pipeline.Verdict) { v.Key.PipelineVersion = "v2-test" },
			func(v *pipeline.Verdict) { v.Key.WindowStart = v.Key.WindowStart.Add(time.Microsecond) },
			func(v *pipeline.Verdict) { v.Key.WindowEnd = v.Key.WindowEnd.Add(time.Minute) },
		}
		var saved []pipeline.Verdict
		for i, f := range variants {
			v := base
			f(&v)
			v.Attempts = i + 1
			require.True(t, saveVerdict(t, s, v))
			saved = append(saved, v)
		}
		for _, v := range saved {
			got, err := s.Get(verdictCtx(t), v.Key)
			require.NoError(t, err)
			require.Equal(t, v.Attempts, got.Attempts, "key %s", v.Key)
		}
	})
}

// verdictDoneGuard checks that a done verdict survives later non-done
// saves, and that a non-done one is replaced by its status again or by
// done.
func verdictDoneGuard(t *testing.T, newStore func(t *testing.T) pipeline.VerdictStore) {
	t.Helper()
	for _, st := range []pipeline.Status{pipeline.StatusFailed, pipeline.StatusExpired, pipeline.StatusStopped} {
		t.Run("done survives a later "+string(st), func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			v := SampleVerdict("room-guard-" + string(st))
			saveVerdict(t, s, v)
			late := pipeline.Verdict{Key: v.Key, RunID: "run-late", Status: st, Error: "late attempt", Attempts: 5, PublishedAt: v.PublishedAt}
			require.False(t, saveVerdict(t, s, late), "the done-guard kept the stored verdict: nothing committed")
			got, err := s.Get(verdictCtx(t), v.Key)
			require.NoError(t, err)
			requireSame(t, v, got)
		})
		t.Run(string(st)+" is replaced by a later "+string(st), func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			v := SampleVerdict("room-again-" + string(st))
			first := pipeline.Verdict{Key: v.Key, RunID: v.RunID, Status: st, Error: "first", Attempts: 1, PublishedAt: v.PublishedAt}
			require.True(t, saveVerdict(t, s, first))
			again := first
			again.Error, again.Attempts = "again", 2
			require.True(t, saveVerdict(t, s, again), "only the done-guard keeps a row")
			got, err := s.Get(verdictCtx(t), v.Key)
			require.NoError(t, err)
			require.Equal(t, "again", got.Error)
			require.Equal(t, 2, got.Attempts)
		})
		t.Run(string(st)+" is replaced by done", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			v := SampleVerdict("room-redo-" + string(st))
			early := pipeline.Verdict{Key: v.Key, RunID: v.RunID, Status: st, Error: "model unavailable", Attempts: 1, PublishedAt: v.PublishedAt,
				Stages: []pipeline.StageResult{{Stage: pipeline.StageTriage, Pool: pipeline.PoolPrimary, Error: "timeout", Attempts: 3}}}
			require.True(t, saveVerdict(t, s, early))
			got, err := s.Get(verdictCtx(t), v.Key)
			require.NoError(t, err)
			require.Equal(t, st, got.Status)
			require.Equal(t, "model unavailable", got.Error)
			require.Len(t, got.Stages, 1)
			require.Equal(t, "timeout", got.Stages[0].Error)
			require.True(t, saveVerdict(t, s, v), "done replacing "+string(st)+" is committed")
			got, err = s.Get(verdictCtx(t), v.Key)
			require.NoError(t, err)
			requireSame(t, v, got)
		})
	}
}

// verdictConcurrent checks concurrent saves of one key and a cancelled
// context.
func verdictConcurrent(t *testing.T, newStore func(t *testing.T) pipeline.VerdictStore) {
	t.Helper()
	t.Run("concurrent saves of one key", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		base := SampleVerdict("room-race")
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := base
				v.Attempts = i + 1
				v.Stages = base.Stages[:1+i%len(base.Stages)]
				_, errs[i] = s.Save(verdictCtx(t), v)
			}()
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		got, err := s.Get(verdictCtx(t), base.Key)
		require.NoError(t, err)
		// Whichever save won, its row and its stage set must agree.
		i := got.Attempts - 1
		require.GreaterOrEqual(t, i, 0)
		require.Len(t, got.Stages, 1+i%len(base.Stages))
	})

	t.Run("cancelled context", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c, cancel := context.WithCancel(context.Background())
		cancel()
		committed, err := s.Save(c, SampleVerdict("room-cancel"))
		require.Error(t, err)
		require.False(t, committed)
		_, err = s.Get(verdictCtx(t), SampleVerdict("room-cancel").Key)
		require.ErrorIs(t, err, pipeline.ErrVerdictNotFound)
	})
}

// requireSame compares verdicts as a store keeps them: UTC, microseconds.
func requireSame(t *testing.T, want, got pipeline.Verdict) {
	t.Helper()
	us := func(tm time.Time) time.Time {
		if tm.IsZero() {
			return tm
		}
		return tm.UTC().Truncate(time.Microsecond)
	}
	require.Equal(t, want.Key.RoomID, got.Key.RoomID)
	require.Equal(t, want.Key.PipelineVersion, got.Key.PipelineVersion)
	require.Equal(t, us(want.Key.WindowStart), got.Key.WindowStart)
	require.Equal(t, us(want.Key.WindowEnd), got.Key.WindowEnd)
	require.Equal(t, want.RunID, got.RunID)
	require.Equal(t, want.Status, got.Status)
	require.Equal(t, want.Label, got.Label)
	require.Equal(t, want.Category, got.Category)
	require.Equal(t, want.Severity, got.Severity)
	require.InDelta(t, want.Confidence, got.Confidence, 1e-9)
	require.Equal(t, want.Action, got.Action)
	require.Equal(t, want.Rationale, got.Rationale)
	require.Equal(t, len(want.EvidenceIDs), len(got.EvidenceIDs))
	if len(want.EvidenceIDs) > 0 {
		require.Equal(t, want.EvidenceIDs, got.EvidenceIDs)
	}
	require.Equal(t, want.EarlyExit, got.EarlyExit)
	require.Equal(t, want.InjectionFlagged, got.InjectionFlagged)
	require.Equal(t, want.Error, got.Error)
	require.Equal(t, want.Attempts, got.Attempts)
	require.Equal(t, us(want.PublishedAt), got.PublishedAt)
	require.Equal(t, us(want.StartedAt), got.StartedAt)
	require.Equal(t, us(want.FinishedAt), got.FinishedAt)
	require.Equal(t, us(want.OldestMessageAt), got.OldestMessageAt)
	require.Equal(t, us(want.NewestMessageAt), got.NewestMessageAt)
	require.Len(t, got.Stages, len(want.Stages))
	for i, w := range want.Stages {
		g := got.Stages[i]
		require.Equal(t, w.Stage, g.Stage)
		require.Equal(t, w.Pool, g.Pool)
		require.Equal(t, w.Model, g.Model)
		require.Equal(t, w.Attempts, g.Attempts)
		require.Equal(t, w.TTFT.Round(time.Microsecond), g.TTFT)
		require.Equal(t, w.Latency.Round(time.Microsecond), g.Latency)
		require.Equal(t, w.TokensIn, g.TokensIn)
		require.Equal(t, w.TokensOut, g.TokensOut)
		if len(w.Output) == 0 {
			require.Empty(t, g.Output)
		} else {
			require.JSONEq(t, string(w.Output), string(g.Output))
		}
		require.Equal(t, w.Error, g.Error)
	}
}

// MustSave saves v in s, failing the test on an error, and reports whether
// the save committed v: for tests that need a verdict stored.
func MustSave(t testing.TB, ctx context.Context, s pipeline.VerdictStore, v pipeline.Verdict) (committed bool) {
	t.Helper()
	committed, err := s.Save(ctx, v)
	require.NoError(t, err)
	return committed
}
