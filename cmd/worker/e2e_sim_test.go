package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/stages"
	"github.com/chatguard/chatguard/storage/chatapi"
)

// These tests run the real stage engine (router + reviewer) against the
// LLM simulator, with the stack's chat API serving the sample lake.

type truthRow struct {
	RoomID string    `json:"room_id"`
	Label  string    `json:"label"`
	Images int       `json:"images"`
	First  time.Time `json:"first_message_at"`
	Last   time.Time `json:"last_message_at"`
}

// sampleReviews returns up to n (room, window) pairs from the sample lake's
// ground truth, each window the hour of the room's first message, so every
// review has chat in it. The truth file is read only to find rooms; the
// verdicts are checked against the simulator, never against the labels.
func sampleReviews(t testing.TB, n int, noImages bool) []pipeline.ReviewEvent {
	t.Helper()
	return truthReviews(t, n, func(r truthRow) bool { return !noImages || r.Images == 0 })
}

// truthReviews returns n reviews of the sample rooms that keep accepts.
func truthReviews(t testing.TB, n int, keep func(truthRow) bool) []pipeline.ReviewEvent {
	t.Helper()
	f, err := os.Open(filepath.Join(stacktest.TruthDir(t), "groundtruth.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var out []pipeline.ReviewEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && len(out) < n {
		var r truthRow
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		if !keep(r) {
			continue
		}
		ws := r.First.UTC().Truncate(time.Hour)
		out = append(out, event(r.RoomID, func(e *pipeline.ReviewEvent) { e.WindowStart, e.WindowEnd = ws, ws.Add(time.Hour) }))
	}
	require.NoError(t, sc.Err())
	require.Len(t, out, n)
	return out
}

// simProc runs a private simulator (deploy/local/llmsim) as a process of
// this test, so that fault injection and call counts do not touch (or see)
// other tests' traffic. config is a JSON patch of its admin config applied
// over this package's defaults (fast answers, a long Retry-After); it
// returns the simulator and its base URL.
func simProc(t testing.TB, name, model, key, config string) (*standin.LLM, string) {
	t.Helper()
	sim := standin.StartLLM(t, standin.LLMOptions{Name: name, Model: model, APIKey: key,
		Config: `{"ttft":"20ms","itl":"1ms","retry_after":"30s"}`})
	if config != "" {
		sim.Configure(t, config)
	}
	return sim, sim.BaseURL
}

func withSims(primaryURL, primaryModel, fallbackURL, fallbackModel, fallbackKey string) func(*Config) {
	return func(c *Config) {
		c.LLM.Primary.BaseURL, c.LLM.Primary.Model = primaryURL, primaryModel
		c.LLM.Fallback.BaseURL, c.LLM.Fallback.Model, c.LLM.Fallback.APIKey = fallbackURL, fallbackModel, fallbackKey
		c.LLM.AttemptTimeout = 20 * time.Second
		c.Loop.JobTimeout = 2 * time.Minute
	}
}

// oracleJudge asks a simulator for the judge stage's answer on the chat as
// the engine prepares it; the rules read only the transcript block, so this
// is the verdict the simulator's rules give for that chat.
func oracleJudge(t testing.TB, baseURL, model, key string, msgs []pipeline.ChatMessage) stages.JudgeOutput {
	t.Helper()
	w := chatprep.Prepare(msgs, chatprep.Config{})
	prompt, err := stages.UserPrompt(pipeline.StageJudge, stages.PromptInput{Transcript: stages.FormatTranscript(w.Messages), Messages: len(w.Messages)})
	require.NoError(t, err)
	body, err := json.Marshal(map[string]any{
		"model":           model,
		"messages":        []map[string]string{{"role": "user", "content": prompt}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "judge", "schema": json.RawMessage(stages.Schema(pipeline.StageJudge))}},
	})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, baseURL+"/chat/completions", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(standin.FaultHeader, "none")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.NotEmpty(t, out.Choices)
	var j stages.JudgeOutput
	require.NoError(t, json.Unmarshal([]byte(out.Choices[0].Message.Content), &j))
	return j
}

func history(t testing.TB, chatURL string, ev pipeline.ReviewEvent) []pipeline.ChatMessage {
	t.Helper()
	cfg := chatapi.DefaultConfig()
	cfg.BaseURL = chatURL
	c, err := chatapi.New(cfg)
	require.NoError(t, err)
	msgs, err := c.History(context.Background(), ev.RoomID, ev.WindowStart, ev.WindowEnd)
	require.NoError(t, err)
	return msgs
}

func waitDone(t testing.TB, r *rig, n int, within time.Duration) {
	t.Helper()
	waitRows(t, r, "status = 'done'", n, within)
}

// unusableAnswers are the verdicts failed because a stage had no usable
// answer in any attempt: a job's own end, not retried.
const unusableAnswers = "status = 'failed' AND error LIKE '%no usable answer%'"

// waitRows waits until n verdicts match where.
func waitRows(t testing.TB, r *rig, where string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := r.countRows(t, "SELECT COUNT(*) FROM verdicts WHERE "+where)
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			var statuses []string
			rows, err := r.db.Query("SELECT CONCAT(room_id, ' ', status, ' ', COALESCE(error, '')) FROM verdicts WHERE status <> 'done'")
			if err == nil {
				for rows.Next() {
					var s string
					_ = rows.Scan(&s)
					statuses = append(statuses, s)
				}
				rows.Close()
			}
			t.Fatalf("%d of %d verdicts done after %s; others: %v", got, n, within, statuses)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestE2ESampleRoomsMatchTheSimulator(t *testing.T) {
	t.Parallel()
	prim, fb := stacktest.Primary(t), stacktest.Fallback(t)
	chatURL := stacktest.ChatAPIURL(t)
	r := startRig(t, rigOpts{chatURL: chatURL, mut: withSims(prim.BaseURL, prim.Model, fb.BaseURL, fb.Model, fb.APIKey)})
	evs := sampleReviews(t, 12, true)
	r.sendEvents(t, evs...)
	waitDone(t, r, len(evs), 2*time.Minute)
	require.Eventually(t, func() bool { vis, inf := r.queueCounts(t, r.queue.URL); return vis+inf == 0 }, 10*time.Second, 50*time.Millisecond, "messages deleted")
	pv := r.countRows(t, "SELECT COUNT(DISTINCT pipeline_version) FROM verdicts")
	require.Equal(t, 1, pv)
	labels := map[pipeline.Label]int{}
	for _, ev := range evs {
		var version string
		require.NoError(t, r.db.QueryRow("SELECT pipeline_version FROM verdicts WHERE room_id = ?", ev.RoomID).Scan(&version))
		v, err := r.store.Get(context.Background(), ev.Key(version))
		require.NoError(t, err)
		want := oracleJudge(t, prim.BaseURL, prim.Model, "", history(t, chatURL, ev))
		require.Equal(t, want.Label, v.Label, "room %s", ev.RoomID)
		require.Equal(t, want.Category, v.Category, "room %s", ev.RoomID)
		labels[v.Label]++
		require.NotEmpty(t, v.Stages)
		require.LessOrEqual(t, len(v.Stages), 4)
		require.Equal(t, pipeline.StageTriage, v.Stages[0].Stage)
		if v.EarlyExit {
			require.Len(t, v.Stages, 1, "an early exit runs triage only")
		} else {
			require.Equal(t, pipeline.StageJudge, v.Stages[len(v.Stages)-1].Stage)
		}
		n := r.countRows(t, "SELECT COUNT(*) FROM verdict_stages s JOIN verdicts v ON v.id = s.verdict_id WHERE v.room_id = ?", ev.RoomID)
		require.Equal(t, len(v.Stages), n)
	}
	t.Logf("labels of %d sample rooms: %v", len(evs), labels)
	require.Greater(t, len(labels), 1, "the sample should not be all one label")
	// Inference logs reach the feedback queue.
	require.Eventually(t, func() bool { return r.metric(t, "chatguard_worker_events_published_total") >= float64(len(evs)) }, 10*time.Second, 50*time.Millisecond)
}

func TestE2EDuplicateMakesOneSetOfModelCalls(t *testing.T) {
	t.Parallel()
	primary, pURL := simProc(t, "primary", "sim-p", "", "")
	_, fURL := simProc(t, "fallback", "sim-f", "k", "")
	chatURL := stacktest.ChatAPIURL(t)
	r := startRig(t, rigOpts{chatURL: chatURL, mut: withSims(pURL, "sim-p", fURL, "sim-f", "k")})
	ev := sampleReviews(t, 1, true)[0]
	r.sendEvents(t, ev)
	waitDone(t, r, 1, time.Minute)
	calls := primary.Stats(t).ChatRequests("")
	require.Positive(t, calls)
	r.sendEvents(t, ev)
	require.Eventually(t, func() bool { return r.metric(t, `chatguard_worker_jobs_total{outcome="duplicate"}`) == 1 }, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, calls, primary.Stats(t).ChatRequests(""), "the duplicate called a model")
	require.Equal(t, 1, r.countRows(t, "SELECT COUNT(*) FROM verdicts"))
}

func TestE2EPrimaryThrottledFallsBack(t *testing.T) {
	t.Parallel()
	primary, pURL := simProc(t, "primary", "sim-p", "", `{"faults":{"429":1},"retry_after":"1m"}`)
	fallback, fURL := simProc(t, "fallback", "sim-f", "k", "")
	chatURL := stacktest.ChatAPIURL(t)
	r := startRig(t, rigOpts{chatURL: chatURL, mut: withSims(pURL, "sim-p", fURL, "sim-f", "k")})
	evs := sampleReviews(t, 3, true)
	r.sendEvents(t, evs[0])
	waitDone(t, r, 1, time.Minute)
	var version string
	require.NoError(t, r.db.QueryRow("SELECT pipeline_version FROM verdicts LIMIT 1").Scan(&version))
	v, err := r.store.Get(context.Background(), evs[0].Key(version))
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, v.Status)
	first := v.Stages[0]
	require.Equal(t, pipeline.PoolFallback, first.Pool)
	require.LessOrEqual(t, first.Attempts, 2, "answered by the fallback within one extra attempt")
	for _, st := range v.Stages {
		require.Equal(t, pipeline.PoolFallback, st.Pool, "stage %s", st.Stage)
	}
	require.Equal(t, int64(1), primary.Stats(t).ChatRequests(""), "the primary was called again during its cooldown")

	// More work inside the cooldown never touches the primary.
	r.sendEvents(t, evs[1:]...)
	waitDone(t, r, 3, time.Minute)
	require.Equal(t, int64(1), primary.Stats(t).ChatRequests(""))
	require.Positive(t, fallback.Stats(t).ChatRequests(""))

	// The router's and the worker's metrics share the admin endpoint.
	_, body := r.get(t, "/metrics")
	for _, name := range []string{
		`chatguard_llm_cooldown_active{pool="primary"} 1`, "chatguard_llm_breaker_state", "chatguard_llm_fallbacks_total",
		"chatguard_llm_attempts_total", "chatguard_llm_ttft_seconds_bucket", "chatguard_llm_tokens_total",
		"chatguard_worker_stage_latency_seconds_bucket", "chatguard_worker_stage_ttft_seconds_bucket", "chatguard_worker_tokens_total",
		"chatguard_worker_inflight_jobs", "chatguard_worker_event_age_seconds_bucket", "chatguard_worker_events_buffered",
		`chatguard_worker_sqs_calls_total{op="delete",outcome="ok"}`, "chatguard_worker_sqs_call_duration_seconds_bucket",
	} {
		require.Contains(t, body, name)
	}
}

func TestE2EPrimaryRandomFaults(t *testing.T) {
	t.Parallel()
	primary, pURL := simProc(t, "primary", "sim-p", "",
		`{"faults":{"429":0.05,"500":0.1,"503":0.05,"drop":0.05,"malformed":0.05},"retry_after":"1s"}`)
	_, fURL := simProc(t, "fallback", "sim-f", "k", "")
	chatURL := stacktest.ChatAPIURL(t)
	r := startRig(t, rigOpts{chatURL: chatURL, mut: func(c *Config) {
		withSims(pURL, "sim-p", fURL, "sim-f", "k")(c)
		c.Loop.Concurrency = 32
		c.MySQL.MaxOpenConns = 40
	}})
	const n = 200
	evs := sampleReviews(t, n, false)
	r.sendEvents(t, evs...)
	// A stage whose every attempt drew malformed (5% of the primary's
	// calls, and no cooldown sends it to the fallback) ends failed by
	// design; about 6e-6 of stages do.
	waitRows(t, r, "status = 'done' OR ("+unusableAnswers+")", n, 5*time.Minute)
	unusable := r.countRows(t, "SELECT COUNT(*) FROM verdicts WHERE "+unusableAnswers)
	require.LessOrEqual(t, unusable, 1)
	require.Equal(t, n-unusable, r.countRows(t, "SELECT COUNT(*) FROM verdicts WHERE status = 'done'"))
	require.Equal(t, unusable, r.countRows(t, "SELECT COUNT(*) FROM verdicts WHERE status <> 'done'"))
	st := primary.Stats(t)
	faults := st.ChatRequests("") - st.ChatRequests(standin.OutcomeOK)
	t.Logf("primary: %d calls, %d faulted; fallback stages: %d", st.ChatRequests(""), faults,
		r.countRows(t, "SELECT COUNT(*) FROM verdict_stages WHERE pool = 'fallback'"))
	require.Positive(t, faults, "the faults were injected")
}
