package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/redisstop"
)

// redisScenario: Redis unreachable for the workers while stops are
// published (by an operator who still reaches it). Reviews go on; once
// Redis is back each worker loads every live stop, those published during
// the outage included.
func redisScenario(t *testing.T, s sizes) {
	redisAddr := stacktest.Get(t, "CHATGUARD_REDIS_ADDR")
	proxy, err := NewProxy(redisAddr)
	require.NoError(t, err)
	t.Cleanup(proxy.Close)
	channel := stacktest.Unique("chaos-stop")
	prefix := channel + ":"
	e := newEnv(t, "CHATGUARD_REDIS_ADDR="+proxy.Addr(), "CHATGUARD_STOP_CHANNEL="+channel, "CHATGUARD_STOP_KEY_PREFIX="+prefix)
	ws := []*worker{e.startWorker(), e.startWorker()}
	// The operator's side reaches Redis directly (the workers' link is the
	// one cut), as the operator API of a pod that still reaches it would.
	cfg := redisstop.DefaultConfig()
	cfg.Channel, cfg.KeyPrefix = channel, prefix
	pub := redisstop.NewPublisher(stacktest.Redis(t), cfg, nil)
	stop := func(room string) {
		now := time.Now().UTC()
		_, err := pub.Publish(context.Background(), pipeline.StopSignal{Scope: pipeline.StopScopeRoom, RoomID: room, Reason: "chaos",
			PublishedAt: now, ExpiresAt: now.Add(10 * time.Minute)})
		require.NoError(t, err)
	}
	scans := func(w *worker) float64 { return w.metric(`chatguard_stop_received_total{source="scan"}`) }
	const before, during = 3, 3
	for i := range before {
		stop(fmt.Sprintf("stopped-before-%d", i))
	}
	require.Eventually(t, func() bool {
		for _, w := range ws {
			if w.metric(`chatguard_stop_received_total`) < before {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "stops published before the outage reach every worker")

	evs := events(t, s.redis)
	proxy.SetDown(true)
	base := []float64{scans(ws[0]), scans(ws[1])}
	e.send(evs)
	for i := range during {
		stop(fmt.Sprintf("stopped-during-%d", i))
	}
	time.Sleep(s.redisDown) // the outage
	doneDuring := e.done()
	proxy.SetDown(false)
	up := time.Now()
	// Every live stop (before + during) is loaded again by each worker's
	// rescan once it resubscribes.
	var applied []time.Duration
	for i, w := range ws {
		for scans(w)-base[i] < before+during && time.Since(up) < time.Minute {
			time.Sleep(20 * time.Millisecond) // watching a real process
		}
		applied = append(applied, time.Since(up))
	}
	e.settle(s.redis, s.settle)
	worst := max(applied[0], applied[1])
	holds := worst <= 5*time.Second && e.depth(e.queue.DLQURL) == 0
	record(row{fmt.Sprintf("Redis down %s", s.redisDown), fmt.Sprintf("%d events during the outage, %d stops before and %d during it, 2 workers", s.redis, before, during),
		fmt.Sprintf("%d of %d reviews done during the outage, all after; stops published during it live on every worker %s after recovery (worst of 2)", doneDuring, s.redis, worst.Round(10*time.Millisecond)), holds})
	require.LessOrEqual(t, worst, 5*time.Second, "stops published during the outage applied within 5 s of recovery")
}
