package review

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// The window's rule-signal kinds are recorded with the verdict, sorted,
// once each and without their values: what the protective-action
// policy's signals_any matches; a window without one records none.
func TestTheRuleSignalKindsAreRecordedWithTheVerdict(t *testing.T) {
	t.Parallel()
	rev, err := New(Config{}, &fakeRouter{answers: prepaymentAnswers}, nil, nil, nil)
	require.NoError(t, err)
	msgs := chat("buyer: 아직 판매중인가요?", "seller: 선입금은 국민은행 123-456-789012 로 해주세요", "seller: 010-1234-5678 로 문자 주세요", "seller: 010-9876-5432 도 돼요")
	v, err := rev.Review(t.Context(), event("r-sig"), msgs, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"bank_account", "messenger", "phone", "prepayment"}, pipeline.RecordedSignalKinds(v.Stages))
	require.NotContains(t, string(v.Stages[0].Output), "5678")

	rev, err = New(Config{}, &fakeRouter{answers: prepaymentAnswers}, nil, nil, nil)
	require.NoError(t, err)
	v, err = rev.Review(t.Context(), event("r-none"), chat("buyer: 아직 판매중인가요?", "seller: 네 판매중이에요"), 1)
	require.NoError(t, err)
	require.Nil(t, pipeline.RecordedSignalKinds(v.Stages))
}
