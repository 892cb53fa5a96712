package campaigntest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// The extended corpus of docs/campaigns.md: one simulated day of rooms
// where the hard part is telling campaigns from accounts that repeat
// themselves, deterministic for a seed.
//
//   - scam scripts: 4 scripts, each pasted into 12 to 18 rooms by 2 to 4
//     accounts (every account its own messenger id and bank account,
//     some changing one half way), each copy varied (spacing, emoji,
//     Hangul or full-width digits, a dropped word, punctuation), some
//     split over two messages or reworded at the start;
//   - shops: 9 professional sellers whose identical auto-greeting carries
//     their business contact (an 02 landline, an 070 number, a business
//     mobile, a pf.kakao.com channel, an invoice account), 10 rooms each;
//     8 have an established clean history, 1 is new but on the verified
//     list; and a tenth, new and neither (NewShop, the hard case);
//   - saved phrases: 6 sellers, 5 rooms each, pasting a saved answer with
//     a payment or messenger cue and their own contact, with a history;
//   - repeat inquiries: 2 private buyers each sending the same inquiry
//     with their own number to 4 sellers, one with a history;
//   - ordinary rooms from Corpus (quick replies, meet-up phones, photo
//     requests).

// Extended room kinds.
const (
	Shop         RoomKind = "shop"
	SavedPhrase  RoomKind = "saved_phrase"
	RepeatBuyer  RoomKind = "repeat_inquiry"
	ExtendedScam RoomKind = "scam"
	// NewShop is a shop with no history, not on the verified list: to
	// the rules it looks like one account pushing its contact into many
	// rooms, so it is a campaign until the operator verifies it.
	NewShop RoomKind = "new_shop"
)

// ExtRoom is a room of the extended corpus: Script names its true script
// (scam rooms only) and Sender the account whose message carries the
// script or the repeated value.
type ExtRoom struct {
	Room
	Script string
	Sender string
}

// ExtCorpus is the extended corpus with what the accounts are known for
// before the day: clean rooms in their history, and the verified list.
type ExtCorpus struct {
	Rooms []ExtRoom
	// CleanRooms are each account's earlier clean rooms (the account
	// history); an account not in it has none.
	CleanRooms map[string]int
	// Verified is the operator's list of verified business accounts.
	Verified []string
}

var (
	// Each shop's greeting is its own: shops sharing one template would
	// be one script spread across accounts.
	shopGreetings = []string{
		"안녕하세요 {name}입니다 😊 매장 문의는 {contact} 로 주세요. 영업시간 10시~19시",
		"[{name}] 방문해 주셔서 감사합니다! 대량 구매·세금계산서 문의 {contact}",
		"{name} 공식 판매점입니다. 재고 확인은 {contact} 으로 연락 주시면 빠르게 답변드려요",
		"중고 컴퓨터 전문 {name} 입니다 수리 견적 및 부품 문의 {contact} 평일 9시부터 6시까지 상담",
		"{name} 카메라 렌즈 매입 판매 전문점 방문 예약은 {contact} 주말 휴무",
		"유아용품 리퍼 전문 {name} 전 상품 세척 소독 후 발송해요 궁금한 점은 {contact}",
		"자전거 정비 판매 {name} 입니다 🚲 시승 예약 {contact} 매장 주차 가능",
		"명품 감정 완료 제품만 판매하는 {name} 정품 보증서 동봉 문의 채널 {contact}",
		"반려동물 용품 {name} 묶음 배송 할인 있어요 재고 문의 {contact} 언제든 편하게",
		"캠핑 장비 대여 판매 {name} 입니다 예약금 안내 및 픽업 시간 문의 {contact}",
	}
	shopContacts = []string{"02-3142-{n}", "070-4821-{n}", "010-5{n}-7788", "pf.kakao.com/_xk{n}", "기업 {n}-04-118273 (주)상점",
		"031-712-{n}", "070-7731-{n}", "010-2{n}-3321", "pf.kakao.com/_mq{n}", "02-555-{n}"}
	// A seller's saved answer is its own wording.
	savedPhrases = []string{
		"네 구매 가능해요~ 입금은 {contact} 로 해주시면 당일 발송합니다",
		"택배 거래 원하시면 카톡 {contact} 로 주소 남겨주세요",
		"계좌이체 가능합니다 {contact} 입금 후 말씀 주세요",
		"주말에는 발송이 어려워요 월요일 출고 원하시면 {contact} 로 송금 부탁드려요",
		"사이즈 교환은 안 되고요 카톡 아이디 {contact} 추가하시면 실측 사진 보내드려요",
		"네고 없는 가격입니다 결제는 {contact} 이쪽으로 해주시면 확인 후 포장할게요",
	}
	inquiries = []string{
		"안녕하세요 혹시 상태 괜찮으면 바로 구매하고 싶어요 연락 주세요 {contact}",
		"저 이 모델 찾고 있었는데 직거래 가능하시면 문자 부탁드립니다 {contact}",
	}
	scripts4 = []string{
		"앱이 너무 느려서요 카톡으로 얘기해요 아이디 {id} 입니다. 선입금 해주시면 바로 발송해 드릴게요 택배비는 제가 부담할게요",
		"다른 구매자분도 기다리고 계셔서요 먼저 입금하시는 분께 드려요 {bank} 예금주 김민수 입금 확인되면 바로 보내드립니다",
		"여기는 결제 오류가 나서요 안전결제 링크 보내드릴게요 {host} 여기서 결제해 주세요 카톡 {id} 로 확인 문자 주세요",
		"물건 받으시고 확인 후에 보내주셔도 되는데 예약금만 먼저 {bank} 로 부탁드려요 라인 아이디 {id} 로 연락 주세요",
	}
	rewordings = []string{"죄송한데 ", "아 그리고 ", "참고로 ", ""}
)

// Extended generates the extended corpus; scripts and shops interleave
// over one day from start.
func Extended(seed uint64, start time.Time) ExtCorpus {
	r := rand.New(rand.NewPCG(seed, seed^0xCA4A))
	day := 24 * time.Hour
	at := func() time.Time { return start.Add(time.Duration(r.Int64N(int64(day)))) }
	c := ExtCorpus{CleanRooms: map[string]int{}}
	for _, o := range Corpus(CorpusConfig{Seed: seed, OrdinaryRooms: 380, MeetupShare: 0.15, PhotosShare: 0.05, Start: start}) {
		c.Rooms = append(c.Rooms, ExtRoom{Room: o})
	}
	c.Rooms = append(c.Rooms, scamRooms(r, at)...)
	c.Rooms = append(c.Rooms, shopRooms(r, at, &c)...)
	c.Rooms = append(c.Rooms, savedPhraseRooms(r, at, &c)...)
	c.Rooms = append(c.Rooms, repeatInquiries(at, &c)...)
	slices.SortStableFunc(c.Rooms, func(a, b ExtRoom) int { return a.At.Compare(b.At) })
	return c
}

func scamRooms(r *rand.Rand, at func() time.Time) []ExtRoom {
	var out []ExtRoom
	for s, script := range scripts4 {
		accounts, rooms := 2+r.IntN(3), 12+r.IntN(7)
		for i := range rooms {
			a := i % accounts
			// Half of the accounts change their messenger id half way.
			change := a%2 == 1 && i >= rooms/2
			text := strings.NewReplacer(
				"{id}", fmt.Sprintf("deal%d%d%s", s+5, a, map[bool]string{true: "b", false: ""}[change]),
				"{bank}", fmt.Sprintf("신한 %03d-%03d-%06d", 110+s, 200+a, 330000+s*97+a*13),
				"{host}", fmt.Sprintf("bunjang-pay%d%d.shop", s, a),
			).Replace(script)
			text = rewordings[r.IntN(len(rewordings))] + vary(r, text)
			id := fmt.Sprintf("ring%d-%02d", s, i)
			sender := fmt.Sprintf("ring%d-acct%d", s, a)
			room := ExtRoom{Room: Room{ID: id, Kind: ExtendedScam, At: at()}, Script: fmt.Sprintf("script-%d", s), Sender: sender}
			room.Msgs = []pipeline.ChatMessage{msg(id, 0, "buyer-"+id, pipeline.RoleBuyer, room.At, buyerPhrases[r.IntN(len(buyerPhrases))])}
			if r.IntN(4) == 0 {
				// Split over two messages at a word boundary.
				words := strings.Fields(text)
				h := len(words) / 2
				room.Msgs = append(room.Msgs, msg(id, 1, sender, pipeline.RoleSeller, room.At, strings.Join(words[:h], " ")),
					msg(id, 2, sender, pipeline.RoleSeller, room.At, strings.Join(words[h:], " ")))
			} else {
				room.Msgs = append(room.Msgs, msg(id, 1, sender, pipeline.RoleSeller, room.At, text))
			}
			out = append(out, room)
		}
	}
	return out
}

func shopRooms(r *rand.Rand, at func() time.Time, c *ExtCorpus) []ExtRoom {
	var out []ExtRoom
	for s, contact := range shopContacts {
		name, sender := fmt.Sprintf("상점%d", s+1), fmt.Sprintf("shop-%d", s+1)
		kind := Shop
		switch s {
		case 8:
			c.Verified = append(c.Verified, sender) // new, verified
		case 9:
			kind = NewShop // new, neither verified nor established
		default:
			c.CleanRooms[sender] = 20 + r.IntN(40)
		}
		greeting := strings.NewReplacer("{name}", name, "{contact}", strings.ReplaceAll(contact, "{n}", fmt.Sprintf("%04d", 1000+s*37))).
			Replace(shopGreetings[s])
		for i := range 10 {
			id := fmt.Sprintf("%s-r%02d", sender, i)
			room := ExtRoom{Room: Room{ID: id, Kind: kind, At: at()}, Sender: sender}
			room.Msgs = []pipeline.ChatMessage{msg(id, 0, "buyer-"+id, pipeline.RoleBuyer, room.At, buyerPhrases[r.IntN(len(buyerPhrases))]),
				msg(id, 1, sender, pipeline.RoleSeller, room.At, greeting),
				msg(id, 2, sender, pipeline.RoleSeller, room.At, sellerPhrases[r.IntN(len(sellerPhrases))])}
			out = append(out, room)
		}
	}
	return out
}

func savedPhraseRooms(r *rand.Rand, at func() time.Time, c *ExtCorpus) []ExtRoom {
	var out []ExtRoom
	for s := range 6 {
		sender := fmt.Sprintf("seller-saved%d", s)
		c.CleanRooms[sender] = 5 + r.IntN(25)
		contact := fmt.Sprintf("카카오뱅크 3333-%02d-%07d", 10+s, 4400000+s*311)
		if s%3 == 1 {
			contact = fmt.Sprintf("saved%dshop", s)
		}
		text := strings.ReplaceAll(savedPhrases[s], "{contact}", contact)
		for i := range 5 {
			id := fmt.Sprintf("%s-r%d", sender, i)
			room := ExtRoom{Room: Room{ID: id, Kind: SavedPhrase, At: at()}, Sender: sender}
			room.Msgs = []pipeline.ChatMessage{msg(id, 0, "buyer-"+id, pipeline.RoleBuyer, room.At, "택배 거래 되나요?"),
				msg(id, 1, sender, pipeline.RoleSeller, room.At, text)}
			out = append(out, room)
		}
	}
	return out
}

func repeatInquiries(at func() time.Time, c *ExtCorpus) []ExtRoom {
	var out []ExtRoom
	for b := range 2 {
		sender := fmt.Sprintf("buyer-inquiry%d", b)
		if b == 0 {
			c.CleanRooms[sender] = 6
		}
		text := strings.ReplaceAll(inquiries[b], "{contact}", fmt.Sprintf("010-8%03d-%04d", 100+b, 4321+b))
		for i := range 4 {
			id := fmt.Sprintf("%s-r%d", sender, i)
			room := ExtRoom{Room: Room{ID: id, Kind: RepeatBuyer, At: at()}, Sender: sender}
			room.Msgs = []pipeline.ChatMessage{msg(id, 0, sender, pipeline.RoleBuyer, room.At, text),
				msg(id, 1, fmt.Sprintf("seller-of-%s", id), pipeline.RoleSeller, room.At, "네 판매 중입니다")}
			out = append(out, room)
		}
	}
	return out
}
