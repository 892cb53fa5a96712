package review

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/accounthistory"
	"github.com/chatguard/chatguard/stages"
	"github.com/chatguard/chatguard/storage/storetest"
)

// fakeHistory answers every lookup with seen and records what it was
// asked.
type fakeHistory struct {
	seen pipeline.HistorySeen

	mu       sync.Mutex
	rooms    []string
	accounts [][]pipeline.HistoryAccount
}

func (f *fakeHistory) Lookup(_ context.Context, room string, accounts []pipeline.HistoryAccount) pipeline.HistorySeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rooms = append(f.rooms, room)
	f.accounts = append(f.accounts, accounts)
	return f.seen
}

var prepaymentAnswers = map[pipeline.StageName][]string{
	pipeline.StageTriage:  {`{"risk":"high","categories":["external_payment"],"reason":"x"}`},
	pipeline.StageExtract: {`{"evidence":[]}`},
	pipeline.StageJudge:   {`{"label":"abusive","category":"external_payment","severity":4,"confidence":0.9,"action":"restrict","rationale":"x","evidence_ids":["m2"],"offender_role":"seller"}`},
}

// recordedHistory is the account_history the verdict's first stage
// recorded, and whether there is one.
func recordedHistory(t *testing.T, v pipeline.Verdict) (pipeline.HistorySeen, bool) {
	t.Helper()
	require.NotEmpty(t, v.Stages)
	var out struct {
		History *pipeline.HistorySeen `json:"account_history"`
	}
	require.NoError(t, json.Unmarshal(v.Stages[0].Output, &out))
	if out.History == nil {
		return pipeline.HistorySeen{}, false
	}
	return *out.History, true
}

// TestHistoryReachesEveryStageAndTheVerdict: the room's buyer and seller
// accounts (most messages first, never a system line) are asked about
// for this room, every stage's prompt carries the block, and the first
// stage's stored output records what was seen, ids nowhere.
func TestHistoryReachesEveryStageAndTheVerdict(t *testing.T) {
	t.Parallel()
	lines := []pipeline.HistoryCount{{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Rooms: 7}}
	fh := &fakeHistory{seen: pipeline.HistorySeen{Status: pipeline.HistoryOK, Days: 30, Lines: lines}}
	fr := &fakeRouter{answers: prepaymentAnswers}
	rev, err := New(Config{History: fh}, fr, nil, nil, nil)
	require.NoError(t, err)
	msgs := chat("buyer: 아직 판매중인가요?", "seller: 네 선입금 해주시면 바로 보내드려요", "system: 거래가 예약되었습니다", "seller: 입금 확인되면 보내요")
	v, err := rev.Review(t.Context(), event("r-hist"), msgs, 1)
	require.NoError(t, err)

	require.Equal(t, []string{"r-hist"}, fh.rooms)
	require.Equal(t, []pipeline.HistoryAccount{{SenderID: "useller", Role: pipeline.RoleSeller}, {SenderID: "ubuyer", Role: pipeline.RoleBuyer}}, fh.accounts[0])
	require.Len(t, fr.calls, 3)
	for _, c := range fr.calls {
		user := c.Messages[1].Text
		require.Equal(t, lines, stages.ParseHistoryBlock(user), c.Stage)
	}
	got, ok := recordedHistory(t, v)
	require.True(t, ok)
	require.Equal(t, fh.seen, got)
	require.Equal(t, pipeline.StageTriage, v.Stages[0].Stage)
	require.NotContains(t, string(v.Stages[0].Output), "useller")
	var triage stages.TriageOutput
	require.NoError(t, json.Unmarshal(v.Stages[0].Output, &triage), "the answer is still there beside it")
	require.Equal(t, stages.RiskHigh, triage.Risk)
}

// TestHistoryThatDidNotAnswerIsRecordedAndNotShown: a lookup that timed
// out gives the prompts no block and the verdict records the timeout; an
// empty history likewise shows nothing and records "ok" with no lines;
// with the history off nothing is asked or recorded.
func TestHistoryThatDidNotAnswerIsRecordedAndNotShown(t *testing.T) {
	t.Parallel()
	for _, seen := range []pipeline.HistorySeen{
		{Status: pipeline.HistoryTimeout, Days: 30, Lines: []pipeline.HistoryCount{}},
		{Status: pipeline.HistoryOK, Days: 30, Lines: []pipeline.HistoryCount{}},
	} {
		fr := &fakeRouter{answers: prepaymentAnswers}
		rev, err := New(Config{History: &fakeHistory{seen: seen}}, fr, nil, nil, nil)
		require.NoError(t, err)
		v, err := rev.Review(t.Context(), event("r-hist-none"), externalPaymentChat, 1)
		require.NoError(t, err)
		for _, c := range fr.calls {
			require.NotContains(t, c.Messages[1].Text, stages.HistoryOpen)
		}
		got, ok := recordedHistory(t, v)
		require.True(t, ok)
		require.Equal(t, seen, got)
	}

	fr := &fakeRouter{answers: prepaymentAnswers}
	rev, err := New(Config{}, fr, nil, nil, nil)
	require.NoError(t, err)
	v, err := rev.Review(t.Context(), event("r-hist-off"), externalPaymentChat, 1)
	require.NoError(t, err)
	_, ok := recordedHistory(t, v)
	require.False(t, ok)
	require.False(t, strings.Contains(fr.calls[0].Messages[1].Text, stages.HistoryOpen))
}

// TestSimulatorWeighsTheSellersHistory: end to end through the LLM
// simulator (whose history rules are its own, not a model's): a seller's
// bare payment word is clean without history and suspicious once the
// seller was the subject of an abusive verdict in another room; the
// verdict records the history it was shown.
func TestSimulatorWeighsTheSellersHistory(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{})
	msgs := chat("buyer: 안녕하세요 아직 판매중인가요?", "seller: 네 입금 확인되면 보내드려요")
	v, err := e.rev.Review(t.Context(), event("r-hist-sim"), msgs, 1)
	require.NoError(t, err)
	require.Equal(t, pipeline.LabelClean, v.Label)

	h := &storetest.History{}
	h.Add(storetest.HistoryRecord{Room: "r-earlier", Sender: "useller", Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, DecidedAt: at0.Add(-time.Hour)})
	h.Add(storetest.HistoryRecord{Room: "r-hist-sim", Sender: "useller", Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, DecidedAt: at0.Add(-2 * time.Hour)})
	lookup, err := accounthistory.New(accounthistory.DefaultConfig(), h, clock.NewFake(at0.Add(2*time.Hour)), nil)
	require.NoError(t, err)
	rev, err := New(Config{History: lookup}, e.router, nil, nil, nil)
	require.NoError(t, err)
	v, err = rev.Review(t.Context(), event("r-hist-sim"), msgs, 1)
	require.NoError(t, err)
	require.Equal(t, pipeline.LabelSuspicious, v.Label)
	require.Equal(t, []string{"useller"}, v.Subjects)
	seen, ok := recordedHistory(t, v)
	require.True(t, ok)
	require.Equal(t, []pipeline.HistoryCount{{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Rooms: 1}}, seen.Lines,
		"the room under review does not count itself")
}
