package llm

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// Every class but interactive leaves the reserved slots alone, and each
// class's calls are counted under its own label.
func TestClassesShareTheGateByRank(t *testing.T) {
	t.Parallel()
	for _, c := range []pipeline.Class{pipeline.ClassRealtime, pipeline.ClassBatch, pipeline.ClassShadow} {
		g := newGate(2, 1, nil)
		require.True(t, g.tryAcquire(c))
		require.False(t, g.tryAcquire(c), "%s may not take the reserved slot", c)
		require.True(t, g.tryAcquire(pipeline.ClassInteractive))
	}
}

func TestClassMetricsFollowTheRequestsClass(t *testing.T) {
	t.Parallel()
	prim := newFake(t, answer(okAnswer))
	r, reg := setup(t, setupOpts{primary: prim})
	n, err := testutil.GatherAndCount(reg, "chatguard_llm_class_in_flight", "chatguard_llm_class_waiting", "chatguard_llm_class_refused_total")
	require.NoError(t, err)
	require.Equal(t, 4+4+8, n, "every class's series exists before its first call")

	req := triageReq()
	req.Class = pipeline.ClassRealtime
	_, err = r.Complete(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, 1, testutil.CollectAndCount(r.m.class.ttft), "one TTFT series: realtime on the primary")
	require.Equal(t, uint64(1), histCount(t, r, "realtime", "primary"))
	require.Equal(t, 0.0, testutil.ToFloat64(r.m.class.inFlight.WithLabelValues("realtime", "primary")), "released after the call")
	require.Equal(t, 0.0, testutil.ToFloat64(r.m.class.waiting.WithLabelValues("realtime")))
}

func TestRefusedInteractiveIsCountedByClass(t *testing.T) {
	t.Parallel()
	prim := newFake(t, status(http.StatusTooManyRequests, "30"))
	r, _ := setup(t, setupOpts{primary: prim})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := r.Complete(ctx, triageReq())
	require.Error(t, err)
	require.Equal(t, 1.0, testutil.ToFloat64(r.m.class.refused.WithLabelValues("batch", refusedDeadline)),
		"the 30 s cooldown outlasts the batch call's deadline: refused at once, counted")
	req := triageReq()
	req.Class = pipeline.ClassInteractive
	_, err = r.Complete(t.Context(), req)
	require.Error(t, err)
	require.Equal(t, 1.0, testutil.ToFloat64(r.m.class.refused.WithLabelValues("interactive", refusedFull)))
	require.Equal(t, 0.0, testutil.ToFloat64(r.m.class.refused.WithLabelValues("batch", refusedFull)), "batch waits; it is never refused as full")
}

// histCount is how many observations the class TTFT histogram holds for
// class and pool.
func histCount(t *testing.T, r *Router, class, pool string) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, r.m.class.ttft.WithLabelValues(class, pool).(prometheus.Metric).Write(&m))
	return m.GetHistogram().GetSampleCount()
}
