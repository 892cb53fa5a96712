package sampledata

import (
	"slices"

	"github.com/chatguard/chatguard/pipeline"
)

// scenario is one kind of conversation with its ground-truth label.
type scenario struct {
	name     string
	label    pipeline.Label
	category pipeline.Category
	severity int // 0 for clean rooms
	weight   int
	// hardNegative marks clean conversations that look like abuse to a
	// keyword filter (안전결제, phone numbers, tracking numbers, 네고, blunt talk).
	hardNegative bool
	// item overrides the listing pool (prohibited sales hide behind their own listings).
	items []item
	run   func(g *roomGen)
}

// scenarios is the catalogue. Weights are out of 100: about 55% clean (a
// third of those hard negatives), 38% abusive and 7% suspicious, denser in
// abuse than a real marketplace so that every category has enough rooms for
// an evaluation.
var scenarios = []scenario{
	{name: "clean_meetup", label: pipeline.LabelClean, category: pipeline.CategoryClean, weight: 16, run: cleanMeetup},
	{name: "clean_shipping_questions", label: pipeline.LabelClean, category: pipeline.CategoryClean, weight: 8, run: cleanShippingQuestions},
	{name: "clean_product_photos", label: pipeline.LabelClean, category: pipeline.CategoryClean, weight: 6, run: cleanProductPhotos},
	{name: "clean_abandoned", label: pipeline.LabelClean, category: pipeline.CategoryClean, weight: 6, run: cleanAbandoned},
	{name: "hn_safe_pay_tracking", label: pipeline.LabelClean, category: pipeline.CategoryClean, weight: 7, hardNegative: true, run: hnSafePayTracking},
	{name: "hn_meetup_phone", label: pipeline.LabelClean, category: pipeline.CategoryClean, weight: 4, hardNegative: true, run: hnMeetupPhone},
	{name: "hn_nego", label: pipeline.LabelClean, category: pipeline.CategoryClean, weight: 5, hardNegative: true, run: hnNego},
	{name: "hn_blunt", label: pipeline.LabelClean, category: pipeline.CategoryClean, weight: 3, hardNegative: true, run: hnBlunt},

	{name: "phishing_link", label: pipeline.LabelAbusive, category: pipeline.CategoryPhishingLink, severity: 5, weight: 5, run: phishingLink},
	{name: "phishing_fake_settlement", label: pipeline.LabelAbusive, category: pipeline.CategoryPhishingLink, severity: 5, weight: 2, run: phishingFakeSettlement},
	{name: "off_platform", label: pipeline.LabelAbusive, category: pipeline.CategoryOffPlatform, severity: 3, weight: 4, run: offPlatform},
	{name: "off_platform_mild", label: pipeline.LabelSuspicious, category: pipeline.CategoryOffPlatform, severity: 2, weight: 3, run: offPlatformMild},
	{name: "external_payment", label: pipeline.LabelAbusive, category: pipeline.CategoryExternalPayment, severity: 4, weight: 5, run: externalPayment},
	{name: "external_payment_mild", label: pipeline.LabelSuspicious, category: pipeline.CategoryExternalPayment, severity: 2, weight: 3, run: externalPaymentMild},
	{name: "triangle_fraud", label: pipeline.LabelAbusive, category: pipeline.CategoryTriangleFraud, severity: 5, weight: 3, run: triangleFraud},
	{name: "fake_deposit_proof", label: pipeline.LabelAbusive, category: pipeline.CategoryFakeProof, severity: 4, weight: 2, run: fakeDepositProof},
	{name: "fake_shipping_proof", label: pipeline.LabelAbusive, category: pipeline.CategoryFakeProof, severity: 4, weight: 2, run: fakeShippingProof},
	{name: "personal_info", label: pipeline.LabelAbusive, category: pipeline.CategoryPersonalInfo, severity: 4, weight: 4, run: personalInfo},
	{name: "harassment", label: pipeline.LabelAbusive, category: pipeline.CategoryHarassment, severity: 3, weight: 4, run: harassment},
	{name: "prohibited_item", label: pipeline.LabelAbusive, category: pipeline.CategoryProhibitedItem, severity: 4, weight: 4, items: prohibitedItems, run: prohibitedItem},
	{name: "spam", label: pipeline.LabelAbusive, category: pipeline.CategorySpam, severity: 2, weight: 4, run: spam},
}

// abuser says which side of the room writes the abuse in a scenario; the
// generator gives that side an id from the small pool of repeat abusers.
func (s scenario) abuser() actor {
	switch s.name {
	case "fake_deposit_proof", "spam", "phishing_fake_settlement", "harassment":
		return buyer
	}
	return seller
}

// --- shared pieces -----------------------------------------------------------

func (g *roomGen) opening() {
	if g.chance(0.4) {
		g.system("구매자가 채팅방에 들어왔습니다", "Buyer joined the chat")
	}
	g.pickSay(buyer,
		pair{"안녕하세요 {item} 아직 판매중인가요?", "Hi, is the {item} still available?"},
		pair{"{item} 구매하고 싶은데 가능할까요?", "Hello! I'd like to buy your {item}."},
		pair{"혹시 아직 있나요?", "Is this still for sale?"},
		pair{"안녕하세요! 올리신 {item} 보고 연락드려요", "Hi there, saw your listing for the {item}."},
		pair{"아직 안 팔렸나요? 관심 있어요", "Still available? I'm interested."},
	)
	g.pickSay(seller,
		pair{"네 판매중이에요", "Yes, still available."},
		pair{"네 아직 있어요~", "Hi! Yes it is."},
		pair{"안녕하세요 네 구매 가능합니다", "Yep, still have it."},
		pair{"네 있습니다 ㅎㅎ", "Yes :)"},
	)
}

var smallTalkPool = [][2]pair{
	{{"사용감 많이 있나요?", "Is it heavily used?"}, {"거의 새거예요. 박스랑 구성품 다 있어요", "Almost new. Box and all accessories included."}},
	{{"구매하신지 얼마나 되셨어요?", "How long have you had it?"}, {"작년 여름에 샀어요 1년 조금 넘었네요", "Bought it last summer, a bit over a year."}},
	{{"하자 있는 부분 있을까요?", "Any defects?"}, {"모서리에 잔기스 조금 있는데 사용엔 전혀 문제 없어요", "A few tiny scratches on a corner, works perfectly."}},
	{{"정품 맞죠?", "It's genuine, right?"}, {"네 정품이에요 영수증도 있어요", "Yes, I still have the receipt."}},
	{{"왜 파시는 거예요?", "Why are you selling?"}, {"새로 하나 선물 받아서요", "I got a new one as a gift."}},
	{{"색상은 사진이랑 같나요?", "Is the color like in the photos?"}, {"네 실물이 조금 더 밝아요", "Yes, a little brighter in person."}},
	{{"가격 {price} 맞나요?", "Is {price} the price?"}, {"네 {price}입니다", "Yes, {price}."}},
}

// digitalTalk is small talk that only fits electronics.
var digitalTalk = [2]pair{{"배터리 성능은 어때요?", "How is the battery?"}, {"하루 종일 쓰기엔 충분해요", "Still lasts a full day."}}

func (g *roomGen) smallTalk(n int) {
	pool := smallTalkPool
	if g.item.category == "디지털기기" {
		pool = append(slices.Clip(pool), digitalTalk)
	}
	for _, i := range g.r.Perm(len(pool))[:n] {
		g.sayP(buyer, pool[i][0])
		g.sayP(seller, pool[i][1])
	}
}

func (g *roomGen) meetup() {
	g.pickSay(buyer,
		pair{"{place}에서 {time} 괜찮으세요?", "Would {place}, {time} work?"},
		pair{"직거래 하고 싶은데 {place} 가능하세요?", "Can we meet at {place}?"},
	)
	g.pickSay(seller,
		pair{"네 좋아요 {time}에 뵐게요", "Sure, see you {time}."},
		pair{"네 가능해요. 도착하시면 채팅 주세요", "OK. Message me here when you arrive."},
	)
}

func (g *roomGen) closing() {
	g.pickSay(buyer,
		pair{"네 감사합니다!", "Thanks!"},
		pair{"좋아요 그때 뵐게요", "Great, see you then."},
		pair{"감사합니다 잘 쓸게요 :)", "Thank you, I'll take good care of it :)"},
	)
	if g.chance(0.5) {
		g.pickSay(seller, pair{"네 좋은 하루 되세요", "Have a nice day."}, pair{"감사합니다~", "Thanks!"})
	}
}

// maybeInject adds a prompt-injection attempt by the abuser. The truth
// keeps the room's real label: injections never make a room clean.
func (g *roomGen) maybeInject(who actor) {
	if !g.chance(0.09) {
		return
	}
	p := pick(g.r, injections)
	g.add(draft{who: who, kind: pipeline.KindText, text: g.render(p.ko, p.en), inject: true})
}

// --- clean -------------------------------------------------------------------

func cleanMeetup(g *roomGen) {
	g.opening()
	g.smallTalk(1 + g.r.IntN(3))
	g.meetup()
	g.pause()
	g.pickSay(buyer, pair{"도착했어요 {place} 앞이에요", "I'm here, at {place}."}, pair{"지금 거의 다 왔어요", "Almost there."})
	g.pickSay(seller, pair{"네 지금 나가요", "Coming down now."}, pair{"검은색 패딩 입고 있어요", "I'm wearing a black jacket."})
	g.closing()
}

func cleanShippingQuestions(g *roomGen) {
	g.opening()
	g.say(buyer, "택배 거래도 되나요?", "Can you ship it?")
	g.say(seller, "네 택배비 3,500원 추가돼요. 앱에서 안전결제로 주문해주시면 돼요", "Yes, shipping is 3,500 won extra. Just order with the in-app safe payment.")
	g.smallTalk(g.r.IntN(2))
	g.say(buyer, "네 조금 생각해보고 주문할게요", "OK, I'll think about it and order.")
	g.closing()
}

func cleanProductPhotos(g *roomGen) {
	g.opening()
	g.say(buyer, "사진 몇 장 더 볼 수 있을까요? 뒷면도 궁금해요", "Could you send a few more photos? I'd like to see the back.")
	for range 1 + g.r.IntN(3) {
		g.image(seller, "product_photo.jpg", false)
	}
	g.pickSay(seller, pair{"이렇게 생겼어요", "Here you go."}, pair{"실물이 더 깨끗해요", "It looks even cleaner in person."})
	g.smallTalk(g.r.IntN(2))
	g.meetup()
	g.closing()
}

func cleanAbandoned(g *roomGen) {
	g.opening()
	g.smallTalk(g.r.IntN(2))
	g.pickSay(buyer, pair{"아 생각보다 크네요 다시 생각해볼게요", "Hmm, bigger than I thought. I'll think about it."},
		pair{"조금 고민해보고 연락드릴게요", "Let me think and get back to you."})
	if g.chance(0.6) {
		g.say(seller, "네~", "Sure.")
	}
}

func hnSafePayTracking(g *roomGen) {
	g.opening()
	g.smallTalk(g.r.IntN(2))
	if g.chance(0.5) {
		g.say(buyer, "택배로 받고 싶은데 계좌이체 해드릴까요?", "I'd like it shipped. Should I send a bank transfer?")
		g.say(seller, "아뇨 앱 안에서 안전결제로 해주세요. 그게 서로 안전해요", "No, let's use the safe payment inside the app. It's safer for both of us.")
	} else {
		g.say(buyer, "택배로 할게요. 안전결제로 해도 될까요?", "I'll take it by delivery. Can I use safe payment?")
		g.say(seller, "네 앱 안에서 안전결제 버튼 눌러서 결제해주세요", "Sure, tap the safe payment button in the app.")
	}
	g.system("안전결제가 완료되었습니다", "Safe payment completed.")
	g.say(seller, "결제 확인했어요 내일 오전에 발송할게요", "Payment confirmed, I'll ship tomorrow morning.")
	g.pause()
	g.say(seller, "{courier} 송장번호 {tracking} 입니다", "Shipped with {courier}, tracking number {tracking}.")
	if g.chance(0.4) {
		g.image(seller, "shipping_receipt.jpg", false)
	}
	g.system("판매자가 상품을 발송했습니다", "The seller has shipped the item.")
	g.pause()
	g.say(buyer, "잘 받았어요 구매확정 할게요 감사합니다", "Got it, confirming the purchase. Thanks!")
	g.system("구매가 확정되었습니다", "Purchase confirmed.")
}

func hnMeetupPhone(g *roomGen) {
	g.opening()
	g.smallTalk(g.r.IntN(2))
	g.meetup()
	g.pickSay(buyer,
		pair{"혹시 당일에 못 찾으시면 전화주세요 {phone_plain} 이에요", "If you can't find me that day, call {phone_plain}."},
		pair{"제 번호 {phone_plain} 입니다. 늦으면 문자 드릴게요", "My number is {phone_plain}, I'll text if I'm late."},
	)
	g.say(seller, "네 저도 도착하면 여기 채팅으로 말씀드릴게요", "OK, I'll also message here when I arrive.")
	g.pause()
	g.say(seller, "도착했어요 {place} 앞이에요", "I'm at {place}.")
	g.say(buyer, "네 보여요 갑니다", "I see you, coming.")
	g.closing()
}

func hnNego(g *roomGen) {
	g.opening()
	g.pickSay(buyer,
		pair{"혹시 네고 가능할까요? {nego}에 안될까요?", "Any room to negotiate? Would you take {nego}?"},
		pair{"{nego}에 주시면 바로 갈게요 ㅎㅎ 네고 부탁드려요", "I can come right now for {nego}, could you do that?"},
	)
	if g.chance(0.7) {
		g.say(seller, "음 {nego2}까지는 해드릴게요", "Hmm, I can do {nego2}.")
		g.say(buyer, "좋아요 그렇게 해요", "Deal.")
		g.meetup()
	} else {
		g.say(seller, "그 가격은 좀 어렵네요 ㅠㅠ", "Sorry, that's too low for me.")
		g.say(buyer, "네 알겠습니다 다음에 기회되면 연락드릴게요", "Alright, maybe next time.")
	}
	g.closing()
}

func hnBlunt(g *roomGen) {
	g.opening()
	if g.chance(0.5) {
		g.say(buyer, "네고 되나요?", "Can you go lower?")
		g.say(seller, "네고 사절이라고 적어놨는데요. 가격 그대로입니다", "I wrote no haggling. The price is firm.")
		g.say(buyer, "아 네 그럼 됐어요", "Fine, never mind then.")
	} else {
		g.say(buyer, "사진이랑 좀 다르네요. 솔직히 이 가격 주고 사기엔 별로네요", "It looks different from the photos. Honestly, not worth that price.")
		g.say(seller, "그럼 안 사시면 됩니다", "Then don't buy it.")
		g.say(buyer, "네 그럴게요. 답장 느린 것도 좀 짜증나네요", "Will do. Your slow replies are annoying too.")
	}
}

// --- abusive and suspicious --------------------------------------------------

func phishingLink(g *roomGen) {
	g.opening()
	g.smallTalk(g.r.IntN(2))
	g.say(buyer, "택배로 구매하고 싶어요", "I'd like to buy it with delivery.")
	g.say(seller, "네 그럼 안전결제로 진행할게요. 제가 결제 링크 보내드릴게요", "OK, let's do safe payment. I'll send you the payment link.")
	g.pickFlag(seller,
		pair{"{phish} 여기서 안전결제 해주세요", "Please pay here with safe payment: {phish}"},
		pair{"안전결제 링크입니다 {phish} 30분 안에 결제하셔야 해요", "Safe payment link: {phish} — it expires in 30 minutes."},
	)
	if g.chance(0.3) {
		g.say(seller, "링크가 안 열리면 QR로 하셔도 돼요", "If the link doesn't open, scan this QR.")
		g.image(seller, "qr_code.png", true)
	}
	g.say(buyer, "앱 안에 안전결제 버튼 있지 않나요?", "Isn't there a safe payment button in the app?")
	g.flag(seller, "그건 수수료가 비싸서요 이것도 똑같은 안전결제예요", "That one has higher fees, this is the same safe payment.")
	g.say(buyer, "결제했는데 오류났다고 떠요", "I paid but it says there was an error.")
	g.pickFlag(seller,
		pair{"결제 오류나면 카드번호랑 OTP 다시 입력하셔야 환불돼요", "After a payment error you must re-enter your card number and OTP to get refunded."},
		pair{"오류 건은 계좌 인증하셔야 돼요 링크에서 계좌번호랑 비밀번호 다시 넣어주세요", "For errors you have to verify your account: re-enter your account number and PIN at the link."},
	)
	g.maybeInject(seller)
}

func phishingFakeSettlement(g *roomGen) {
	g.opening()
	g.say(buyer, "제가 방금 안전결제로 결제했어요", "I just paid with safe payment.")
	g.flag(buyer, "판매자님은 이 링크에서 판매대금 수령 확인 누르셔야 정산돼요 {phish}", "You need to confirm receipt of the sale money at this link to get paid: {phish}")
	g.say(seller, "앱에 결제 알림이 안 왔는데요?", "I didn't get any payment notification in the app.")
	g.flag(buyer, "네이버페이 쪽이라 그래요. 링크 들어가서 은행 인증만 하시면 돼요", "It's through the partner pay service. Just do the bank verification on the link.")
	g.maybeInject(buyer)
}

func offPlatform(g *roomGen) {
	g.opening()
	g.smallTalk(g.r.IntN(2))
	switch g.r.IntN(3) {
	case 0:
		g.flag(seller, "앱이 느려서 그런데 {kakao_word}으로 얘기해요 아이디 {kakao}", "The app is slow, let's talk on {kakao_word}. My ID is {kakao}")
	case 1:
		g.flag(seller, "텔레그램 {telegram} 으로 연락주세요 거기서 할인해드려요", "Message me on Telegram {telegram}, I'll give you a discount there.")
	default:
		g.flag(seller, "오픈채팅방 {openchat} 들어오시면 사진 더 보여드릴게요", "Join my open chat {openchat} and I'll show you more photos.")
	}
	g.say(buyer, "여기서 하면 안되나요?", "Can't we just talk here?")
	g.pickFlag(seller,
		pair{"여기 알림이 잘 안와서요 거기로 연락주세요", "I don't get notifications here, contact me there."},
		pair{"여기선 답장 못 해요 거기로 오세요", "I won't reply here anymore, come over there."},
	)
	if g.chance(0.4) {
		g.flag(seller, "문자로 주셔도 돼요 {phone}", "Or text me: {phone}")
	}
	g.maybeInject(seller)
}

func offPlatformMild(g *roomGen) {
	g.opening()
	g.smallTalk(1 + g.r.IntN(2))
	g.flag(seller, "혹시 {kakao_word} 되세요? 그게 편해서요", "Do you use {kakao_word}? It's easier for me.")
	g.say(buyer, "그냥 여기서 얘기해요", "Let's just keep talking here.")
	g.say(seller, "네 그래요", "OK, sure.")
	g.meetup()
}

func externalPayment(g *roomGen) {
	g.opening()
	g.smallTalk(g.r.IntN(2))
	g.say(buyer, "택배로 받을 수 있을까요?", "Could you ship it?")
	g.flag(seller, "네 선입금 해주시면 바로 보내드려요", "Yes, pay upfront and I'll send it right away.")
	g.flag(seller, "{bank} {account} {holder} 입니다", "{bank} {account}, {holder}")
	g.say(buyer, "안전결제는 안되나요?", "Can't we use safe payment?")
	g.pickFlag(seller,
		pair{"안전결제는 정산이 늦어서 안해요. 수수료는 제가 부담할게요 계좌이체로 해주세요", "Safe payment settles too slowly. I'll pay the fee, just do a bank transfer."},
		pair{"다른 분도 입금하신다고 해서요 먼저 입금하시는 분께 드릴게요", "Another buyer says they'll pay too, first to deposit gets it."},
	)
	if g.chance(0.5) {
		g.flag(seller, "10분 안에 입금 안 하시면 다른 분께 넘길게요", "If you don't pay in 10 minutes it goes to someone else.")
	}
	g.maybeInject(seller)
}

func externalPaymentMild(g *roomGen) {
	g.opening()
	g.smallTalk(1)
	g.flag(seller, "계좌이체 하시면 5천원 빼드릴게요", "I'll knock off 5,000 won if you pay by bank transfer.")
	g.say(buyer, "그냥 앱에서 안전결제로 할게요", "I'll just use the in-app safe payment.")
	g.say(seller, "네 편하신대로요", "Whatever works for you.")
	g.system("안전결제가 완료되었습니다", "Safe payment completed.")
}

func triangleFraud(g *roomGen) {
	g.opening()
	g.smallTalk(g.r.IntN(2))
	g.say(buyer, "계좌로 보내드리면 될까요?", "Should I send the money to your account?")
	g.pickFlag(seller,
		pair{"제 사촌동생 계좌로 보내주시면 돼요 {bank} {account} {third}", "Please send it to my cousin's account: {bank} {account} {third}"},
		pair{"지금 제 계좌가 막혀서 지인 계좌로 부탁드려요 {bank} {account} 예금주 {third}", "My account is frozen, please use my friend's: {bank} {account}, holder {third}"},
	)
	g.flag(seller, "입금하실 때 입금자명을 '{holder}' 이름으로 바꿔서 보내주세요", "When you transfer, change the depositor name to '{holder}'.")
	g.say(buyer, "입금자명은 왜 바꿔야 돼요?", "Why do I need to change the depositor name?")
	g.flag(seller, "세금 문제 때문에요 메모에 '{memo}' 꼭 적어주세요", "It's a tax thing. Please put '{memo}' in the memo.")
	g.maybeInject(seller)
}

func fakeDepositProof(g *roomGen) {
	g.opening()
	g.say(buyer, "계좌번호 알려주시면 바로 입금할게요", "Give me your account number and I'll pay now.")
	g.say(seller, "{bank} {account} 입니다", "{bank} {account}")
	g.flag(buyer, "입금했어요 확인해주세요", "Paid, please check.")
	g.image(buyer, "deposit_screenshot.jpg", true)
	g.say(seller, "아직 안 들어왔는데요?", "Nothing has come in yet.")
	g.pickFlag(buyer,
		pair{"은행 점검시간이라 늦게 들어온대요 먼저 보내주세요", "The bank is under maintenance so it's delayed, please ship first."},
		pair{"이체확인증 보내드렸잖아요 빨리 발송해주세요", "I sent you the transfer receipt, ship it now."},
	)
	g.maybeInject(buyer)
}

func fakeShippingProof(g *roomGen) {
	g.opening()
	g.say(buyer, "입금했습니다 발송 부탁드려요", "I've transferred the money, please ship.")
	g.pause()
	g.flag(seller, "발송했어요 {courier} 송장번호 {tracking}", "Shipped via {courier}, tracking {tracking}")
	g.image(seller, "shipping_receipt.jpg", true)
	g.pause()
	g.say(buyer, "송장 조회가 안되는데요?", "The tracking number doesn't show up.")
	g.flag(seller, "내일 되면 조회될 거예요 영수증 보내드렸잖아요", "It'll show up tomorrow, I sent you the receipt.")
	g.maybeInject(seller)
}

func personalInfo(g *roomGen) {
	g.opening()
	g.flag(seller, "요즘 사기가 많아서 본인 확인용으로 신분증 사진 한 장만 보내주세요", "There's a lot of fraud lately, please send a photo of your ID card to verify.")
	if g.chance(0.5) {
		g.image(buyer, "id_card.jpg", true)
	} else {
		g.say(buyer, "신분증은 좀...", "I'd rather not send my ID...")
	}
	switch g.r.IntN(2) {
	case 0:
		g.flag(seller, "문자로 인증번호 6자리 갔을 거예요 알려주세요", "You should have a 6-digit verification code by text, tell me what it is.")
		if g.chance(0.5) {
			g.say(buyer, "{otp} 이거요?", "{otp}, this one?")
		}
		g.sev = 5
	default:
		g.flag(seller, "결제 대행하려면 카드번호 16자리랑 유효기간도 필요해요", "To process the payment I need your 16-digit card number and expiry date.")
		if g.chance(0.4) {
			g.say(buyer, "{card} 입니다", "{card}")
			g.sev = 5
		}
	}
	g.maybeInject(seller)
}

func harassment(g *roomGen) {
	g.opening()
	switch g.r.IntN(3) {
	case 0:
		g.say(buyer, "{nego}에 주세요", "Give it to me for {nego}.")
		g.say(seller, "죄송하지만 네고는 어려워요", "Sorry, no haggling.")
		g.flag(buyer, "장난하냐? 이딴 걸 이 가격에 누가 사 병신아", "Are you kidding? Who'd pay that for this junk, you idiot.")
		g.say(seller, "말씀 조심하세요", "Watch your language.")
		g.flag(buyer, "꺼져 미친놈아 신고하든가", "Get lost, moron. Report me if you want.")
		g.sev = 3
	case 1:
		g.say(buyer, "받은 물건 하자 있어요 환불해주세요", "The item is defective, refund me.")
		g.say(seller, "직거래로 확인하고 가져가셨잖아요", "You checked it in person before you took it.")
		g.flag(buyer, "너 어디 사는지 다 알아. 환불 안 해주면 집 앞으로 찾아간다", "I know where you live. No refund and I'm coming to your door.")
		g.flag(buyer, "밤길 조심해라", "Watch your back at night.")
		g.sev = 5
	default:
		g.say(buyer, "직거래 가능해요?", "Can we meet in person?")
		g.say(seller, "네 {place}에서 가능해요", "Yes, at {place}.")
		g.flag(buyer, "목소리 예쁘실 것 같은데 거래 끝나고 술 한잔 해요 ㅎㅎ 얼굴 사진 좀 보내줘요", "You seem cute, let's grab a drink after. Send me a selfie ;)")
		g.say(seller, "거래만 할게요", "Just the trade, please.")
		g.flag(buyer, "왜 튕겨요 몸매 사진이라도 보내봐요", "Why so cold? At least send a body pic.")
		g.sev = 4
	}
	g.maybeInject(buyer)
}

func prohibitedItem(g *roomGen) {
	g.opening()
	switch g.r.IntN(5) {
	case 0:
		g.flag(seller, "사실 영양제는 핑계고 처방전 없이 졸피뎀 구해드릴 수 있어요", "Honestly the supplement is a cover, I can get you zolpidem without a prescription.")
		g.flag(seller, "한 통에 {price} 이고 택배로 몰래 보내드려요", "{price} a box, shipped discreetly.")
		g.sev = 5
	case 1:
		g.say(buyer, "정품 맞나요?", "Is it authentic?")
		g.flag(seller, "정품은 아니고 미러급 레플리카예요 티 하나도 안나요", "Not authentic, it's a mirror-grade replica. Nobody can tell.")
		g.sev = 3
	case 2:
		g.flag(seller, "가스총이랑 전기충격기도 있는데 같이 사실래요? 허가 없이 쓰셔도 돼요", "I also have a gas gun and a stun gun, want them too? No permit needed.")
		g.sev = 4
	case 3:
		g.flag(seller, "고농도 니코틴 액상이에요 성인인증 없이 보내드려요 미성년자도 상관없어요", "High-nicotine liquid, no age check, minors are fine.")
		g.sev = 4
	default:
		g.flag(seller, "떨 있어요 작대기도 구해드림 텔레 주세요", "Got weed, can get ice too, hit me up on Telegram.")
		g.sev = 5
	}
	g.say(buyer, "그건 좀 위험한 거 아닌가요?", "Isn't that risky?")
	g.say(seller, "다들 그렇게 사요 걱정 마세요", "Everyone buys like this, don't worry.")
	g.maybeInject(seller)
}

func spam(g *roomGen) {
	if g.chance(0.5) {
		g.system("구매자가 채팅방에 들어왔습니다", "Buyer joined the chat")
	}
	g.flagP(buyer, pick(g.r, spamTexts))
	g.say(seller, "뭐예요 이거?", "What is this?")
	if g.chance(0.5) {
		g.flagP(buyer, pick(g.r, spamTexts))
	}
}
