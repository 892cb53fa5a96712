package sampledata

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
)

// actor is who writes a drafted message.
type actor int

const (
	buyer actor = iota
	seller
	sys
)

// draft is one message before it gets an id and a timestamp.
type draft struct {
	who      actor
	kind     pipeline.MessageKind
	text     string
	image    string // file suffix such as "qr_code.png"; set for image messages
	evidence bool
	inject   bool
	// longGap asks for a pause of minutes to hours before this message
	// (payment before shipping, a meetup the next day).
	longGap bool
}

// roomGen drafts one room's conversation. Everything random comes from r,
// which is seeded per room, so a room's content does not depend on how many
// rooms are generated or in which order.
type roomGen struct {
	r       *rand.Rand
	item    item
	en      bool
	obf     int
	usedObf bool
	vars    *strings.Replacer
	obfVars []string // placeholders whose value is obfuscated in this room
	msgs    []draft
	sev     int // severity override set by a scenario; 0 keeps the scenario's
	nextGap bool
}

func (g *roomGen) chance(p float64) bool { return g.r.Float64() < p }

func (g *roomGen) render(ko, en string) string {
	t := ko
	if g.en {
		t = en
	}
	if g.obf != obfNone {
		for _, v := range g.obfVars {
			if strings.Contains(t, v) {
				g.usedObf = true
			}
		}
	}
	return g.vars.Replace(t)
}

func (g *roomGen) add(d draft) {
	if g.nextGap {
		d.longGap = true
		g.nextGap = false
	}
	g.msgs = append(g.msgs, d)
}

// pause makes the next message come minutes to hours later.
func (g *roomGen) pause() { g.nextGap = true }

func (g *roomGen) say(who actor, ko, en string) {
	g.add(draft{who: who, kind: pipeline.KindText, text: g.render(ko, en)})
}

func (g *roomGen) sayP(who actor, p pair) { g.say(who, p.ko, p.en) }

// flag says an evidence line: a message that shows the room's abuse.
func (g *roomGen) flag(who actor, ko, en string) {
	g.add(draft{who: who, kind: pipeline.KindText, text: g.render(ko, en), evidence: true})
}

func (g *roomGen) flagP(who actor, p pair) { g.flag(who, p.ko, p.en) }

func (g *roomGen) image(who actor, suffix string, evidence bool) {
	g.add(draft{who: who, kind: pipeline.KindImage, image: suffix, evidence: evidence})
}

func (g *roomGen) system(ko, en string) {
	g.add(draft{who: sys, kind: pipeline.KindSystem, text: g.render(ko, en)})
}

func (g *roomGen) pickSay(who actor, ps ...pair) { g.sayP(who, pick(g.r, ps)) }

func (g *roomGen) pickFlag(who actor, ps ...pair) { g.flagP(who, pick(g.r, ps)) }

// newRoomGen chooses the room's language, item and the values its templates
// can use.
func newRoomGen(r *rand.Rand, en bool, it item, abusive bool) *roomGen {
	g := &roomGen{r: r, en: en, item: it}
	if abusive && g.chance(0.35) {
		g.obf = 1 + r.IntN(4)
	}
	lang := func(p pair) string {
		if en {
			return p.en
		}
		return p.ko
	}
	price := it.price
	nego := roundDown(price*(85+r.IntN(8))/100, 5000)
	nego2 := roundDown((price+nego)/2, 5000)
	money := formatWonKO
	if en {
		money = formatWonEN
	}
	phonePlain := "010-" + digits(r, 4) + "-" + digits(r, 4)
	account := fmt.Sprintf("%s-%s-%s", digits(r, 3+r.IntN(4)), digits(r, 2), digits(r, 6))
	card := fmt.Sprintf("%s-%s-%s-%s", digits(r, 4), digits(r, 4), digits(r, 4), digits(r, 4))
	tracking := digits(r, 4) + "-" + digits(r, 4) + "-" + digits(r, 4)
	kakao := pick(r, kakaoIDs)
	kakaoWord := lang(pair{"카톡", "KakaoTalk"})
	phone, acc, cardV, kakaoV := phonePlain, account, card, kakao
	if g.obf != obfNone {
		phone = obfuscate(r, phonePlain, g.obf, en)
		acc = obfuscate(r, account, g.obf, en)
		cardV = obfuscate(r, card, g.obf, en)
		kakaoV = strings.Join(strings.Split(kakao, ""), " ")
		kakaoWord = lang(pick(r, []pair{{"카.톡", "K.talk"}, {"까톡", "kakao t"}, {"ㅋㅌ", "K-talk"}, {"K톡", "kkt"}}))
		g.obfVars = []string{"{phone}", "{account}", "{card}", "{kakao}", "{kakao_word}"}
	}
	namePool := koNames
	if en {
		namePool = enNames
	}
	holder := pick(r, namePool)
	third := pick(r, namePool)
	for third == holder {
		third = pick(r, namePool)
	}
	host := pick(r, lookalikeHosts)
	g.vars = strings.NewReplacer(
		"{item}", lang(pair{it.ko, it.en}),
		"{price}", money(price),
		"{nego}", money(nego),
		"{nego2}", money(nego2),
		"{place}", lang(pick(r, places)),
		"{time}", lang(pick(r, meetTimes)),
		"{bank}", lang(pick(r, banks)),
		"{courier}", lang(pick(r, couriers)),
		"{holder}", holder,
		"{third}", third,
		"{memo}", lang(pick(r, []pair{{"중고대금", "used goods"}, {"월세", "rent"}, {"용돈", "allowance"}, {"대여금 상환", "loan repayment"}})),
		"{phone_plain}", phonePlain,
		"{phone}", phone,
		"{account}", acc,
		"{card}", cardV,
		"{otp}", digits(r, 6),
		"{tracking}", tracking,
		"{kakao}", kakaoV,
		"{kakao_word}", kakaoWord,
		"{telegram}", pick(r, telegramIDs),
		"{openchat}", "https://open.kakao.com/o/s"+alnum(r, 7),
		"{phish}", fmt.Sprintf("https://%s/%s?order=%s", host, pick(r, []string{"pay", "order/confirm", "safe/checkout", "refund"}), digits(r, 6)),
		"{phish_host}", host,
	)
	return g
}

func roundDown(n, unit int) int {
	if n < unit {
		return n
	}
	return n / unit * unit
}

func alnum(r *rand.Rand, n int) string {
	const set = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = set[r.IntN(len(set))]
	}
	return string(b)
}
