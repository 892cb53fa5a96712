package chatprep

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A depositor-name request masks the name however it is introduced
// (after 입금자명/예금주/성함, in quotes, before 이름/명의) and never the
// grammatical particles around it.
func TestRedactMasksDepositorNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"입금하실 때 입금자명을 '서하은' 이름으로 바꿔서 보내주세요", "입금하실 때 입금자명을 '서**' 이름으로 바꿔서 보내주세요"},
		{"입금자명은 김민준으로 해주세요", "입금자명은 김**으로 해주세요"},
		{"예금주: 박서연 (국민)", "예금주: 박** (국민)"},
		{`입금자 이름을 "최지우"로 적어주세요`, `입금자 이름을 "최**"로 적어주세요`},
		{"보내는 분 성함 홍길동으로 해주세요", "보내는 분 성함 홍**으로 해주세요"},
		{"정민호 명의로 된 계좌입니다", "정** 명의로 된 계좌입니다"},
		{"송금할 때 ‘이도윤’ 이름으로 보내주세요", "송금할 때 ‘이**’ 이름으로 보내주세요"},
		{"이름이 남궁민수예요", "이름이 남***예요"},
		{"입금자명 '하은이네'로 부탁드려요", "입금자명 '하***'로 부탁드려요"},
		{"입금자명: 김철수", "입금자명: 김**"},
		{"예금주는 박민수 입니다", "예금주는 박** 입니다"},
		{"예금주 홍길동 으로 보내주세요", "예금주 홍** 으로 보내주세요"},
		{"받는분 이영희, 010-1234-5678", "받는분 이**, ***-****-**78"},
		{"my name is John Smith.", "my name is J*** *****."},
	} {
		require.Equal(t, tc.want, Redact(tc.in), tc.in)
	}
}

// Hard negatives: words around a name keyword that are no name stay as
// written.
func TestRedactLeavesNonNamesAlone(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"이름 알려주세요",
		"네고 가능한가요",
		"성함이 어떻게 되세요?",
		"입금자명을 정확히 적어주세요",
		"입금하실 때 입금자명 꼭 확인해주세요",
		"예금주 이름으로 보내주세요",
		"본인 명의 계좌로만 가능해요",
		"제 이름으로 입금할게요",
		"받는 분 성함 알려주시면 보내드릴게요",
		"이름은 나중에 알려드릴게요",
		"실명 인증 필요해요",
		"명의 변경은 안돼요",
		"안전결제 이름으로 된 링크 보내드릴게요",
		"입금자명 변경 부탁드려요",
		"예금주 정보 다시 확인해주세요",
		"받는분 주소 알려주세요",
		"성함 주세요",
		"엄마 명의로 된 통장이에요",
		"남편 이름으로 보낼게요",
	} {
		require.Equal(t, in, Redact(in), in)
	}
}
