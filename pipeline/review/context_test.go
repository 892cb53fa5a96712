package review

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/stages"
)

// withContext returns the window's messages after the room's messages from
// before the window start (ids c1, c2, …, minutes before at0).
func withContext(window []pipeline.ChatMessage, before ...string) []pipeline.ChatMessage {
	ctx := chat(before...)
	for i := range ctx {
		ctx[i].MessageID = "c" + ctx[i].MessageID[1:]
		ctx[i].SentAt = at0.Add(-time.Duration(len(ctx)-i) * time.Minute)
		ctx[i].Context = true
	}
	return append(ctx, window...)
}

// TestContextIsShownButNeverEvidence reviews a window whose scam began
// before it, through the real router and a pool that pseudonymizes: the
// models see the context in its own block, with its contact details
// replaced as the window's are; an answer citing a context message loses
// that id (counted), so the verdict's evidence and subjects are the
// window's only.
func TestContextIsShownButNeverEvidence(t *testing.T) {
	t.Parallel()
	pool := &scriptedPool{answers: map[pipeline.StageName][]string{
		pipeline.StageTriage:  {`{"risk":"high","categories":["external_payment"],"reason":"prepayment asked before the window"}`},
		pipeline.StageExtract: {`{"evidence":[{"message_id":"c1","category":"external_payment","quote":"선입금"},{"message_id":"m2","category":"external_payment","quote":"입금 확인되면"}]}`},
		pipeline.StageJudge:   {`{"label":"abusive","category":"external_payment","severity":4,"confidence":0.9,"action":"restrict","rationale":"prepayment scam","evidence_ids":["c1","m2"],"offender_role":"seller"}`},
	}, calls: map[pipeline.StageName]int{}}
	srv := httptest.NewServer(pool)
	t.Cleanup(srv.Close)
	router, err := llm.New(llm.Config{
		Primary:     llm.PoolConfig{BaseURL: srv.URL + "/v1", Model: "scripted", MaxConcurrency: 4, AttemptTimeout: 10 * time.Second, Pseudonymize: true},
		MaxAttempts: 2, BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
	}, prometheus.NewRegistry())
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	rev, err := New(Config{}, completerOnly{router}, nil, reg, nil)
	require.NoError(t, err)

	msgs := withContext(chat("buyer: 네 지금 입금했어요", "seller: 입금 확인되면 바로 보내드릴게요"),
		"seller: 국민은행 123456-78-901234 로 선입금 부탁드려요 연락은 010-4821-3397",
		"buyer: 네 알겠습니다")
	msgs[0].SenderID, msgs[3].SenderID = "seller-1", "seller-1"
	v, err := rev.Review(t.Context(), event("context-room"), msgs, 1)
	require.NoError(t, err)

	require.Equal(t, pipeline.LabelAbusive, v.Label)
	require.Equal(t, []string{"m2"}, v.EvidenceIDs, "a context id is dropped from the verdict")
	require.Equal(t, []string{"seller-1"}, v.Subjects)
	for _, st := range v.Stages {
		require.NotContains(t, string(st.Output), `"c1"`, "%s stored a context id", st.Stage)
	}
	require.InDelta(t, 1, testutil.ToFloat64(rev.cm.dropped.WithLabelValues("extract")), 0)
	require.InDelta(t, 1, testutil.ToFloat64(rev.cm.dropped.WithLabelValues("judge")), 0)
	require.InDelta(t, 2, testutil.ToFloat64(rev.cm.shown), 0)

	pool.mu.Lock()
	prompts := strings.Join(pool.prompts, "\n")
	pool.mu.Unlock()
	for _, secret := range []string{"123456-78-901234", "010-4821-3397", "4821"} {
		require.NotContains(t, prompts, secret, "context contact details are pseudonymized like the window's")
	}
	ctxLines, err := stages.ParseContext(prompts)
	require.NoError(t, err)
	require.Equal(t, []string{"c1", "c2"}, []string{ctxLines[0].ID, ctxLines[1].ID})
	require.Contains(t, stages.UnmarkData(ctxLines[0].Text), "<ACCOUNT_1>")
	window, err := stages.ParseTranscript(prompts)
	require.NoError(t, err)
	require.Len(t, window, 2, "the transcript is the window")
}

// TestSignalsOnlyInContextDoNotHoldTheEarlyExit: a bank account given
// before the window was already reviewed; a benign window after it ends
// early as clean when triage sees no risk. The same message inside the
// window keeps the review going to the judge.
func TestSignalsOnlyInContextDoNotHoldTheEarlyExit(t *testing.T) {
	t.Parallel()
	scam := "seller: 국민은행 123456-78-901234 로 선입금 부탁드려요"
	answers := map[pipeline.StageName][]string{
		pipeline.StageTriage:  {`{"risk":"none","categories":[],"reason":"greetings"}`},
		pipeline.StageExtract: {`{"evidence":[]}`},
		pipeline.StageJudge:   {`{"label":"clean","category":"clean","severity":1,"confidence":0.8,"action":"none","rationale":"x","evidence_ids":[],"offender_role":"none"}`},
	}
	fr := &fakeRouter{answers: answers}
	rev, err := New(Config{}, fr, nil, nil, nil)
	require.NoError(t, err)
	v, err := rev.Review(t.Context(), event("r"), withContext(chat("buyer: 감사합니다 좋은 하루 되세요"), scam), 1)
	require.NoError(t, err)
	require.True(t, v.EarlyExit, "a signal in context only does not hold the early exit")
	require.Len(t, fr.calls, 1)

	fr = &fakeRouter{answers: answers}
	rev, err = New(Config{}, fr, nil, nil, nil)
	require.NoError(t, err)
	v, err = rev.Review(t.Context(), event("r"), chat(scam, "buyer: 감사합니다 좋은 하루 되세요"), 1)
	require.NoError(t, err)
	require.False(t, v.EarlyExit, "the same signal in the window does")
	require.Len(t, fr.calls, 3)
}

// TestAnUnknownIDIsStillInvalid: only context ids are dropped; an id the
// models never saw makes the answer invalid, as before.
func TestAnUnknownIDIsStillInvalid(t *testing.T) {
	t.Parallel()
	fr := &fakeRouter{answers: map[pipeline.StageName][]string{
		pipeline.StageTriage:  {`{"risk":"high","categories":["spam"],"reason":"x"}`},
		pipeline.StageExtract: {`{"evidence":[{"message_id":"zz","category":"spam","quote":"x"}]}`, `{"evidence":[{"message_id":"c1","category":"spam","quote":"x"}]}`},
		pipeline.StageJudge:   {`{"label":"suspicious","category":"spam","severity":2,"confidence":0.6,"action":"warn","rationale":"x","evidence_ids":["c1"],"offender_role":"seller"}`},
	}}
	reg := prometheus.NewRegistry()
	rev, err := New(Config{}, fr, nil, reg, nil)
	require.NoError(t, err)
	v, err := rev.Review(t.Context(), event("r"), withContext(chat("seller: 광고 보고 연락주세요"), "seller: 홍보합니다"), 1)
	require.NoError(t, err)
	require.Equal(t, []string{}, v.EvidenceIDs)
	require.Empty(t, v.Subjects)
	require.InDelta(t, 1, testutil.ToFloat64(rev.cm.dropped.WithLabelValues("extract")), 0, "the repaired answer's context id")
}

// refusingOnce refuses the first call for the context length, then
// answers from its fake router; it keeps every prompt.
type refusingOnce struct {
	*fakeRouter
	refused bool
}

func (r *refusingOnce) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if !r.refused {
		r.refused = true
		r.calls = append(r.calls, req)
		return llm.Response{}, &llm.ContextLengthError{Limit: 3000, Requested: 4000, Err: errors.New("too long")}
	}
	return r.fakeRouter.Complete(ctx, req)
}

// TestAShrinkCutsContextBeforeTheWindow: a pool refuses the prompt for its
// length; the smaller prompt it is sent next lost context messages, the
// oldest first, and kept every window message.
func TestAShrinkCutsContextBeforeTheWindow(t *testing.T) {
	t.Parallel()
	var before []string
	for i := range 20 {
		before = append(before, fmt.Sprintf("buyer: 이전 대화 %d %s", i, strings.Repeat("가나다라", 20)))
	}
	window := chat("buyer: 아직 판매중인가요?", "seller: 네 판매중이에요", "buyer: 감사합니다")
	rr := &refusingOnce{fakeRouter: &fakeRouter{answers: map[pipeline.StageName][]string{
		pipeline.StageTriage: {`{"risk":"none","categories":[],"reason":"x"}`},
	}}}
	rev, err := New(Config{}, rr, nil, nil, nil)
	require.NoError(t, err)
	v, err := rev.Review(t.Context(), event("r"), withContext(window, before...), 1)
	require.NoError(t, err)
	require.True(t, v.EarlyExit)
	require.Len(t, rr.calls, 2)

	first, second := rr.calls[0].Messages[1].Text, rr.calls[1].Messages[1].Text
	c1, err := stages.ParseContext(first)
	require.NoError(t, err)
	require.Len(t, c1, 20, "everything fitted the default budget")
	c2, err := stages.ParseContext(second)
	require.NoError(t, err)
	require.Less(t, len(c2), 20, "the shrink cut context")
	require.Equal(t, c1[len(c1)-len(c2):], c2, "the newest context stays")
	w2, err := stages.ParseTranscript(second)
	require.NoError(t, err)
	require.Len(t, w2, 3, "no window message was cut")
	require.Contains(t, second, fmt.Sprintf("(%d older ones were left out for length)", 20-len(c2)))
}

// TestContextOnlySendersTakeNoPart: someone who spoke only before the
// window (a context message) is no participant of the verdict and is not
// asked about in the account history; the window's senders are.
func TestContextOnlySendersTakeNoPart(t *testing.T) {
	t.Parallel()
	fh := &fakeHistory{seen: pipeline.HistorySeen{Status: pipeline.HistoryOK, Days: 30}}
	rev, err := New(Config{History: fh}, &fakeRouter{answers: prepaymentAnswers}, nil, nil, nil)
	require.NoError(t, err)
	msgs := withContext(chat("buyer: 아직 판매중인가요?", "seller: 네 선입금 해주시면 바로 보내드려요"),
		"buyer: 저도 사고 싶어요", "seller: 예약됐어요")
	msgs[0].SenderID = "earlier-buyer" // spoke only before the window
	v, err := rev.Review(t.Context(), event("ctx-participants"), msgs, 1)
	require.NoError(t, err)

	want := []pipeline.HistoryAccount{{SenderID: "ubuyer", Role: pipeline.RoleBuyer}, {SenderID: "useller", Role: pipeline.RoleSeller}}
	require.ElementsMatch(t, want, v.Participants)
	require.Len(t, fh.accounts, 1)
	require.ElementsMatch(t, want, fh.accounts[0])
}
