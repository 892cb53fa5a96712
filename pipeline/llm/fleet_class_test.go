package llm

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/capacity"
	"github.com/chatguard/chatguard/storage/redislimits"
)

// fleetStore is what the fleet limits are kept in.
type fleetStore interface {
	pipeline.LeaseSemaphore
	pipeline.RateBudget
}

// fleetStores are the stores the class gates are tested on: the
// in-process one, and the real Redis under a key prefix of the test's
// own, so two routers on it are two replicas of one deployment.
func fleetStores(t *testing.T) map[string]fleetStore {
	return map[string]fleetStore{
		"local": capacity.NewLocal(nil),
		"redis": redislimits.New(stacktest.Redis(t), stacktest.Unique("classes")+":"),
	}
}

// Shadow takes a lease only while a quarter of L (the default idle share)
// is free besides the reserves, across replicas; the classes above it
// then fill the rest by rank.
func TestFleetShadowTakesOnlyIdleLeasesAcrossReplicas(t *testing.T) {
	t.Parallel()
	for name, store := range fleetStores(t) {
		t.Run(name, func(t *testing.T) {
			fc := FleetConfig{Leases: store, PrimaryLimit: 8, PrimaryReserved: 1, PrimaryReservedRealtime: 1}
			a, _ := fleetRouter(t, newFake(t, nil), nil, fc)
			b, _ := fleetRouter(t, newFake(t, nil), nil, fc)
			take := func(r *Router, c pipeline.Class) bool {
				l, ok, err := r.fleet.tryLease(t.Context(), c)
				require.NoError(t, err)
				if ok {
					t.Cleanup(l.release)
				}
				return ok
			}
			// Shadow: 8 − 1 − 1 − ceil(8 × 25 %) = 4.
			for i := range 4 {
				require.True(t, take([]*Router{a, b}[i%2], pipeline.ClassShadow), i)
			}
			require.False(t, take(a, pipeline.ClassShadow), "the fleet is no longer idle enough for shadow")
			require.True(t, take(b, pipeline.ClassBatch))
			require.True(t, take(a, pipeline.ClassBatch))
			require.False(t, take(b, pipeline.ClassBatch), "batch holds L − R − Rr")
			require.True(t, take(a, pipeline.ClassRealtime))
			require.False(t, take(b, pipeline.ClassRealtime), "realtime holds L − R")
			require.True(t, take(b, pipeline.ClassInteractive))
			require.False(t, take(a, pipeline.ClassInteractive), "the fleet is full")
		})
	}
}

// The managed API's budget is shared by rank across replicas: shadow
// spends only an idle budget, batch leaves both reserves, realtime the
// interactive one, and interactive spends the rest.
func TestFleetFallbackBudgetSharesByClassAcrossReplicas(t *testing.T) {
	t.Parallel()
	for name, store := range fleetStores(t) {
		t.Run(name, func(t *testing.T) {
			// Six requests a minute with a burst of 10: nothing refills
			// while the test runs. Realtime leaves 2, batch 2 + 3, shadow
			// 2 + 3 + 3 (ceil(10 × 25 %)).
			fc := FleetConfig{Budget: store, FallbackRPM: 6, BudgetBurst: 100 * time.Second,
				FallbackReservedInteractive: 20, FallbackReservedRealtime: 30}
			a, _ := fleetRouter(t, newFake(t, nil), newFake(t, nil), fc)
			b, _ := fleetRouter(t, newFake(t, nil), newFake(t, nil), fc)
			takes := func(c pipeline.Class) int {
				n := 0
				for i := 0; ; i++ {
					ok, wait := []*Router{a, b}[i%2].fleet.takeBudget(t.Context(), c, 1)
					if !ok {
						require.Positive(t, wait, "a refusal says when to ask again")
						return n
					}
					n++
				}
			}
			require.Equal(t, 2, takes(pipeline.ClassShadow))
			require.Equal(t, 3, takes(pipeline.ClassBatch))
			require.Equal(t, 3, takes(pipeline.ClassRealtime))
			require.Equal(t, 2, takes(pipeline.ClassInteractive))
			require.Zero(t, takes(pipeline.ClassShadow))
		})
	}
}

// A batch call refused at its reserve line waits within its deadline and
// leaves the fallback to the classes above it; an interactive call
// refused by the spent budget answers at once, as without classes.
func TestFleetFallbackRefusalsByClass(t *testing.T) {
	t.Parallel()
	for name, store := range fleetStores(t) {
		t.Run(name, func(t *testing.T) {
			prim := newFake(t, status(http.StatusServiceUnavailable, "60"))
			fb := newFake(t, answer(okAnswer))
			// A burst of 4 that does not refill while the test runs;
			// batch leaves 2 (50 %), realtime nothing.
			fc := FleetConfig{Budget: store, FallbackRPM: 1, BudgetBurst: 4 * time.Minute, FallbackReservedRealtime: 50}
			r, reg := fleetRouter(t, prim, fb, fc)
			call := func(ctx context.Context, c pipeline.Class) error {
				req := triageReq()
				req.Class = c
				_, err := r.Complete(ctx, req)
				return err
			}
			for range 2 {
				require.NoError(t, call(t.Context(), pipeline.ClassBatch))
			}
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			err := call(ctx, pipeline.ClassBatch)
			cancel()
			var rerr *pipeline.RetryableError
			require.ErrorAs(t, err, &rerr, "no pool before the deadline: retry later")
			require.EqualValues(t, 2, fb.calls.Load(), "the refused batch call was not sent")
			require.Equal(t, 1.0, metricValue(t, reg, "chatguard_llm_class_refused_total", "class", "batch", "reason", "deadline"))

			require.NoError(t, call(t.Context(), pipeline.ClassRealtime), "the reserve is realtime's")
			require.NoError(t, call(t.Context(), pipeline.ClassInteractive))
			// The budget is spent: interactive is refused without waiting
			// (t.Context() has no deadline; a wait would hang the test).
			err = call(t.Context(), pipeline.ClassInteractive)
			require.ErrorAs(t, err, &rerr)
			require.EqualValues(t, 4, fb.calls.Load())
			require.Equal(t, 1.0, metricValue(t, reg, "chatguard_llm_class_refused_total", "class", "interactive", "reason", "full"))
		})
	}
}

// A finished call's lease goes to a waiting realtime call before a batch
// call that has waited longer; a lease taken under realtime's limit never
// goes to batch, and shadow never inherits one.
func TestFleetHandOnServesRealtimeBeforeBatch(t *testing.T) {
	t.Parallel()
	store := capacity.NewLocal(nil)
	r, _ := fleetRouter(t, newFake(t, nil), nil, FleetConfig{Leases: store, PrimaryLimit: 3, PrimaryReservedRealtime: 1})
	f := r.fleet
	batchLease, ok, err := f.tryLease(t.Context(), pipeline.ClassBatch)
	require.NoError(t, err)
	require.True(t, ok)
	rtLease, ok, err := f.tryLease(t.Context(), pipeline.ClassRealtime)
	require.NoError(t, err)
	require.True(t, ok)

	batch := f.wait(pipeline.ClassBatch)
	rt := f.wait(pipeline.ClassRealtime)
	batchLease.release()
	select {
	case got := <-rt:
		require.Equal(t, batchLease.id, got.id, "realtime first, though batch waited longer")
		f.unwait(pipeline.ClassRealtime, rt)
		got.release()
	default:
		t.Fatal("the realtime waiter got nothing")
	}
	// The realtime waiter is gone: the lease now goes to batch.
	got := <-batch
	require.Equal(t, batchLease.id, got.id)

	// A lease held under realtime's limit (L − R = 3, batch's 2) is not
	// batch's to inherit: it goes back to the store.
	again := f.wait(pipeline.ClassBatch)
	rtLease.release()
	select {
	case <-again:
		t.Fatal("batch inherited a lease beyond its limit")
	default:
	}
	f.unwait(pipeline.ClassBatch, again)
	f.unwait(pipeline.ClassBatch, batch)
	got.release()
	require.Zero(t, f.leasesHeld())
	require.Zero(t, f.waiting())
}
