package chatprep

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

var t0 = time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC)

func msg(id string, min int, role pipeline.SenderRole, kind pipeline.MessageKind, text string) pipeline.ChatMessage {
	m := pipeline.ChatMessage{MessageID: id, SenderID: "u" + id, SenderRole: role, SentAt: t0.Add(time.Duration(min) * time.Minute), Kind: kind, Text: text}
	if kind == pipeline.KindImage {
		m.Text = ""
		m.ImageURL = text
	}
	return m
}

func ids(ms []pipeline.ChatMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.MessageID
	}
	return out
}

func TestPrepareOrdersAndDropsNoise(t *testing.T) {
	t.Parallel()
	in := []pipeline.ChatMessage{
		msg("m3", 3, pipeline.RoleSeller, pipeline.KindText, "네 판매중이에요"),
		msg("m1", 1, pipeline.RoleSystem, pipeline.KindSystem, "구매자가 채팅방에 들어왔습니다"),
		msg("m2", 2, pipeline.RoleBuyer, pipeline.KindText, "아직 있나요?"),
		msg("m4", 4, pipeline.RoleSystem, pipeline.KindSystem, "안전결제가 완료되었습니다"),
		msg("m5", 5, pipeline.RoleBuyer, pipeline.KindText, "   "),
		msg("m2", 2, pipeline.RoleBuyer, pipeline.KindText, "아직 있나요?"),
		msg("m6", 6, pipeline.RoleSeller, pipeline.KindImage, "https://img.test/a.jpg"),
		msg("m7", 7, pipeline.RoleSeller, pipeline.KindImage, "javascript:alert(1)"),
	}
	w := Prepare(in, Config{})
	require.Equal(t, []string{"m2", "m3", "m4", "m6"}, ids(w.Messages))
	require.Equal(t, 4, w.NoiseDropped)
	require.Equal(t, []Image{{MessageID: "m6", URL: "https://img.test/a.jpg"}}, w.Images)
	require.True(t, w.HasMessage("m4"))
	require.False(t, w.HasMessage("m1"))
	require.True(t, w.HasImage("m6"))
	require.Empty(t, w.Signals)
	require.Zero(t, w.Cut.Messages)
	require.Equal(t, "m3", in[0].MessageID, "input must not be reordered")
}

func TestPrepareBudgetKeepsHeadAndTail(t *testing.T) {
	t.Parallel()
	var in []pipeline.ChatMessage
	for i := range 200 {
		in = append(in, msg(fmt.Sprintf("m%03d", i), i, pipeline.RoleBuyer, pipeline.KindText, strings.Repeat("가", 40)))
	}
	// The phone number sits in a message the budget cuts: its signal must
	// survive.
	in[100].Text = "제 번호 010-1234-5678"
	w := Prepare(in, Config{MaxTokens: 1000, KeepFirst: 3})
	require.LessOrEqual(t, w.Tokens, 1000)
	got := ids(w.Messages)
	require.Equal(t, []string{"m000", "m001", "m002"}, got[:3])
	require.Equal(t, "m199", got[len(got)-1])
	require.Equal(t, 200-len(got), w.Cut.Messages)
	require.Equal(t, "m003", w.Cut.FirstID)
	require.Equal(t, fmt.Sprintf("m%03d", 199-(len(got)-3)), w.Cut.LastID)
	require.Positive(t, w.Cut.Tokens)
	require.False(t, w.HasMessage("m100"))
	require.Equal(t, []kv{{SignalPhone, "*********78"}}, kvs(w.Signals))
	require.Equal(t, "m100", w.Signals[0].MessageID)
	require.True(t, w.Signals[0].Cut, "the models do not see m100")
}

func TestPrepareTruncatesHugeMessageAndCapsImages(t *testing.T) {
	t.Parallel()
	in := []pipeline.ChatMessage{msg("big", 0, pipeline.RoleBuyer, pipeline.KindText, strings.Repeat("a", 5000))}
	for i := range 5 {
		in = append(in, msg(fmt.Sprintf("i%d", i), i+1, pipeline.RoleSeller, pipeline.KindImage, fmt.Sprintf("https://img.test/%d.jpg", i)))
	}
	w := Prepare(in, Config{MaxImages: 2})
	require.Equal(t, 1, w.Truncated)
	require.Less(t, len(w.Messages[0].Text), 1100)
	require.Equal(t, 3, w.ImagesDropped)
	require.Equal(t, []string{"i3", "i4"}, []string{w.Images[0].MessageID, w.Images[1].MessageID})
}

// kv is a signal's kind and value, what the signal tests compare.
type kv struct {
	Kind  SignalKind
	Value string
}

func kvs(ss []Signal) []kv {
	var out []kv
	for _, s := range ss {
		out = append(out, kv{s.Kind, s.Value})
	}
	return out
}

func TestFindSignals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want []kv
	}{
		{"plain phone", "문자로 주셔도 돼요 010-1234-5678", []kv{{SignalPhone, "*********78"}, {SignalMessenger, "문자로"}}},
		{"dotted phone", "call 010.9876.5432 please", []kv{{SignalPhone, "*********32"}}},
		{"spaced digits", "Or text me: 0 1 0 5 5 5 5 1 2 3 4", []kv{{SignalPhone, "*********34"}, {SignalMessenger, "text me"}}},
		{"hangul digits", "공일공-일이삼사-오육칠팔 로 연락", []kv{{SignalPhone, "*********78"}}},
		{"mixed hangul", "010 일이삼사 5678", []kv{{SignalPhone, "*********78"}}},
		{"hangul vowel as a dash", "010 ㅡ 1234 ㅡ 5678", []kv{{SignalPhone, "*********78"}}},
		{"hangul words are not digits", "제 번호 010-1234-5678 이 맞아요 사이즈 이거", []kv{{SignalPhone, "*********78"}}},
		{"bank account", "국민은행 123456-12-123456 김민수 입니다", []kv{{SignalBankAccount, "국민은행 ************56"}}},
		{"card", "4111-1111-1111-1111 입니다", []kv{{SignalCardNumber, "**************11"}}},
		{"card without luhn is nothing", "1234-5678-9012-3456 입니다", nil},
		{"tracking number is not an account", "CJ대한통운 송장번호 1234-5678-9012 입니다", nil},
		{"price and otp are nothing", "가격 820,000원이고 인증번호 123456", nil},
		{"phish url", "안전결제 링크입니다 https://bunjang-pay.safe24.xyz/pay?order=123456 30분", []kv{{SignalURL, "bunjang-pay.safe24.xyz"}, {SignalPaymentLink, "bunjang-pay.safe24.xyz"}}},
		{"bare domain", "go to kaka0-pay.com/refund now", []kv{{SignalURL, "kaka0-pay.com"}, {SignalPaymentLink, "kaka0-pay.com"}}},
		{"kakao id", "앱이 느려서 그런데 카톡으로 얘기해요 아이디 deal8282", []kv{{SignalMessengerID, "de******"}}},
		{"spaced kakao id", "let's talk on K.talk. My ID is d e a l 8 2 8 2", []kv{{SignalMessengerID, "de******"}}},
		{"telegram handle", "텔레그램 @fastdeal_kr 으로 연락주세요", []kv{{SignalMessengerID, "@fa******_**"}}},
		{"messenger mention", "혹시 카톡 되세요? 그게 편해서요", []kv{{SignalMessenger, "카톡"}}},
		{"open chat", "오픈채팅방 https://open.kakao.com/o/sAbc123 들어오시면", []kv{{SignalURL, "open.kakao.com"}, {SignalMessengerID, "open.kakao.com/o/sa*****"}}},
		{"television is not telegram", "텔레비전 팔아요", nil},
		{"email is not a handle", "mail me at kim@example.org", []kv{{SignalEmail, "k**@example.org"}}},
		{"safe payment talk", "네 앱 안에서 안전결제 버튼 눌러서 결제해주세요", nil},
		{"id card is not a messenger id", "신분증 ID card 사진 보내주세요", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, kvs(FindSignals("m", tc.text)))
		})
	}
}

func TestMaskNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"call 010-1234-5678 now", "call ***-****-**78 now"},
		{"국민 123456-12-123456", "국민 ******-**-****56"},
		{"공일공-일이삼사-오육칠팔", "***-****-**칠팔"},
		{"price 820,000 and otp 123456", "price 820,000 and otp 123456"},
		{`{"quote":"010 1234 5678"}`, `{"quote":"*** **** **78"}`},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, MaskNumbers(tc.in), tc.in)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, Config{}.Validate())
	err := Config{MaxTokens: 10, KeepFirst: -1, MaxImages: 20}.Validate()
	require.ErrorContains(t, err, "max tokens")
	require.ErrorContains(t, err, "keep first")
	require.ErrorContains(t, err, "max images")
}

func FuzzFindSignals(f *testing.F) {
	f.Add("010-1234-5678 카톡 아이디 deal8282 https://x.xyz/a")
	f.Add("공일공 일이삼사 오육칠팔")
	f.Add("\xff\xfe010-1234-5678")
	f.Fuzz(func(t *testing.T, s string) {
		sigs := FindSignals("m", s)
		masked := MaskNumbers(s)
		for _, sg := range sigs {
			switch sg.Kind {
			case SignalPhone, SignalBankAccount, SignalCardNumber:
				require.True(t, strings.HasPrefix(sg.Value, "*"), "numbers must be masked: %q", sg.Value)
			}
		}
		// Masking is idempotent on its own output and never finds a
		// maskable number it left unmasked.
		require.Equal(t, masked, MaskNumbers(masked))
	})
}

func BenchmarkPrepare(b *testing.B) {
	var in []pipeline.ChatMessage
	for i := range 60 {
		in = append(in, msg(fmt.Sprintf("m%03d", i), 60-i, pipeline.RoleBuyer, pipeline.KindText, "안녕하세요 국민은행 123456-12-123456 으로 선입금 해주세요 카톡 아이디 deal8282 https://kaka0-pay.com/pay"))
	}
	b.ReportAllocs()
	for b.Loop() {
		w := Prepare(in, Config{})
		if len(w.Signals) == 0 {
			b.Fatal("no signals")
		}
	}
}

// BenchmarkRedact is the masking every stage answer's strings go through
// (pipeline/review's redactOutput): a rationale that quotes a phone number
// and an account, one with digits that are nothing, and one without digits.
func BenchmarkRedact(b *testing.B) {
	texts := []string{
		"판매자가 국민은행 123456-12-123456 계좌로 선입금을 요구하고 010-1234-5678 로 문자하라고 함 (m003, m007)",
		"구매자가 2만5천원에 3개 구매 의사를 밝히고 11월 3일 14시 직거래 약속 (m001, m002)",
		"외부 메신저로 유도하는 정황 없음, 안전결제 사용 권유",
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range texts {
			_ = Redact(s)
		}
	}
}
