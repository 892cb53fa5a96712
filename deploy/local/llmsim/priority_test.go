package llmsim

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// queued puts a waiter of the given priority in s's queue, as acquire
// does when no slot is free, and returns it.
func queued(s *scheduler, priority int) *waiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &waiter{priority: priority, ready: make(chan struct{})}
	w.elem = s.enqueue(w)
	s.publish()
	return w
}

// admitted reports which of ws hold a slot now.
func admitted(ws ...*waiter) []bool {
	out := make([]bool, len(ws))
	for i, w := range ws {
		select {
		case <-w.ready:
			out[i] = true
		default:
		}
	}
	return out
}

// Under priority scheduling each freed slot goes to the lowest priority
// value waiting, ties by arrival; without it, to the longest waiter.
func TestSchedulerServesByPriorityThenArrival(t *testing.T) {
	t.Parallel()
	s := newScheduler(1, 10, true)
	require.NoError(t, s.acquire(t.Context(), nil, 2), "a free slot is taken at once")
	batch1, batch2, interactive, realtime := queued(s, 2), queued(s, 2), queued(s, 0), queued(s, 1)
	order := []*waiter{interactive, realtime, batch1, batch2}
	for i := range order {
		s.release()
		want := make([]bool, len(order))
		for j := 0; j <= i; j++ {
			want[j] = true
		}
		require.Equal(t, want, admitted(order...), "after %d releases", i+1)
	}

	fifo := newScheduler(1, 10, false)
	require.NoError(t, fifo.acquire(t.Context(), nil, 0))
	first, second := queued(fifo, 2), queued(fifo, 0)
	fifo.release()
	require.Equal(t, []bool{true, false}, admitted(first, second), "fcfs ignores priority")
}

// vLLM without the priority policy refuses a non-zero priority; with it,
// the request is served.
func TestPriorityNeedsThePolicy(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		cfg := fastConfig()
		cfg.PriorityScheduling = on
		fx := setup(t, cfg, nil)
		body := `{"model":"` + DefaultModel + `","priority":2,"messages":[{"role":"user","content":"hi"}]}`
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, fx.run.URL+"/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		if on {
			require.Equal(t, http.StatusOK, resp.StatusCode)
		} else {
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		}
	}
}
