package llm

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/capacity"
)

// blocking answers once release is closed, telling started about each call.
func blocking(started chan<- struct{}, release <-chan struct{}) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, r *http.Request, _ int) {
		started <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		writeSSE(w, okAnswer, "stop")
	}
}

// fleetRouter is one replica sharing store with the others.
func fleetRouter(t *testing.T, prim *fake, fb *fake, fc FleetConfig) (*Router, *prometheus.Registry) {
	t.Helper()
	return setup(t, setupOpts{primary: prim, fallback: fb, tweak: func(c *Config) {
		c.Primary.MaxConcurrency = 8
		c.Fleet = fc
	}})
}

func TestFleetLeasesBoundThePrimaryAcrossReplicasWithAnInteractiveReserve(t *testing.T) {
	t.Parallel()
	store := capacity.NewLocal(nil)
	started, release := make(chan struct{}, 16), make(chan struct{})
	prim := newFake(t, blocking(started, release))
	fc := FleetConfig{Leases: store, PrimaryLimit: 3, PrimaryReserved: 1, LeaseWait: 20 * time.Millisecond}
	a, regA := fleetRouter(t, prim, nil, fc)
	b, _ := fleetRouter(t, prim, nil, fc)

	var wg sync.WaitGroup
	call := func(r *Router, class pipeline.Class) {
		wg.Go(func() {
			req := triageReq()
			req.Class = class
			_, _ = r.Complete(t.Context(), req)
		})
	}
	// Two batch calls, one per replica: L − R = 2 leases for batch.
	call(a, pipeline.ClassBatch)
	call(b, pipeline.ClassBatch)
	<-started
	<-started
	// A third batch call waits for a lease; an interactive one takes the
	// reserve at once.
	call(a, pipeline.ClassBatch)
	req := triageReq()
	req.Class = pipeline.ClassInteractive
	done := make(chan error, 1)
	go func() { _, err := b.Complete(t.Context(), req); done <- err }()
	<-started
	select {
	case <-started:
		t.Fatal("a batch call ran past the fleet limit")
	default:
	}
	require.EqualValues(t, 3, prim.calls.Load())
	require.Equal(t, 1.0, metricValue(t, regA, "chatguard_llm_fleet_leases_local"))
	// Another interactive call finds the fleet full and is refused at once.
	_, err := a.Complete(t.Context(), req)
	require.Error(t, err)

	close(release)
	require.NoError(t, <-done)
	<-started // the waiting batch call got its lease
	wg.Wait()
	require.EqualValues(t, 4, prim.calls.Load())
	require.Zero(t, a.fleet.leasesHeld()+b.fleet.leasesHeld(), "every lease was released")
}

func TestFleetStoreDownFallsBackToTheStaticShare(t *testing.T) {
	t.Parallel()
	store := capacity.NewLocal(nil)
	store.SetFailing(true)
	started, release := make(chan struct{}, 16), make(chan struct{})
	prim := newFake(t, blocking(started, release))
	r, reg := fleetRouter(t, prim, nil, FleetConfig{Leases: store, PrimaryLimit: 8, Replicas: 4, LeaseWait: 10 * time.Millisecond})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { _, _ = r.Complete(t.Context(), triageReq()) })
	}
	<-started
	<-started // the static share is 8/4 = 2
	require.True(t, r.fleet.degraded())
	require.Equal(t, 1.0, metricValue(t, reg, "chatguard_llm_fleet_degraded"))
	select {
	case <-started:
		t.Fatal("more than the static share ran")
	default:
	}
	close(release)
	<-started
	wg.Wait()
}

func TestFleetBudgetHoldsFallbackCallsWithoutSpendingAttempts(t *testing.T) {
	t.Parallel()
	store := capacity.NewLocal(nil)
	prim := newFake(t, status(http.StatusServiceUnavailable, "60"))
	fb := newFake(t, answer(okAnswer))
	// 600/min with a burst of 1: the first fallback call passes, the second
	// waits about 100 ms for the budget instead of being sent for a 429.
	r, reg := fleetRouter(t, prim, fb, FleetConfig{Budget: store, FallbackRPM: 600, BudgetBurst: 100 * time.Millisecond})
	resp, err := r.Complete(t.Context(), triageReq())
	require.NoError(t, err)
	require.Equal(t, "fallback", string(resp.Pool))
	resp, err = r.Complete(t.Context(), triageReq())
	require.NoError(t, err)
	require.Equal(t, "fallback", string(resp.Pool))
	require.Equal(t, 1, resp.Attempts, "waiting for the budget is not an attempt")
	require.EqualValues(t, 2, fb.calls.Load())
	require.Equal(t, 1.0, metricValue(t, reg, "chatguard_llm_fleet_budget_denied_total"))
}

func TestFleetConfigValidate(t *testing.T) {
	store := capacity.NewLocal(nil)
	require.NoError(t, FleetConfig{Leases: store, PrimaryLimit: 4, PrimaryReserved: 1}.withDefaults().validate())
	require.Error(t, FleetConfig{Leases: store, PrimaryLimit: 4, PrimaryReserved: 4}.withDefaults().validate())
	require.Error(t, FleetConfig{Budget: store, FallbackRPM: -1}.withDefaults().validate())
	require.False(t, FleetConfig{PrimaryLimit: 4}.enabled(), "no store, nothing shared")
	require.True(t, FleetConfig{PrimaryLimit: 4}.Limited(), "a limit without a store yet still asks for one")
	require.True(t, FleetConfig{FallbackTPM: 1}.Limited())
	require.False(t, FleetConfig{PrimaryReserved: 4, Replicas: 3}.Limited(), "reserves and replicas limit nothing alone")
}

func TestFleetNameDropsAKeyPrefixColon(t *testing.T) {
	require.Equal(t, "cg:fleet", FleetConfig{Name: "cg:fleet:"}.withDefaults().Name)
	require.Equal(t, "cg:fleet", FleetConfig{Name: "cg:fleet"}.withDefaults().Name)
	require.Equal(t, "chatguard", FleetConfig{Name: ":"}.withDefaults().Name)
}

func TestEstimateTokensCountsPromptAndAnswer(t *testing.T) {
	req := triageReq()
	msgs := []Message{{Text: "123456"}, {Text: "안녕", ImageURLs: []string{"u"}}}
	require.Equal(t, 4+2+4+2+85+req.MaxTokens, estimateTokens(&req, msgs))
}

// metricValue sums the samples of the metric family name in reg whose
// labels match labels (name, value pairs).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		sum := 0.0
		for _, m := range mf.GetMetric() {
			if hasLabels(m.GetLabel(), labels) {
				sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		return sum
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// hasLabels reports whether got holds every name, value pair of want.
func hasLabels(got []*dto.LabelPair, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		if !slices.ContainsFunc(got, func(l *dto.LabelPair) bool { return l.GetName() == want[i] && l.GetValue() == want[i+1] }) {
			return false
		}
	}
	return true
}

func TestFleetBudgetWaitEndsWithTheCaller(t *testing.T) {
	t.Parallel()
	store := capacity.NewLocal(nil)
	prim := newFake(t, status(http.StatusServiceUnavailable, "60"))
	fb := newFake(t, answer(okAnswer))
	r, _ := fleetRouter(t, prim, fb, FleetConfig{Budget: store, FallbackRPM: 1, BudgetBurst: time.Minute})
	_, err := r.Complete(t.Context(), triageReq()) // spends the whole budget
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// A cancelled caller gets its cause back instead of spinning on the
	// spent budget.
	_, err = r.Complete(ctx, triageReq())
	require.ErrorIs(t, err, context.Canceled)
	require.EqualValues(t, 1, fb.calls.Load())
}

func TestFleetOneStoreErrorIsNotAnOutage(t *testing.T) {
	store := capacity.NewLocal(nil)
	f := newFleet(FleetConfig{Leases: store, PrimaryLimit: 4, Replicas: 2}.withDefaults(), clock.Real())
	store.SetFailing(true)
	for i := range failuresToDegrade - 1 {
		_, ok, err := f.tryLease(t.Context(), pipeline.ClassBatch)
		require.NoError(t, err)
		require.False(t, ok, i)
		require.False(t, f.degraded())
	}
	l, ok, err := f.tryLease(t.Context(), pipeline.ClassBatch)
	require.NoError(t, err)
	require.True(t, ok, "on the static share after the third error in a row")
	require.True(t, f.degraded())
	require.True(t, l.local)
	l.release()
	require.Zero(t, f.leasesHeld())
}

// countingStore counts lease acquires that succeeded.
type countingStore struct {
	*capacity.Local
	acquired atomic.Int64
}

func (s *countingStore) Acquire(ctx context.Context, name, id string, limit int, ttl time.Duration) (bool, int, error) {
	ok, n, err := s.Local.Acquire(ctx, name, id, limit, ttl)
	if ok {
		s.acquired.Add(1)
	}
	return ok, n, err
}

func TestFleetLeaseIsHandedToAWaitingCallInProcess(t *testing.T) {
	t.Parallel()
	store := &countingStore{Local: capacity.NewLocal(nil)}
	started, release := make(chan struct{}, 16), make(chan struct{})
	prim := newFake(t, blocking(started, release))
	r, _ := fleetRouter(t, prim, nil, FleetConfig{Leases: store, PrimaryLimit: 1, LeaseWait: 10 * time.Second})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			_, err := r.Complete(t.Context(), triageReq())
			require.NoError(t, err)
		})
	}
	<-started
	// Both others wait for the lease before the first call ends; a call
	// that came later would find it back in the store.
	require.Eventually(t, func() bool { return r.fleet.waiting() == 2 }, 10*time.Second, time.Millisecond)
	close(release)
	<-started
	<-started
	wg.Wait()
	require.EqualValues(t, 3, prim.calls.Load())
	require.EqualValues(t, 1, store.acquired.Load(), "the one lease went from call to call")
	require.Zero(t, r.fleet.leasesHeld())
	ok, _, err := store.Local.Acquire(t.Context(), "chatguard:primary", "probe", 1, time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "the last call gave the lease back to the store")
}

func TestFleetLeaseHandedToACallThatStoppedWaitingGoesOn(t *testing.T) {
	t.Parallel()
	store := &countingStore{Local: capacity.NewLocal(nil)}
	r, _ := fleetRouter(t, newFake(t, nil), nil, FleetConfig{Leases: store, PrimaryLimit: 1, LeaseWait: 10 * time.Second})
	f := r.fleet
	l, ok, err := f.tryLease(t.Context(), pipeline.ClassBatch)
	require.NoError(t, err)
	require.True(t, ok)

	first, second := f.wait(pipeline.ClassBatch), f.wait(pipeline.ClassBatch)
	require.Equal(t, 2, f.waiting())
	l.release()
	require.Equal(t, 1, f.waiting(), "handed to the oldest waiter")
	// The first waiter gave up (timed out, or took a lease of its own)
	// before it took the one handed to it: the lease goes on to the next.
	f.unwait(pipeline.ClassBatch, first)
	got := <-second
	require.Equal(t, l.id, got.id)
	f.unwait(pipeline.ClassBatch, second)
	got.release()
	require.Zero(t, f.waiting())
	require.Zero(t, f.leasesHeld())
	ok, _, err = store.Local.Acquire(t.Context(), "chatguard:primary", "probe", 1, time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "back in the store once nobody waits")
}

// With a realtime reserve, batch holds L − R − Rr leases across the
// replicas, realtime L − R and interactive L: a sweep backlog cannot take
// the leases real time needs.
func TestFleetRealtimeReserveAcrossReplicas(t *testing.T) {
	t.Parallel()
	for name, store := range fleetStores(t) {
		t.Run(name, func(t *testing.T) { realtimeReserveAcrossReplicas(t, store) })
	}
}

func realtimeReserveAcrossReplicas(t *testing.T, store fleetStore) {
	started, release := make(chan struct{}, 16), make(chan struct{})
	prim := newFake(t, blocking(started, release))
	fc := FleetConfig{Leases: store, PrimaryLimit: 4, PrimaryReserved: 1, PrimaryReservedRealtime: 1, LeaseWait: 20 * time.Millisecond}
	a, _ := fleetRouter(t, prim, nil, fc)
	b, _ := fleetRouter(t, prim, nil, fc)
	var wg sync.WaitGroup
	call := func(r *Router, class pipeline.Class) {
		wg.Go(func() {
			req := triageReq()
			req.Class = class
			_, _ = r.Complete(t.Context(), req)
		})
	}
	// L − R − Rr = 2 leases for batch, one per replica.
	call(a, pipeline.ClassBatch)
	call(b, pipeline.ClassBatch)
	<-started
	<-started
	require.Equal(t, 1, a.fleet.leaseLimit(pipeline.ClassShadow, false), "shadow leaves a quarter of L free besides the reserves")
	// A realtime call takes the realtime reserve at once.
	call(b, pipeline.ClassRealtime)
	<-started
	// Now the fleet holds 3 = L − R: another realtime call is held back,
	// and an interactive one still takes the last lease.
	req := triageReq()
	req.Class = pipeline.ClassRealtime
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, err := a.Complete(ctx, req)
	cancel()
	require.Error(t, err, "realtime may not take the interactive reserve")
	require.EqualValues(t, 3, prim.calls.Load())
	call(a, pipeline.ClassInteractive)
	<-started
	require.EqualValues(t, 4, prim.calls.Load())
	close(release)
	wg.Wait()
	require.Zero(t, a.fleet.leasesHeld()+b.fleet.leasesHeld(), "every lease was released")
}
