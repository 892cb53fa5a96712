package chatprep

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

const script = "앱이 너무 느려서요 카톡으로 얘기해요 아이디 deal8282 입니다. 선입금 해주시면 바로 발송해 드릴게요"

func sharesBand(a, b CampaignPrint) bool {
	for i := range a.Bands {
		if i < len(b.Bands) && a.Bands[i] == b.Bands[i] {
			return true
		}
	}
	return false
}

// TestScriptVariantsShareAMark: the ways a pasted script is varied to
// dodge filters keep at least one band in common with the original.
func TestScriptVariantsShareAMark(t *testing.T) {
	t.Parallel()
	base := PrintMessage(script)
	require.True(t, base.Risky)
	require.Len(t, base.Bands, CampaignBands)
	for name, v := range map[string]string{
		"spacing":      "앱이  너무 느려서요  카 톡 으로 얘기해요 아 이 디 deal8282 입니다. 선 입 금 해 주시면 바로 발송해 드릴게요",
		"emoji":        "앱이 너무 느려서요😅 카톡으로 얘기해요🙏 아이디 deal8282 입니다!! 선입금 해주시면 바로 발송해 드릴게요 ✨✨",
		"swapped id":   strings.ReplaceAll(script, "deal8282", "sell_7771"),
		"zero width":   strings.ReplaceAll(script, "카톡", "카\u200b톡"),
		"full width":   strings.ReplaceAll(script, "deal8282", "ｄｅａｌ８２８２"),
		"one word off": strings.ReplaceAll(script, "너무 ", "") + "요",
		"punctuation":  strings.ReplaceAll(script, " ", "..."),
	} {
		p := PrintMessage(v)
		require.True(t, p.Risky, name)
		require.True(t, sharesBand(base, p), "%s shares no band with the script", name)
	}
	phone := PrintMessage("앱이 느려서 문자로 연락주세요 번호는 010-1234-5678 이에요 선입금 먼저 부탁드려요")
	hangul := PrintMessage("앱이 느려서 문자로 연락주세요 번호는 공일공 일이삼사 오육칠팔 이에요 선입금 먼저 부탁드려요")
	require.True(t, sharesBand(phone, hangul), "a number in Hangul digits reads as the same placeholder")
	require.Equal(t, phone.Contacts, hangul.Contacts, "and as the same contact value")
	require.Equal(t, []CampaignContact{{SignalPhone, "01012345678"}}, phone.Contacts)
}

// TestDifferentScriptsShareNoMark: another script with the same kind of
// signal does not share a band (a random band collision is a 64-bit one).
func TestDifferentScriptsShareNoMark(t *testing.T) {
	t.Parallel()
	base := PrintMessage(script)
	for _, other := range []string{
		"다른 구매자분이 기다리고 있어서요 먼저 입금하시는 분께 드려요 국민 123456-78-901234",
		"안전결제 링크 보내드릴게요 bunjang-pay.safe24.xyz 여기서 결제해 주세요",
		"제 번호는 010-9876-5432 입니다 내일 역 앞에서 직거래 해요",
	} {
		p := PrintMessage(other)
		require.True(t, p.Risky, other)
		require.False(t, sharesBand(base, p), other)
	}
}

// TestContactsAreTheLinkNotTheText: a swapped id is another contact;
// the same id in other words is the same contact; a victim's card number
// is never a contact value.
func TestContactsAreTheLinkNotTheText(t *testing.T) {
	t.Parallel()
	a := PrintMessage(script)
	require.Equal(t, []CampaignContact{{SignalMessengerID, "deal8282"}}, a.Contacts)
	b := PrintMessage("카톡: DEAL8282")
	require.Equal(t, a.Contacts, b.Contacts, "case folded")
	require.Empty(t, b.Bands, "too short to fingerprint as a script")
	c := PrintMessage(strings.ReplaceAll(script, "deal8282", "deal9999"))
	require.NotEqual(t, a.Contacts, c.Contacts)
	card := PrintMessage("카드번호 4111 1111 1111 1111 로 결제했어요")
	for _, ct := range card.Contacts {
		require.NotEqual(t, SignalCardNumber, ct.Kind)
	}
	acct := PrintMessage("국민은행 123456-78-901234 로 계좌이체 부탁드려요")
	require.Contains(t, acct.Contacts, CampaignContact{SignalBankAccount, "12345678901234"})
}

// TestHangulDigitsInAMessengerIDAreItsDigits: an id whose digits are
// spelled in Hangul right after its letters keeps them (deal공일이 is
// deal012), so two scripts whose ids share the letters do not share a
// contact mark, and the same id in ASCII digits is the same contact; a
// lone syllable after an id is a particle, not a digit.
func TestHangulDigitsInAMessengerIDAreItsDigits(t *testing.T) {
	t.Parallel()
	a := PrintMessage("입금 확인되면 보내드려요 카톡: deal공일이 로 연락주세요")
	require.Equal(t, []CampaignContact{{SignalMessengerID, "deal012"}}, a.Contacts)
	b := PrintMessage("입금 확인되면 보내드려요 카톡: deal삼사오 로 연락주세요")
	require.Equal(t, []CampaignContact{{SignalMessengerID, "deal345"}}, b.Contacts, "another id, another contact")
	c := PrintMessage("카톡 아이디 deal012 로 연락주세요")
	require.Equal(t, a.Contacts, c.Contacts, "the same id written in digits")
	d := PrintMessage("카톡: deal이에요 연락주세요")
	require.Equal(t, []CampaignContact{{SignalMessengerID, "deal"}}, d.Contacts, "a particle")
	for _, sig := range FindSignals("m1", "카톡: deal공일이 로 연락주세요") {
		require.NotContains(t, sig.Value, "공일이", "masked with the id")
	}
}

// TestBenignPhrasesAreNotCounted: phrases everyone uses carry no rule
// signal and are not counted at all.
func TestBenignPhrasesAreNotCounted(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"is it still available?", "아직 판매 중인가요?", "안전결제로 할게요", "네고 가능할까요?", "감사합니다 좋은 하루 되세요 😊",
		"택배비 포함인가요?", "내일 오후에 직거래 가능하세요?", "", "   ", "🙏🙏🙏",
	} {
		require.False(t, PrintMessage(s).Risky, s)
	}
}

func campaignMsgs() []pipeline.ChatMessage {
	return []pipeline.ChatMessage{
		{MessageID: "m1", SenderID: "buyer-1", SenderRole: pipeline.RoleBuyer, Kind: pipeline.KindText, Text: "아직 판매 중인가요?"},
		{MessageID: "m2", SenderID: "seller-9", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, Text: script},
		{MessageID: "m3", SenderID: "seller-9", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, Text: script + "!!"},
		{MessageID: "m4", SenderRole: pipeline.RoleSystem, Kind: pipeline.KindSystem, Text: "카톡 아이디 deal8282"},
	}
}

// TestSightingsAreKeyedAndOncePerRoom: every mark is a keyed pseudonym
// that depends on the key and never shows the value; a mark repeated in
// the room is counted once, with its first message.
func TestSightingsAreKeyedAndOncePerRoom(t *testing.T) {
	t.Parallel()
	k := NewCampaignMarker(testKeys(t, "key-a-of-at-least-thirty-two-bytes-long"), false)
	got := k.Sightings(campaignMsgs())
	require.Len(t, got, CampaignBands+1, "four script bands and one contact, the repeat and the system message not again")
	for _, s := range got {
		require.Equal(t, "m2", s.MessageID)
		require.True(t, pipeline.IsSubjectPseudonym(s.Mark), s.Mark)
		require.True(t, pipeline.IsSubjectPseudonym(s.Sender), s.Sender)
		require.NotContains(t, s.Mark, "8282")
	}
	require.Equal(t, pipeline.CampaignContact, got[CampaignBands].Kind)
	require.Equal(t, k.Party("sender", "seller-9"), got[0].Sender)
	require.NotEqual(t, k.Party("sender", "seller-9"), k.Party("room", "seller-9"), "domain-separated")
	other := NewCampaignMarker(testKeys(t, "key-b-of-at-least-thirty-two-bytes-long"), false).Sightings(campaignMsgs())
	require.NotEqual(t, got[0].Mark, other[0].Mark, "another key, other marks")
	require.True(t, strings.HasPrefix(got[0].Mark, "hmac2:"))
	dev := NewCampaignMarker(nil, false).Sightings(campaignMsgs())
	require.True(t, strings.HasPrefix(dev[0].Mark, "hmac2-dev:"))
}

func testKeys(t testing.TB, secret string) *pseudonym.Keys {
	t.Helper()
	k, err := pseudonym.New([]byte(secret))
	require.NoError(t, err)
	return k
}

// TestLegacySightingsAreThePreviousMarks: with legacy on, each sighting's
// legacy twin is the mark the marker made before per-purpose keys (an
// HMAC under the secret itself of "campaign-<domain>\x00<value>"), so
// counts and rows stored in that form keep matching; the current marks
// are the same with legacy on or off.
func TestLegacySightingsAreThePreviousMarks(t *testing.T) {
	t.Parallel()
	const secret = "key-a-of-at-least-thirty-two-bytes-long"
	previous := func(domain string, value []byte) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte("campaign-" + domain + "\x00"))
		m.Write(value)
		return "hmac:" + hex.EncodeToString(m.Sum(nil)[:12])
	}
	k := NewCampaignMarker(testKeys(t, secret), true)
	cur, legacy := k.SightingsWithLegacy(campaignMsgs())
	require.Equal(t, NewCampaignMarker(testKeys(t, secret), false).Sightings(campaignMsgs()), cur)
	require.Len(t, legacy, len(cur))
	p := PrintMessage(campaignMsgs()[1].Text)
	require.True(t, p.Risky)
	for i, b := range p.Bands {
		require.Equal(t, previous("script", binary.BigEndian.AppendUint64([]byte{byte(i)}, b)), legacy[i].Mark)
		require.Equal(t, cur[i].Kind, legacy[i].Kind)
		require.Equal(t, cur[i].MessageID, legacy[i].MessageID)
	}
	require.Equal(t, previous("sender", []byte("seller-9")), legacy[0].Sender)
	require.Equal(t, previous("room", []byte("r-1")), k.LegacyParty("room", "r-1"))
	_, none := NewCampaignMarker(testKeys(t, secret), false).SightingsWithLegacy(campaignMsgs())
	require.Nil(t, none)
}

// TestSightingsAreBounded: a flooded room gives at most
// MaxCampaignSightings marks.
func TestSightingsAreBounded(t *testing.T) {
	t.Parallel()
	var msgs []pipeline.ChatMessage
	for i := range 200 {
		msgs = append(msgs, pipeline.ChatMessage{MessageID: fmt.Sprint(i), SenderID: "s", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText,
			Text: fmt.Sprintf("카톡 아이디 user%04dx 로 연락 주시면 선입금 안내 드려요 상품 %d번", i, i)})
	}
	require.Len(t, NewCampaignMarker(nil, false).Sightings(msgs), MaxCampaignSightings)
}

func BenchmarkPrintMessage(b *testing.B) {
	for b.Loop() {
		PrintMessage(script)
	}
}

func BenchmarkFindSignals(b *testing.B) {
	for b.Loop() {
		FindSignals("m", script)
	}
}
