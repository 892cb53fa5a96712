package reviewjob

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/pipeline/queuetest"
)

// loopRig is a job loop over fake queues running a review handler, on a
// fake clock of its own that no test moves: no beat or job deadline
// interferes. It runs without a hard context (internal/drain), so stop
// cancels whatever still runs; the tests stop once their jobs ended.
type loopRig struct {
	q, dlq *queuetest.Fake
	stop   func() error
}

// loopConfig is the loop's configuration in these tests.
func loopConfig() jobloop.Config {
	c := jobloop.DefaultConfig()
	c.Concurrency = 4
	c.VisibilityTimeout, c.HeartbeatInterval = 30*time.Second, 10*time.Second
	c.CallTimeout = 2 * time.Second
	c.RetryBase, c.RetryMax = time.Second, 4*time.Second
	return c
}

// runLoop starts a loop over bodies running h, its metrics m (nil: its
// own) and, when hl is set, holding jobs on it; stop drains it and returns
// Run's error.
func runLoop(t *testing.T, h jobloop.Handler, m *jobloop.Metrics, bodies []string, hl jobloop.Health) *loopRig {
	t.Helper()
	cfg := loopConfig()
	clk := clock.NewFake(time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC))
	lr := &loopRig{dlq: queuetest.NewFake(queuetest.Config{Clock: clk})}
	lr.q = queuetest.NewFake(queuetest.Config{MaxReceive: cfg.MaxReceiveCount, Clock: clk, DLQ: lr.dlq})
	for _, b := range bodies {
		lr.q.Enqueue([]byte(b))
	}
	l, err := jobloop.New(cfg, lr.q, lr.dlq, h, clk, m, nil)
	require.NoError(t, err)
	if hl != nil {
		l.HoldOn(hl)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var once sync.Once
	var runErr error
	lr.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(10 * time.Second):
				runErr = errors.New("Run did not return")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = lr.stop() })
	return lr
}

func eventually(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 2*time.Millisecond, fmt.Sprintf(msg, args...))
}

// sample is the value of the counter or gauge name in reg with the given
// label pairs (name, value, ...), 0 when it has none.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
