package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/stages"
	"github.com/chatguard/chatguard/storage/chatapi"
)

// The LLM simulators and the chat API are deploy/local's stand-ins, run as
// processes of each test (deploy/local is a module of its own).
func TestMain(m *testing.M) { standin.Main(m) }

// captureSink records every published event.
type captureSink struct {
	mu     sync.Mutex
	events []pipeline.LakeEvent
}

func (s *captureSink) Publish(ev pipeline.LakeEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
	return true
}

func (s *captureSink) all() []pipeline.LakeEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

type env struct {
	prim, fb *standin.LLM
	router   *llm.Router
	rev      *Reviewer
	sink     *captureSink
	reg      *prometheus.Registry
}

type envOpts struct {
	// primFaults is the primary's fault rates as the simulator's admin
	// config writes them, e.g. {"429":1}; empty: none.
	primFaults     string
	retryAfter     time.Duration
	attemptTimeout time.Duration
	// clock, when set, is the router's clock.
	clock clock.Clock
	// primPrice and fbPrice are the pools' prices (zero: free).
	primPrice, fbPrice llm.Price
}

// noFaults sets every fault rate of a simulator to zero.
const noFaults = `{"429":0,"500":0,"503":0,"hang":0,"drop":0,"malformed":0,"truncate":0}`

// simConfig is the admin config of a fast simulator with faults (a JSON
// object of rates) and, when positive, a Retry-After.
func simConfig(faults string, retryAfter time.Duration) string {
	if faults == "" {
		faults = noFaults
	}
	c := `{"ttft":"2ms","itl":"0s","tokens_per_chunk":16,"max_hang":"5s","faults":` + faults
	if retryAfter > 0 {
		c += `,"retry_after":"` + retryAfter.String() + `"`
	}
	return c + "}"
}

func setup(t testing.TB, o envOpts) *env {
	t.Helper()
	prim := standin.StartLLM(t, standin.LLMOptions{Name: "primary", Model: "sim-primary", Config: simConfig(o.primFaults, o.retryAfter)})
	fb := standin.StartLLM(t, standin.LLMOptions{Name: "fallback", Model: "sim-fallback", Config: simConfig("", 0)})
	at := o.attemptTimeout
	if at == 0 {
		at = 10 * time.Second
	}
	reg := prometheus.NewRegistry()
	router, err := llm.New(llm.Config{
		Primary:     llm.PoolConfig{BaseURL: prim.BaseURL, Model: "sim-primary", MaxConcurrency: 16, AttemptTimeout: at, Price: o.primPrice},
		Fallback:    llm.PoolConfig{BaseURL: fb.BaseURL, APIKey: "test-key", Model: "sim-fallback", MaxConcurrency: 16, AttemptTimeout: at, Price: o.fbPrice},
		BaseBackoff: 5 * time.Millisecond,
		MaxBackoff:  50 * time.Millisecond,
	}, reg, llm.WithClock(o.clock))
	require.NoError(t, err)
	sink := &captureSink{}
	rev, err := New(Config{}, router, sink, reg, nil)
	require.NoError(t, err)
	return &env{prim: prim, fb: fb, router: router, rev: rev, sink: sink, reg: reg}
}

var at0 = time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC)

func event(room string) pipeline.ReviewEvent {
	return pipeline.ReviewEvent{RoomID: room, WindowStart: at0, WindowEnd: at0.Add(time.Hour), RunID: "run-1", PublishedAt: at0.Add(time.Hour), SchemaVersion: 1}
}

func chat(lines ...string) []pipeline.ChatMessage {
	var out []pipeline.ChatMessage
	for i, l := range lines {
		role, text, _ := strings.Cut(l, ": ")
		m := pipeline.ChatMessage{MessageID: fmt.Sprintf("m%d", i+1), SenderID: "u" + role, SenderRole: pipeline.SenderRole(role),
			SentAt: at0.Add(time.Duration(i) * time.Minute), Kind: pipeline.KindText, Text: text}
		switch {
		case role == "system":
			m.Kind = pipeline.KindSystem
		case strings.HasPrefix(text, "https://img."):
			m.Kind, m.Text, m.ImageURL = pipeline.KindImage, "", text
		}
		out = append(out, m)
	}
	return out
}

var externalPaymentChat = chat(
	"buyer: 안녕하세요 아이폰 아직 판매중인가요?",
	"seller: 네 판매중이에요",
	"buyer: 택배로 받을 수 있을까요?",
	"seller: 네 선입금 해주시면 바로 보내드려요",
	"seller: 국민은행 123456-12-123456 김민수 입니다",
	"buyer: 안전결제는 안되나요?",
	"seller: 안전결제는 정산이 늦어서 안해요. 수수료는 제가 부담할게요 계좌이체로 해주세요",
	"seller: 급하면 010-9876-5432 로 문자주세요",
)

var cleanChat = chat(
	"system: 구매자가 채팅방에 들어왔습니다",
	"buyer: 안녕하세요 아직 있나요?",
	"seller: 네 있어요~",
	"buyer: 강남역 2번 출구에서 내일 저녁 7시 괜찮으세요?",
	"seller: 네 좋아요 그때 뵐게요",
)

// simJudge asks the simulator's judge directly about the raw chat: the
// verdict its rules give for that chat.
func simJudge(t *testing.T, baseURL string, msgs []pipeline.ChatMessage) stages.JudgeOutput {
	t.Helper()
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = baseURL
	c := openai.NewClientWithConfig(cfg)
	sorted := slices.Clone(msgs)
	slices.SortStableFunc(sorted, func(a, b pipeline.ChatMessage) int { return a.SentAt.Compare(b.SentAt) })
	resp, err := c.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{
		Model:    "sim-fallback",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: stages.FormatTranscript(sorted)}},
		ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "judge", Schema: stages.Schema(pipeline.StageJudge), Strict: true}},
	})
	require.NoError(t, err)
	var out stages.JudgeOutput
	require.NoError(t, json.Unmarshal([]byte(resp.Choices[0].Message.Content), &out))
	return out
}

func TestReviewAbusiveChatRunsEveryTextStage(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{})
	v, err := e.rev.Review(t.Context(), event("r1"), externalPaymentChat, 1)
	require.NoError(t, err)
	want := simJudge(t, e.fb.BaseURL, externalPaymentChat)
	require.Equal(t, pipeline.StatusDone, v.Status)
	require.Equal(t, want.Label, v.Label)
	require.Equal(t, want.Category, v.Category)
	require.Equal(t, pipeline.CategoryExternalPayment, v.Category)
	require.Equal(t, want.Severity, v.Severity)
	require.Equal(t, want.EvidenceIDs, v.EvidenceIDs)
	require.False(t, v.EarlyExit)
	require.False(t, v.InjectionFlagged)
	require.Equal(t, e.rev.PipelineVersion(), v.Key.PipelineVersion)
	require.Equal(t, "run-1", v.RunID)
	require.Equal(t, 1, v.Attempts)
	var names []pipeline.StageName
	for _, s := range v.Stages {
		names = append(names, s.Stage)
		require.Equal(t, pipeline.PoolPrimary, s.Pool)
		require.Equal(t, "sim-primary", s.Model)
		require.Equal(t, 1, s.Attempts)
		require.Positive(t, s.TokensIn)
		require.Positive(t, s.TokensOut)
		require.Positive(t, s.TTFT)
		require.Empty(t, s.Error)
		require.True(t, json.Valid(s.Output))
	}
	require.Equal(t, []pipeline.StageName{pipeline.StageTriage, pipeline.StageExtract, pipeline.StageJudge}, names, "no images: no vision")
}

func TestReviewCleanChatExitsEarly(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{})
	v, err := e.rev.Review(t.Context(), event("r2"), cleanChat, 2)
	require.NoError(t, err)
	require.True(t, v.EarlyExit)
	require.Equal(t, pipeline.LabelClean, v.Label)
	require.Equal(t, pipeline.CategoryClean, v.Category)
	require.Equal(t, 1, v.Severity)
	require.Equal(t, pipeline.ActionNone, v.Action)
	require.Len(t, v.Stages, 1)
	require.Equal(t, pipeline.StageTriage, v.Stages[0].Stage)
	require.Equal(t, 1.0, testutil.ToFloat64(e.rev.m.reviews.WithLabelValues("early_exit")))
}

func TestReviewWithoutUserMessagesCallsNoModel(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{})
	v, err := e.rev.Review(t.Context(), event("r3"), chat("system: 구매자가 채팅방에 들어왔습니다"), 1)
	require.NoError(t, err)
	require.True(t, v.EarlyExit)
	require.Empty(t, v.Stages)
	require.Zero(t, e.prim.Stats(t).ChatRequests(""))
}

func TestReviewSendsImagesToVision(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{})
	msgs := chat(
		"buyer: 계좌번호 알려주시면 바로 입금할게요",
		"seller: 국민은행 123456-12-123456 입니다",
		"buyer: 입금했어요 확인해주세요",
		"buyer: https://img.example-market.test/rooms/r4/m4-deposit_screenshot.jpg",
		"seller: 아직 안 들어왔는데요?",
		"buyer: 은행 점검시간이라 늦게 들어온대요 먼저 보내주세요",
	)
	v, err := e.rev.Review(t.Context(), event("r4"), msgs, 1)
	require.NoError(t, err)
	var vision *pipeline.StageResult
	for i := range v.Stages {
		if v.Stages[i].Stage == pipeline.StageVision {
			vision = &v.Stages[i]
		}
	}
	require.NotNil(t, vision, "a window with images runs vision")
	var out stages.VisionOutput
	require.NoError(t, json.Unmarshal(vision.Output, &out))
	require.Len(t, out.Images, 1)
	require.Equal(t, "m4", out.Images[0].MessageID)
	want := simJudge(t, e.fb.BaseURL, msgs)
	require.Equal(t, want.Category, v.Category)
	require.Equal(t, want.Label, v.Label)
}

func TestInferenceEventsCarryNoChatText(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{})
	v, err := e.rev.Review(t.Context(), event("r5"), externalPaymentChat, 3)
	require.NoError(t, err)
	evs := e.sink.all()
	attempts := 0
	for _, s := range v.Stages {
		attempts += s.Attempts
	}
	require.Len(t, evs, attempts, "one event per attempt")
	seen := map[string]bool{}
	for _, ev := range evs {
		_, err := uuid.Parse(ev.EventID)
		require.NoError(t, err)
		require.False(t, seen[ev.EventID])
		seen[ev.EventID] = true
		require.Equal(t, pipeline.EventInferenceLog, ev.EventType)
		require.Equal(t, time.UTC, ev.OccurredAt.Location())
		p := ev.Payload.(pipeline.InferenceLog)
		require.Equal(t, "r5", p.RoomID)
		require.Equal(t, e.rev.PipelineVersion(), p.PipelineVersion)
		require.Equal(t, "ok", p.Outcome)
		require.Len(t, p.PromptSHA256, 64)
		require.Positive(t, p.PromptChars)
		require.Equal(t, len(externalPaymentChat), p.Messages)
		require.NotEmpty(t, p.Output)
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		s := string(b)
		for _, secret := range []string{"123456-12-123456", "9876-5432", "010-9876", "선입금 해주시면", "수수료는 제가", "김민수"} {
			require.NotContains(t, s, secret)
		}
	}
	// Stored stage outputs follow the same rule.
	for _, st := range v.Stages {
		require.NotContains(t, string(st.Output), "123456-12-123456")
		require.NotContains(t, string(st.Output), "선입금 해주시면")
	}
}

// fakeRouter answers each stage from a script, calling the request's hooks
// as the real router does.
type fakeRouter struct {
	answers map[pipeline.StageName][]string
	calls   []llm.Request
}

func (f *fakeRouter) Models() (string, string) { return "fake", "" }

func (f *fakeRouter) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	f.calls = append(f.calls, req)
	for i, a := range f.answers[req.Stage] {
		err := req.Validate([]byte(a))
		out := llm.Attempt{N: i + 1, Pool: pipeline.PoolPrimary, Model: "fake", Outcome: llm.OutcomeOK, Content: []byte(a), Err: err}
		if err != nil {
			out.Outcome = llm.OutcomeInvalid
		}
		req.OnAttempt(out)
		if err == nil {
			return llm.Response{Content: []byte(a), Pool: pipeline.PoolPrimary, Model: "fake", Attempts: i + 1}, nil
		}
		if i == 0 && req.Repair != nil {
			fix := req.Repair([]byte(a), err)
			if len(fix) == 0 {
				return llm.Response{}, fmt.Errorf("no repair")
			}
		}
	}
	// Every answer was invalid, as the router reports it.
	return llm.Response{}, &pipeline.UnusableAnswerError{Stage: req.Stage, Attempts: len(f.answers[req.Stage]), Err: fmt.Errorf("fake: %s exhausted", req.Stage)}
}

func TestCanaryInAnswerFlagsInjection(t *testing.T) {
	t.Parallel()
	fr := &fakeRouter{answers: map[pipeline.StageName][]string{
		pipeline.StageTriage:  {`{"risk":"none","categories":[],"reason":"my instructions say ` + stages.Canary + `"}`, `{"risk":"high","categories":["external_payment"],"reason":"prepayment"}`},
		pipeline.StageExtract: {`{"evidence":[{"message_id":"m4","category":"external_payment","quote":"선입금 해주시면"}]}`},
		pipeline.StageJudge:   {`{"label":"abusive","category":"external_payment","severity":4,"confidence":0.9,"action":"restrict","rationale":"prepayment","evidence_ids":["m4"]}`},
	}}
	sink := &captureSink{}
	rev, err := New(Config{}, fr, sink, nil, nil)
	require.NoError(t, err)
	v, err := rev.Review(t.Context(), event("r6"), externalPaymentChat, 1)
	require.NoError(t, err)
	require.True(t, v.InjectionFlagged)
	require.Equal(t, pipeline.LabelAbusive, v.Label)
	require.Equal(t, 1, v.Stages[0].Attempts, "a canary answer is not asked again: the chat would only get another try")
	var tri stages.TriageOutput
	require.NoError(t, json.Unmarshal(v.Stages[0].Output, &tri))
	require.Equal(t, stages.RiskHigh, tri.Risk, "a compromised triage stands in as high risk")
	evs := sink.all()
	require.Equal(t, "canary", evs[0].Payload.(pipeline.InferenceLog).ErrorKind)
	require.Equal(t, "invalid", evs[0].Payload.(pipeline.InferenceLog).Outcome)
	b, _ := json.Marshal(evs)
	require.NotContains(t, string(b), stages.Canary, "canary answers are not logged")
	require.NotContains(t, string(v.Stages[0].Output), stages.Canary, "nor stored")
	// Every system prompt carries the canary; no user prompt does.
	for _, c := range fr.calls {
		require.Contains(t, c.Messages[0].Text, stages.Canary)
		require.NotContains(t, c.Messages[1].Text, stages.Canary)
	}
}

// tickingRouter is a fakeRouter whose every call takes a second of the
// test's clock.
type tickingRouter struct {
	*fakeRouter
	clk *clock.Fake
}

func (r tickingRouter) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	r.clk.Advance(time.Second)
	return r.fakeRouter.Complete(ctx, req)
}

func TestTimesComeFromTheClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	fr := &fakeRouter{answers: map[pipeline.StageName][]string{
		pipeline.StageTriage:  {`{"risk":"high","categories":["external_payment"],"reason":"prepayment"}`},
		pipeline.StageExtract: {`{"evidence":[{"message_id":"m4","category":"external_payment","quote":"선입금 해주시면"}]}`},
		pipeline.StageJudge:   {`{"label":"abusive","category":"external_payment","severity":4,"confidence":0.9,"action":"restrict","rationale":"prepayment","evidence_ids":["m4"]}`},
	}}
	sink := &captureSink{}
	rev, err := New(Config{}, tickingRouter{fr, clk}, sink, nil, clk)
	require.NoError(t, err)
	v, err := rev.Review(t.Context(), event("r-clock"), externalPaymentChat, 1)
	require.NoError(t, err)
	require.True(t, v.StartedAt.Equal(start), "started at %v", v.StartedAt)
	require.True(t, v.FinishedAt.Equal(start.Add(3*time.Second)), "three stages of a second each, finished at %v", v.FinishedAt)
	evs := sink.all()
	require.Len(t, evs, 3)
	for i, ev := range evs {
		require.True(t, ev.OccurredAt.Equal(start.Add(time.Duration(i+1)*time.Second)), "inference log %d at %v", i, ev.OccurredAt)
	}
}

func TestJudgeEvidenceMustExist(t *testing.T) {
	t.Parallel()
	bad := `{"label":"abusive","category":"external_payment","severity":4,"confidence":0.9,"action":"restrict","rationale":"x","evidence_ids":["m99"]}`
	fr := &fakeRouter{answers: map[pipeline.StageName][]string{
		pipeline.StageTriage:  {`{"risk":"high","categories":["external_payment"],"reason":"x"}`},
		pipeline.StageExtract: {`{"evidence":[]}`},
		pipeline.StageJudge:   {bad, bad},
	}}
	rev, err := New(Config{}, fr, nil, nil, nil)
	require.NoError(t, err)
	v, err := rev.Review(t.Context(), event("r7"), externalPaymentChat, 1)
	require.Error(t, err)
	d, _ := pipeline.Classify(err)
	require.Equal(t, pipeline.GiveUp, d, "answers invalid on every attempt: failed, not retried")
	require.Len(t, v.Stages, 3, "failed stages are recorded for the caller")
	require.NotEmpty(t, v.Stages[2].Error)
	require.Equal(t, v.Key.RoomID, "r7")
}

func TestStopEndsReviewWithCause(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{})
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(&pipeline.StoppedError{Reason: "moderator stop"})
	_, err := e.rev.Review(ctx, event("r8"), externalPaymentChat, 1)
	var se *pipeline.StoppedError
	require.ErrorAs(t, err, &se)
	d, _ := pipeline.Classify(err)
	require.Equal(t, pipeline.Stopped, d)

	ctx = pipeline.WithStopCheck(t.Context(), func() error { return &pipeline.StoppedError{Reason: "held"} })
	_, err = e.rev.Review(ctx, event("r8"), externalPaymentChat, 1)
	require.ErrorAs(t, err, &se)
	require.Equal(t, "held", se.Reason)
}

func TestPipelineVersionFollowsModels(t *testing.T) {
	t.Parallel()
	a, err := New(Config{}, &fakeRouter{}, nil, nil, nil)
	require.NoError(t, err)
	require.Equal(t, stages.Fingerprint("fake", ""), a.PipelineVersion())
	require.NotEqual(t, stages.Fingerprint("other", ""), a.PipelineVersion())
	_, err = New(Config{MaxTokens: map[pipeline.StageName]int{"bogus": 5}}, &fakeRouter{}, nil, nil, nil)
	require.ErrorContains(t, err, "unknown stage")
}

func TestPrimaryThrottledFallsBackWithinOneAttemptAndStaysOff(t *testing.T) {
	t.Parallel()
	// The router's cooldown ends when the test moves this clock.
	clk := clock.NewFake(time.Now())
	e := setup(t, envOpts{primFaults: `{"429":1}`, retryAfter: time.Minute, clock: clk})
	start := time.Now()
	v, err := e.rev.Review(t.Context(), event("r9"), externalPaymentChat, 1)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 30*time.Second, "the review must not wait for the primary's cooldown")
	require.Equal(t, pipeline.PoolFallback, v.Stages[0].Pool)
	require.Equal(t, 2, v.Stages[0].Attempts, "answered by the fallback within one extra attempt")
	for _, s := range v.Stages[1:] {
		require.Equal(t, pipeline.PoolFallback, s.Pool)
		require.Equal(t, 1, s.Attempts, "primary is cooling: straight to the fallback")
	}
	require.Equal(t, int64(1), e.prim.Stats(t).ChatRequests(""), "primary called again during its cooldown")
	want := simJudge(t, e.fb.BaseURL, externalPaymentChat)
	require.Equal(t, want.Category, v.Category)

	// After the cooldown the primary is used again.
	e.prim.Configure(t, `{"faults":`+noFaults+`}`)
	clk.Advance(time.Minute + time.Second)
	v, err = e.rev.Review(t.Context(), event("r9b"), externalPaymentChat, 1)
	require.NoError(t, err)
	require.Equal(t, pipeline.PoolPrimary, v.Stages[0].Pool)
}

// TestSampleRoomsUnderPrimaryFaults reviews 200 sample rooms while the
// primary fails 30% of its calls in every way it can. Every event must end
// with a done verdict (a failed review is redelivered, as the queue would),
// and every verdict must be the one the simulator's rules give for the chat.
func TestSampleRoomsUnderPrimaryFaults(t *testing.T) {
	t.Parallel()
	lake, truth := standin.SampleLake(t, 7, 200, 1)
	// Each room's whole chat, through the production chat client from the
	// chat API stand-in serving the lake.
	ccfg := chatapi.DefaultConfig()
	ccfg.BaseURL = standin.StartChatAPILake(t, lake)
	chat, err := chatapi.New(ccfg)
	require.NoError(t, err)
	rooms := map[string][]pipeline.ChatMessage{}
	labels := map[string]standin.Truth{}
	for _, tr := range standin.ReadTruth(t, truth) {
		msgs, err := chat.History(t.Context(), tr.RoomID, tr.FirstMessageAt, tr.LastMessageAt.Add(time.Second))
		require.NoError(t, err, tr.RoomID)
		require.NotEmpty(t, msgs, tr.RoomID)
		rooms[tr.RoomID], labels[tr.RoomID] = msgs, tr
	}
	require.Len(t, rooms, 200)

	e := setup(t, envOpts{
		primFaults: `{"429":0.04,"500":0.06,"503":0.04,"hang":0.04,"drop":0.04,"malformed":0.04,"truncate":0.04}`,
		retryAfter: 200 * time.Millisecond, attemptTimeout: 500 * time.Millisecond,
	})
	ids := make([]string, 0, len(rooms))
	for id := range rooms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	verdicts := make([]pipeline.Verdict, len(ids))
	redeliveries := make([]int, len(ids))
	// A stage whose every attempt drew malformed or truncate (8% of the
	// primary's calls each time) has no usable answer: a failed verdict,
	// not redelivered, by design.
	unusable := make([]bool, len(ids))
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(16)
	for i, id := range ids {
		g.Go(func() error {
			for attempt := 1; attempt <= 5; attempt++ {
				v, err := e.rev.Review(ctx, event(id), rooms[id], attempt)
				if err == nil {
					verdicts[i] = v
					return nil
				}
				if errors.As(err, new(*pipeline.UnusableAnswerError)) {
					unusable[i] = true
					return nil
				}
				if d, _ := pipeline.Classify(err); d != pipeline.RetryLater {
					return fmt.Errorf("room %s: %w", id, err)
				}
				redeliveries[i]++
			}
			return fmt.Errorf("room %s: not done after 5 deliveries", id)
		})
	}
	require.NoError(t, g.Wait())

	agree, redelivered, failed := 0, 0, 0
	for i, id := range ids {
		if unusable[i] {
			failed++
			continue
		}
		v := verdicts[i]
		require.Equal(t, pipeline.StatusDone, v.Status, id)
		want := simJudge(t, e.fb.BaseURL, rooms[id])
		require.Equal(t, want.Label, v.Label, "room %s (%s)", id, labels[id].Scenario)
		require.Equal(t, want.Category, v.Category, "room %s (%s)", id, labels[id].Scenario)
		if v.Label == labels[id].Label && v.Category == labels[id].Category {
			agree++
		}
		if redeliveries[i] > 0 {
			redelivered++
		}
	}
	stats := e.prim.Stats(t)
	faults := stats.ChatRequests("") - stats.ChatRequests(standin.OutcomeOK)
	t.Logf("%d rooms done, %d failed for unusable answers; %d needed a redelivery; primary: %d calls, %d faulted; fallback: %d calls; agreement with ground truth %d/200; injections flagged %v",
		len(ids)-failed, failed, redelivered, stats.ChatRequests(""), faults, e.fb.Stats(t).ChatRequests(""), agree, testutil.ToFloat64(e.rev.m.injections))
	// About 4e-5 of stages draw four content faults in a row.
	require.LessOrEqual(t, failed, 2, "failed for unusable answers")
	require.Positive(t, faults, "the primary must actually have faulted")
}
