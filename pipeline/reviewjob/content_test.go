package reviewjob

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/health"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/review"
	"github.com/chatguard/chatguard/storage/storetest"
)

// modelServer is an OpenAI-compatible endpoint that gives every call the
// same answer (or status), counting the calls per stage.
type modelServer struct {
	srv *httptest.Server
	mu  sync.Mutex
	per map[string]int
}

func newModelServer(t *testing.T, answer func(w http.ResponseWriter)) *modelServer {
	t.Helper()
	s := &modelServer{per: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r) // no tokenizer: the reviewer keeps its estimate
			return
		}
		var req struct {
			ResponseFormat struct {
				JSONSchema struct {
					Name string `json:"name"`
				} `json:"json_schema"`
			} `json:"response_format"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		s.mu.Lock()
		s.per[req.ResponseFormat.JSONSchema.Name]++
		s.mu.Unlock()
		answer(w)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *modelServer) calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.per))
	for k, v := range s.per {
		out[k] = v
	}
	return out
}

// streamAnswer streams content as one chunk with a stop finish.
func streamAnswer(content string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		c, _ := json.Marshal(content)
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", c)
		fmt.Fprint(w, "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

func serverError(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprint(w, `{"error":{"message":"boom","type":"server_error"}}`)
}

const testMaxAttempts = 3

// realReviewer is the worker's reviewer over a router to srv: real
// prompts, real validation, real attempts and repairs.
func realReviewer(t *testing.T, srv *modelServer) pipeline.Reviewer {
	t.Helper()
	router, err := llm.New(llm.Config{
		// The pool's own breaker stays out of the way: the dependency
		// gate's breaker is the one under test.
		Primary:     llm.PoolConfig{BaseURL: srv.srv.URL + "/v1", Model: "m", AttemptTimeout: 5 * time.Second, BreakerFailures: 100},
		MaxAttempts: testMaxAttempts,
		// The backoff between attempts is not what is tested: no waits
		// worth the name.
		BaseBackoff: time.Nanosecond, MaxBackoff: time.Nanosecond,
	}, nil)
	require.NoError(t, err)
	rv, err := review.New(review.Config{}, router, nil, nil, nil)
	require.NoError(t, err)
	return rv
}

func craftedEvent(t *testing.T, room string) string {
	t.Helper()
	ws := time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC)
	b, err := pipeline.ReviewEvent{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), RunID: "run-1",
		PublishedAt: ws.Add(time.Hour), SchemaVersion: pipeline.ReviewSchemaVersion}.Encode()
	require.NoError(t, err)
	return string(b)
}

// Chats crafted so that every answer breaks the schema are the chats'
// failure, not the models': the models' breaker stays closed, the loop
// never pauses or holds, and each job ends at once as a failed verdict
// with the reason, its message deleted, after at most MaxAttempts calls
// for its stage.
func TestCraftedChatsDoNotOpenTheModelsBreaker(t *testing.T) {
	t.Parallel()
	srv := newModelServer(t, streamAnswer(`{"risk":"maybe","categories":["not-a-category"],"reason":"crafted"}`))
	mon, err := health.New(health.Config{Failures: 2, OpenFor: time.Hour}, nil, nil)
	require.NoError(t, err)
	store, sink := storetest.NewMemory(), &fakeSink{}
	reviewer := realReviewer(t, srv)
	h := New(Config{}, Gated(Deps{Store: store, Chat: &fakeChat{}, Reviewer: reviewer, Events: sink}, mon), nil, nil, nil)
	reg := prometheus.NewRegistry()

	const n = 6 // three times what opens the breaker
	var bodies []string
	for i := range n {
		bodies = append(bodies, craftedEvent(t, fmt.Sprintf("crafted-%d", i)))
	}
	lr := runLoop(t, h, jobloop.NewMetrics(reg), bodies, mon)
	eventually(t, func() bool { return lr.q.Stats().Held == 0 }, "every crafted job ends")
	require.NoError(t, lr.stop())

	require.Equal(t, health.Closed, mon.State(pipeline.DepModels))
	require.Empty(t, mon.Down())
	require.Zero(t, sample(t, reg, "chatguard_worker_hold_retries_total"), "no job was held")
	require.Equal(t, float64(n), sample(t, reg, "chatguard_worker_jobs_total", "outcome", "failed"))
	require.Equal(t, n, lr.q.Stats().Received, "no crafted job was received twice")
	require.Zero(t, lr.dlq.Stats().Held)
	require.Equal(t, map[string]int{"triage": n * testMaxAttempts}, srv.calls(), "MaxAttempts calls for the stage, once per job")
	for i := range n {
		v, err := store.Get(context.Background(), pipeline.ReviewKey{RoomID: fmt.Sprintf("crafted-%d", i),
			WindowStart: time.Date(2026, 11, 3, 4, 0, 0, 0, time.UTC), WindowEnd: time.Date(2026, 11, 3, 5, 0, 0, 0, time.UTC),
			PipelineVersion: reviewer.PipelineVersion()})
		require.NoError(t, err)
		require.Equal(t, pipeline.StatusFailed, v.Status)
		require.Contains(t, v.Error, "no usable answer in 3 attempts")
		require.Len(t, v.Stages, 1)
		require.LessOrEqual(t, v.Stages[0].Attempts, testMaxAttempts)
	}
	require.Len(t, store.OutboxMessages(), n, "one failed verdict event per job, written with its verdict")
}

// Server errors on every attempt are an outage of the models: they still
// feed the breaker, which opens and holds the job.
func TestServerErrorsStillOpenTheModelsBreaker(t *testing.T) {
	t.Parallel()
	srv := newModelServer(t, serverError)
	mon, err := health.New(health.Config{Failures: 2, OpenFor: time.Hour}, nil, nil)
	require.NoError(t, err)
	r := setupReview(t)
	r.cfg = Config{}
	r.build(Gated(Deps{Store: r.store, Chat: r.chat, Reviewer: realReviewer(t, srv), Events: r.sink}, mon))
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, jobloop.Retry, out.Action, "one failure is not an outage")
	require.Equal(t, health.Closed, mon.State(pipeline.DepModels))
	out = r.h.Handle(context.Background(), msg(r.body(t), 2, 5))
	require.Equal(t, jobloop.Hold, out.Action, "the second opens the breaker: held")
	require.Equal(t, pipeline.DepModels, out.Dep)
	require.Equal(t, health.Open, mon.State(pipeline.DepModels))
	require.Empty(t, r.store.OutboxMessages(), "nothing recorded for a held job")
}
