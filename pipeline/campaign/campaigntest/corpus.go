package campaigntest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// The generated corpus of the campaign figures (docs/performance.md):
// deterministic for a seed, one simulated day.
//
//   - ordinary rooms: haggling and logistics from a pool of phrases
//     everyone types ("아직 판매 중인가요?", "is it still available?",
//     "안전결제로 할게요"), which carry no rule signal;
//   - among them, meet-up rooms where the seller shares their own phone
//     number (each seller in 1 to 3 rooms that day), and rooms where the
//     buyer asks for more photos on KakaoTalk in one common sentence
//     (a rule signal, from a different buyer each time);
//   - campaign rooms: 5 scam accounts running 3 scripts, each room's copy
//     lightly varied (spacing, emoji, a dropped word, punctuation, digits
//     in Hangul or full width) and each account using two messenger ids
//     and two bank accounts in turn.

// RoomKind says what a generated room is.
type RoomKind string

// The generated room kinds.
const (
	Ordinary RoomKind = "ordinary"
	Meetup   RoomKind = "meetup"
	Photos   RoomKind = "photos"
	Scam     RoomKind = "campaign"
)

// Room is one generated room: its messages and when it is reviewed.
type Room struct {
	ID   string
	Kind RoomKind
	At   time.Time
	Msgs []pipeline.ChatMessage
}

// CorpusConfig sizes the corpus.
type CorpusConfig struct {
	Seed          uint64
	OrdinaryRooms int // including the meet-up and photo rooms
	ScamRooms     int
	MeetupShare   float64 // of the ordinary rooms
	PhotosShare   float64
	Start         time.Time
}

// DefaultCorpus is the corpus of the published figures: 10,000 ordinary
// rooms (15 % meet-ups, 5 % photo requests) and 300 campaign rooms.
func DefaultCorpus() CorpusConfig {
	return CorpusConfig{Seed: 30, OrdinaryRooms: 10_000, ScamRooms: 300, MeetupShare: 0.15, PhotosShare: 0.05,
		Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
}

var (
	buyerPhrases = []string{"안녕하세요 아직 판매 중인가요?", "is it still available?", "네고 가능할까요?", "택배 거래 되나요?", "상태는 어떤가요?",
		"안전결제로 할게요", "혹시 만원만 깎아주실 수 있나요?", "구매할게요!", "사진 하나만 더 보여주세요", "언제 발송 가능하세요?"}
	sellerPhrases = []string{"네 판매 중입니다", "네고는 어렵습니다 ㅠㅠ", "안전결제로 진행해 주세요", "내일 발송해 드릴게요", "상태 좋아요 거의 안 썼어요",
		"감사합니다 좋은 하루 되세요", "택배비 포함 가격이에요", "결제 확인했습니다"}
	emoji   = []string{"😊", "🙏", "✨", "😅", "👍", "‼️"}
	scripts = []string{
		"앱이 너무 느려서요 카톡으로 얘기해요 아이디 {id} 입니다. 선입금 해주시면 바로 발송해 드릴게요",
		"다른 구매자분도 기다리고 계셔서요 먼저 입금하시는 분께 드려요 {bank} 예금주 김민수 입금 확인되면 바로 보내드립니다",
		"여기는 결제 오류가 나서요 안전결제 링크 보내드릴게요 {host} 여기서 결제해 주세요 카톡 {id} 로 확인 문자 주세요",
	}
	hangulDigit = []rune("공일이삼사오육칠팔구")
)

// Corpus generates the rooms, sorted by review time.
func Corpus(c CorpusConfig) []Room {
	r := rand.New(rand.NewPCG(c.Seed, c.Seed^0x5EED))
	day := 24 * time.Hour
	at := func() time.Time { return c.Start.Add(time.Duration(r.Int64N(int64(day)))) }
	var rooms []Room
	// Meet-up sellers each get 1 to 3 rooms, in turn.
	seller, left := 0, 0
	for i := range c.OrdinaryRooms {
		room := Room{ID: fmt.Sprintf("room-%05d", i), Kind: Ordinary, At: at()}
		buyer, sellerID := fmt.Sprintf("buyer-%05d", i), fmt.Sprintf("seller-o%05d", i)
		room.Msgs = chatter(r, room.ID, buyer, sellerID, room.At)
		switch u := r.Float64(); {
		case u < c.MeetupShare:
			if left == 0 {
				seller, left = seller+1, 1+r.IntN(3)
			}
			left--
			room.Kind, sellerID = Meetup, fmt.Sprintf("seller-m%05d", seller)
			phone := fmt.Sprintf("010-%04d-%04d", 1000+seller%9000, (seller*7919)%10000)
			room.Msgs = append(room.Msgs, msg(room.ID, len(room.Msgs), sellerID, pipeline.RoleSeller, room.At,
				"직거래 원하시면 "+phone+" 로 문자 주세요 역 앞에서 뵐게요"))
		case u < c.MeetupShare+c.PhotosShare:
			room.Kind = Photos
			room.Msgs = append(room.Msgs, msg(room.ID, len(room.Msgs), buyer, pipeline.RoleBuyer, room.At,
				"혹시 카톡으로 사진 더 받아볼 수 있을까요?"))
		}
		rooms = append(rooms, room)
	}
	for i := range c.ScamRooms {
		room := Room{ID: fmt.Sprintf("scam-%04d", i), Kind: Scam, At: at()}
		account := i % 5
		text := strings.NewReplacer(
			"{id}", fmt.Sprintf("deal%d%02d", account, (i/5)%2*11),
			"{bank}", fmt.Sprintf("국민 %06d-%02d-%06d", 100000+account*1111, (i/5)%2, 200000+account*37),
			"{host}", fmt.Sprintf("bunjang-pay.safe%d.xyz", account),
		).Replace(scripts[(i/5)%3])
		text = vary(r, text)
		buyer := fmt.Sprintf("buyer-s%04d", i)
		scammer := fmt.Sprintf("scammer-%d", account)
		room.Msgs = []pipeline.ChatMessage{
			msg(room.ID, 0, buyer, pipeline.RoleBuyer, room.At, buyerPhrases[r.IntN(len(buyerPhrases))]),
			msg(room.ID, 1, scammer, pipeline.RoleSeller, room.At, text),
		}
		rooms = append(rooms, room)
	}
	slices.SortStableFunc(rooms, func(a, b Room) int { return a.At.Compare(b.At) })
	return rooms
}

func chatter(r *rand.Rand, room, buyer, seller string, at time.Time) []pipeline.ChatMessage {
	var out []pipeline.ChatMessage
	for i := range 3 + r.IntN(4) {
		if i%2 == 0 {
			out = append(out, msg(room, i, buyer, pipeline.RoleBuyer, at, buyerPhrases[r.IntN(len(buyerPhrases))]))
		} else {
			out = append(out, msg(room, i, seller, pipeline.RoleSeller, at, sellerPhrases[r.IntN(len(sellerPhrases))]))
		}
	}
	return out
}

func msg(room string, i int, sender string, role pipeline.SenderRole, at time.Time, text string) pipeline.ChatMessage {
	return pipeline.ChatMessage{MessageID: fmt.Sprintf("%s-m%d", room, i), SenderID: sender, SenderRole: role, Kind: pipeline.KindText,
		SentAt: at.Add(time.Duration(i) * time.Minute), Text: text}
}

// vary applies one to three light variations of a pasted script.
func vary(r *rand.Rand, s string) string {
	for range 1 + r.IntN(3) {
		switch r.IntN(6) {
		case 0: // spaced out: one word's syllables apart
			words := strings.Fields(s)
			j := r.IntN(len(words))
			words[j] = strings.Join(strings.Split(words[j], ""), " ")
			s = strings.Join(words, " ")
		case 1: // emoji
			words := strings.Fields(s)
			j := r.IntN(len(words))
			words[j] += emoji[r.IntN(len(emoji))]
			s = strings.Join(words, " ")
		case 2: // a word dropped (never a contact)
			words := strings.Fields(s)
			j := r.IntN(len(words))
			if !strings.ContainsAny(words[j], "0123456789.") {
				words = slices.Delete(words, j, j+1)
			}
			s = strings.Join(words, " ")
		case 3: // digits in Hangul
			s = strings.Map(func(c rune) rune {
				if c >= '0' && c <= '9' && !strings.Contains(s, "deal") {
					return hangulDigit[c-'0']
				}
				return c
			}, s)
		case 4: // full-width digits
			s = strings.Map(func(c rune) rune {
				if c >= '0' && c <= '9' {
					return c - '0' + '０'
				}
				return c
			}, s)
		default: // punctuation
			s = strings.ReplaceAll(s, " ", " ... ")
		}
	}
	return s
}
