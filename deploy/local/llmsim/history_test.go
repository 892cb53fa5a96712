package llmsim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

func withHistory(prompt string, lines ...pipeline.HistoryCount) string {
	return prompt + "\n" + stages.HistoryBlock(pipeline.HistorySeen{Status: pipeline.HistoryOK, Days: 30, Lines: lines})
}

func sellerAbusive(rooms int, overturned bool) pipeline.HistoryCount {
	return pipeline.HistoryCount{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Rooms: rooms, Overturned: overturned}
}

func judgeWith(t *testing.T, prompt string) stages.JudgeOutput {
	t.Helper()
	var out stages.JudgeOutput
	require.NoError(t, json.Unmarshal([]byte(stageAnswer(pipeline.StageJudge, prompt, nil)), &out))
	return out
}

// TestHistoryRulesWeighTheOffendersPast: the simulator's history rules. A
// seller's weak payment word is clean alone, suspicious with one earlier
// abusive room, and a bank-transfer request (suspicious alone) abusive
// with three; overturned rooms, the other role's past and history without
// any signal change nothing.
func TestHistoryRulesWeighTheOffendersPast(t *testing.T) {
	t.Parallel()
	opening := []line{{"b", "안녕하세요 아직 판매중인가요?", ""}}
	weak := transcript(append(opening, line{"s", "네 입금 확인되면 보내드려요", ""})...)
	require.Equal(t, pipeline.LabelClean, judgeWith(t, weak).Label)
	got := judgeWith(t, withHistory(weak, sellerAbusive(1, false)))
	require.Equal(t, pipeline.LabelSuspicious, got.Label)
	require.Equal(t, pipeline.RoleSeller, got.OffenderRole)
	require.Contains(t, got.Rationale, "seller in 1 earlier abusive rooms")
	require.Equal(t, pipeline.LabelClean, judgeWith(t, withHistory(weak, sellerAbusive(5, true))).Label, "overturned rooms are not abuse")
	buyerPast := sellerAbusive(5, false)
	buyerPast.Role = pipeline.RoleBuyer
	require.Equal(t, pipeline.LabelClean, judgeWith(t, withHistory(weak, buyerPast)).Label, "the buyer's past says nothing about the seller's words")

	transfer := transcript(append(opening, line{"s", "계좌이체로 해주세요", ""})...)
	require.Equal(t, pipeline.LabelSuspicious, judgeWith(t, transfer).Label)
	require.Equal(t, pipeline.LabelSuspicious, judgeWith(t, withHistory(transfer, sellerAbusive(2, false))).Label)
	require.Equal(t, pipeline.LabelAbusive, judgeWith(t, withHistory(transfer, sellerAbusive(2, false), sellerAbusive(1, false))).Label)

	plain := transcript(append(opening, line{"s", "네 판매중이에요", ""})...)
	require.Equal(t, pipeline.LabelClean, judgeWith(t, withHistory(plain, sellerAbusive(40, false))).Label, "history alone never labels a chat")
	var triage stages.TriageOutput
	require.NoError(t, json.Unmarshal([]byte(stageAnswer(pipeline.StageTriage, withHistory(plain, sellerAbusive(40, false)), nil)), &triage))
	require.Equal(t, stages.RiskNone, triage.Risk)
}

// TestHistoryRulesDoNotChangeTheCachedAnalysis: the server caches the
// transcript's analysis; a request with history must not change what a
// later request without it gets.
func TestHistoryRulesDoNotChangeTheCachedAnalysis(t *testing.T) {
	t.Parallel()
	a := Analysis{Signals: []Signal{{MessageID: "m2", Category: pipeline.CategoryExternalPayment, Severity: 1, Role: pipeline.RoleSeller}}}
	raised := applyHistory(a, []pipeline.HistoryCount{sellerAbusive(1, false)})
	require.Equal(t, 2, raised.Signals[0].Severity)
	require.Equal(t, 1, a.Signals[0].Severity)
	require.True(t, strings.HasPrefix(raised.HistoryNote, "Account history weighed"))
	require.Empty(t, a.HistoryNote)
}
