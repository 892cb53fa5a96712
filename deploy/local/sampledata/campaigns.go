package sampledata

import (
	"fmt"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// The sample lake's campaign rooms, so that a newcomer sees a campaign and
// a repeat sender (docs/campaigns.md) without editing anything: in the
// busiest hour (the stack's sample window), a scam ring of three accounts
// pastes one prepayment script, each with its own messenger id and bank
// account, into ringRooms rooms; and a shop repeats its auto-greeting with
// its business number in shopRooms rooms. They take the place of the last
// rooms of lakes of at least campaignMinRooms rooms, so a lake keeps the
// size asked for, and smaller lakes (the tests') are unchanged.
const (
	ringRooms        = 8
	shopRooms        = 6
	campaignMinRooms = 2000
)

// ShopAccount is the sample shop's seller id; VerifiedAccounts lists it,
// as an operator's verified-business-accounts file would.
const ShopAccount = "shop-greeter-1"

// VerifiedAccounts are the sample lake's verified business accounts
// (--campaign-verified-accounts), one a line.
const VerifiedAccounts = "# the sample lake's shop (deploy/local/sampledata)\n" + ShopAccount + "\n"

const (
	ringScript   = "다른 분도 입금 대기중이라서요 먼저 입금해주시면 바로 택배 보내드려요 %s 예금주 %s 입금 후 카톡 %s 로 캡처 보내주세요"
	shopGreeting = "안녕하세요 리퍼폰 전문 모바일상회입니다 😊 매장 문의는 070-4821-3377 로 주세요 영업시간 10시~19시"
)

var ringVariants = []func(string) string{
	func(s string) string { return s },
	func(s string) string { return s + " 🙏" },
	func(s string) string { return "죄송한데 " + s },
	func(s string) string { return s + "!!" },
}

// campaignRooms replaces the last rooms of rooms (a lake of at least
// campaignMinRooms) with the ring's and the shop's, in the busiest hour of
// the others.
func campaignRooms(rooms []generatedRoom) {
	n := ringRooms + shopRooms
	if len(rooms) < campaignMinRooms {
		return
	}
	keep := rooms[:len(rooms)-n]
	hour, _ := busiest(keep, func(r generatedRoom) time.Time { return r.room.FirstMessageAt })
	for i := range n {
		idx := len(keep) + i
		at := hour.Add(time.Duration(3+i*4) * time.Minute)
		if i < ringRooms {
			a := i % 3
			text := fmt.Sprintf(ringScript, fmt.Sprintf("국민 %06d-%02d-%06d", 412300+a*7, 10+a, 551200+a*31),
				[]string{"김민수", "이정훈", "박서연"}[a], fmt.Sprintf("fastdeal%d%d", a+1, 7))
			rooms[idx] = scriptedRoom(idx, at, "campaign_ring", fmt.Sprintf("u8%06d", 100+a), ringVariants[i%len(ringVariants)](text), true)
		} else {
			rooms[idx] = scriptedRoom(idx, at, "shop_greeting", ShopAccount, shopGreeting, false)
		}
	}
}

// scriptedRoom is a room where a buyer asks and the seller answers with
// text, then the buyer replies.
func scriptedRoom(idx int, first time.Time, scenario, seller, text string, abusive bool) generatedRoom {
	roomID := fmt.Sprintf("room-%06d", idx+1)
	buyerID := fmt.Sprintf("u7%06d", idx)
	lines := []struct{ who, text string }{
		{buyerID, "안녕하세요 아직 판매중인가요?"},
		{seller, text},
		{buyerID, "네 확인했습니다"},
	}
	truth := Truth{RoomID: roomID, Label: pipeline.LabelClean, Category: pipeline.CategoryClean, Scenario: scenario, Language: "ko", HardNegative: !abusive}
	if abusive {
		truth.Label, truth.Category, truth.Severity = pipeline.LabelAbusive, pipeline.CategoryExternalPayment, 4
		truth.EvidenceMessageIDs = []string{"m0002"}
	}
	msgs := make([]MessageRow, len(lines))
	for i, l := range lines {
		role := pipeline.RoleBuyer
		if l.who == seller {
			role = pipeline.RoleSeller
		}
		msgs[i] = MessageRow{RoomID: roomID, MessageID: fmt.Sprintf("m%04d", i+1), SentAt: first.Add(time.Duration(i) * 40 * time.Second),
			Kind: string(pipeline.KindText), Text: l.text, SenderID: l.who, SenderRole: string(role)}
	}
	last := msgs[len(msgs)-1].SentAt
	truth.FirstMessageAt, truth.LastMessageAt = first, last
	room := RoomRow{RoomID: roomID, ItemTitle: "아이폰 13 미니 128GB", ItemCategory: "디지털기기", ItemPrice: 420000, BuyerID: buyerID, SellerID: seller,
		CreatedAt: first.Add(-time.Minute), FirstMessageAt: first, LastMessageAt: last, MessageCount: int32(len(msgs))}
	return generatedRoom{room: room, messages: msgs, truth: truth}
}

// BusiestHour returns the UTC hour in which the most rooms had their first
// message, and how many; the earliest such hour on a tie. It is the
// stack's sample window, the hour the demo publishes, and the hour a
// lake of the stack's size holds its ring and its shop in.
func BusiestHour(rooms []RoomRow) (time.Time, int) {
	return busiest(rooms, func(r RoomRow) time.Time { return r.FirstMessageAt })
}

func busiest[T any](rooms []T, first func(T) time.Time) (time.Time, int) {
	counts := map[time.Time]int{}
	var best time.Time
	bestN := 0
	for _, r := range rooms {
		h := first(r).UTC().Truncate(time.Hour)
		counts[h]++
		if c := counts[h]; c > bestN || (c == bestN && h.Before(best)) {
			best, bestN = h, c
		}
	}
	return best, bestN
}
