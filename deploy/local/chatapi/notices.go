package chatapi

import (
	"strings"

	"github.com/chatguard/chatguard/pipeline"
)

// noticeTemplates are the notices the stand-in shows, by template id
// (pipeline.NoticeTemplate: <audience>_<category>) and locale. The chat
// service owns its texts: an action names a template and a locale and
// never carries text, so nothing a model wrote reaches a room.
var noticeTemplates = map[string]map[string]string{
	"counterpart_external_payment": {
		"ko": "[안전 안내] 번개페이(안전결제) 밖에서 계좌이체·선입금을 요청받으셨나요? 앱 밖에서 보낸 돈은 돌려받기 어렵습니다. 결제는 안전결제로만 진행하세요.",
		"en": "[Safety notice] Were you asked to pay by bank transfer outside safe payment? Money sent outside the app is hard to recover. Pay with safe payment only.",
	},
	"counterpart_off_platform": {
		"ko": "[안전 안내] 카카오톡·텔레그램 등 외부 메신저로 대화를 옮기자는 요청은 사기일 수 있습니다. 대화와 거래는 앱 안에서 하세요.",
		"en": "[Safety notice] A request to move the chat to another messenger may be a scam. Keep the chat and the deal in the app.",
	},
	"counterpart_phishing_link": {
		"ko": "[안전 안내] 채팅으로 받은 결제 링크는 열지 마세요. 안전결제는 앱 안에서만 진행됩니다.",
		"en": "[Safety notice] Do not open payment links sent in the chat. Safe payment happens inside the app only.",
	},
	"counterpart_triangle_fraud": {
		"ko": "[안전 안내] 판매자가 아닌 다른 사람의 계좌로 입금을 요청받았다면 3자 사기일 수 있습니다. 안전결제를 이용하세요.",
		"en": "[Safety notice] Being asked to pay into someone else's account may be a third-party scam. Use safe payment.",
	},
	"counterpart_fake_proof": {
		"ko": "[안전 안내] 입금·배송 캡처는 위조될 수 있습니다. 앱의 결제·배송 상태를 직접 확인하세요.",
		"en": "[Safety notice] Payment and shipping screenshots can be forged. Check the status in the app itself.",
	},
	"counterpart_personal_info": {
		"ko": "[안전 안내] 신분증 사진, 인증번호, 카드 번호는 누구에게도 보내지 마세요.",
		"en": "[Safety notice] Never send ID photos, one-time codes or card numbers to anyone.",
	},
	"counterpart_generic": {
		"ko": "[안전 안내] 이 대화에서 사기 의심 요청이 확인되었습니다. 결제는 안전결제로만 진행하세요.",
		"en": "[Safety notice] A request in this chat looks like a scam. Pay with safe payment only.",
	},
	"sender_harassment": {
		"ko": "[운영 안내] 욕설·위협·성희롱은 운영정책 위반입니다. 반복되면 이용이 제한될 수 있습니다.",
		"en": "[Notice] Insults, threats and harassment break the rules. Repeating them may restrict your account.",
	},
	"sender_generic": {
		"ko": "[운영 안내] 앱 밖 결제·연락 요청은 운영정책 위반입니다. 반복되면 이용이 제한될 수 있습니다.",
		"en": "[Notice] Asking for payment or contact outside the app breaks the rules. Repeating it may restrict your account.",
	},
}

// fallbackLocale is the locale of a notice whose locale the stand-in
// does not ship.
const fallbackLocale = "ko"

// noticeText returns the text of a notice action: its template in its
// locale, falling back, as the contract says, to the generic notice of
// its audience and to the fallback locale.
func noticeText(kind pipeline.ActionKind, template, locale string) string {
	if _, ok := noticeTemplates[template]; !ok {
		if kind == pipeline.ActionWarnCounterpart || strings.HasPrefix(template, "counterpart_") {
			template = "counterpart_generic"
		} else {
			template = "sender_generic"
		}
	}
	t, ok := noticeTemplates[template][locale]
	if !ok {
		t = noticeTemplates[template][fallbackLocale]
	}
	return t
}
