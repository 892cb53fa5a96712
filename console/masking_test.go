package console

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/moderation/moderationtest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/live"
	"github.com/chatguard/chatguard/pipeline/llm"
)

// corpusValue is one contact value of the test corpus: its digits (or id)
// and every spelling the corpus writes it in.
type corpusValue struct {
	canonical string
	spellings []string
}

// corpus is a chat the console has never seen: a shop's mobile and a
// 14-digit account in every spelling abusers use, a bank account, a
// messenger id, an e-mail, and a look-alike payment link whose host must
// stay visible.
var corpus = []corpusValue{
	{"01098765432", []string{"010-9876-5432", "０１０９８７６５４３２", "공일공 구팔칠육 오사삼이", "010 9876 5432", "0 1 0 9 8 7 6 5 4 3 2"}},
	{"12345678901234", []string{"12345678901234", "일이삼사오육칠팔구공일이삼사", "１２３４５６７８９０１２３４", "1234-5678-9012-34"}},
	{"1002123456789", []string{"1002-123-456789"}},
	{"safe_deal77", []string{"safe_deal77"}},
	{"kimdeal@naver.com", []string{"kimdeal@naver.com", "kimdeal"}},
	{"55566677788899", []string{"55566677788899"}},
}

const lookAlikeHost = "bunjang-pay.safe24.xyz"

func corpusChat(at time.Time) []pipeline.ChatMessage {
	texts := []string{
		"매장 폰 010-9876-5432 로 연락주세요 (０１０９８７６５４３２)",
		"공일공 구팔칠육 오사삼이 / 010 9876 5432 / 0 1 0 9 8 7 6 5 4 3 2",
		"계좌 일이삼사오육칠팔구공일이삼사 입니다. 숫자로 12345678901234, １２３４５６７８９０１２３４, 1234-5678-9012-34",
		"우리은행 1002-123-456789 로 선입금 부탁해요",
		"카톡 아이디 safe_deal77 메일은 kimdeal@naver.com",
		"안전결제 링크 https://" + lookAlikeHost + "/pay?acct=55566677788899",
	}
	var out []pipeline.ChatMessage
	for i, t := range texts {
		out = append(out, pipeline.ChatMessage{MessageID: fmt.Sprintf("m%d", i+1), SenderID: "s1", SenderRole: pipeline.RoleSeller,
			Kind: pipeline.KindText, Text: t, SentAt: at.Add(time.Duration(i) * time.Minute)})
	}
	return out
}

type corpusSource struct{ at time.Time }

func (c corpusSource) History(context.Context, string, time.Time, time.Time) ([]pipeline.ChatMessage, error) {
	return corpusChat(c.at), nil
}

// echoReviewer streams the chat it reads back as tokens and puts it in
// its rationale: the worst a model can do with contact details.
type echoReviewer struct{}

func (echoReviewer) PipelineVersion() string { return "v1" }
func (echoReviewer) Review(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, _ int) (pipeline.Verdict, error) {
	o := llm.ObserverFrom(ctx)
	o.Attempt(pipeline.StageJudge, 1, pipeline.PoolPrimary)
	var all []string
	for _, m := range msgs {
		o.Delta(pipeline.StageJudge, m.Text+"\n")
		all = append(all, m.Text)
	}
	return pipeline.Verdict{Key: ev.Key("v1"), RunID: ev.RunID, Status: pipeline.StatusDone, Label: pipeline.LabelAbusive,
		Category: pipeline.CategoryExternalPayment, Severity: 4, Rationale: strings.Join(all, " ")}, nil
}

// corpusConsole runs the console over the in-memory store with one flagged
// verdict of the corpus chat (carrying a contact campaign mark, about the
// seller s1) and one audit item; it returns the console, the store, the
// flagged verdict's id and the mark.
func corpusConsole(t *testing.T, c clock.Clock) (*testConsole, *moderationtest.Memory, uint64, string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DevLogin, cfg.TrustedProxies, cfg.AuditShare = true, "127.0.0.1/32", 1
	st := moderationtest.NewMemory()
	mark := moderationtest.Mark(45)
	v := moderationtest.Verdict("room-corpus", mark)
	v.Campaigns[0].Kind, v.Subjects, v.EvidenceIDs = pipeline.CampaignContact, []string{"s1"}, []string{"m1", "m3"}
	v.Rationale = "The seller asks for a prepayment to 우리은행 1002-123-456789 and gives 010-9876-5432."
	v.Stages = []pipeline.StageResult{{Stage: pipeline.StageExtract, Output: []byte(`{"evidence":[{"message_id":"m1","span":"010-9876-5432"}]}`)}}
	id := moderationtest.Seed(t, st, v)
	clean := moderationtest.Verdict("room-corpus-clean")
	clean.Label, clean.Category, clean.Severity, clean.Action = pipeline.LabelClean, pipeline.CategoryClean, 0, pipeline.ActionNone
	moderationtest.Seed(t, st, clean)
	ml := &memLog{evs: map[string][]pipeline.LiveEvent{}}
	hub, err := live.NewHub(cfg.Hub(), ml, nil)
	require.NoError(t, err)
	app, err := New(cfg, Deps{Store: st, Feedback: &fakeFeedback{}, Chat: corpusSource{at: moderationtest.T0}, Reviewer: echoReviewer{},
		Hub: hub, LiveLog: ml, Clock: c, History: st})
	require.NoError(t, err)
	ts := httptest.NewServer(app.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { app.cancelWork(nil); app.rv.running.Wait() })
	return &testConsole{app: app, srv: app.srv, ts: ts}, st, id, mark
}

var tagRe = regexp.MustCompile(`<[^>]*>`)

// requireNoCorpusValue fails when page's HTML holds a corpus value in any
// spelling the corpus uses, or its digits once the page's text is
// normalized (full-width folded, separators dropped).
func requireNoCorpusValue(t *testing.T, name, page string) {
	t.Helper()
	text := html.UnescapeString(tagRe.ReplaceAllString(page, ""))
	raw := html.UnescapeString(page)
	folded := strings.NewReplacer(" ", "", "-", "", ".", "", "\n", "").Replace(norm.NFKC.String(text))
	for _, v := range corpus {
		for _, sp := range v.spellings {
			require.NotContains(t, raw, sp, "%s shows %q unmasked", name, sp)
		}
		require.NotContains(t, folded, v.canonical, "%s shows %s in some spelling", name, v.canonical)
	}
}

func get(t *testing.T, hc *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := hc.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// Every page a moderator opens (queue, audit queue, room, campaign,
// account, shift, the reveal form, an on-demand review's stream) is
// scanned for the corpus's own values in every spelling it uses: none is
// there until a reveal, which is audited before the value is sent; link
// hosts stay visible.
func TestNoContactValueBeforeAnAuditedReveal(t *testing.T) {
	c, st, id, mark := corpusConsole(t, nil)
	hc := c.client(t, "alice@example.com")
	who := Who{Email: "alice@example.com", ID: moderatorID("alice@example.com")}
	room := fmt.Sprintf("%s/verdicts/%d", c.ts.URL, id)
	pages := map[string]string{"queue": "/queue", "audit queue": "/queue?audit=1", "room": fmt.Sprintf("/verdicts/%d", id),
		"campaign": campaignHref(mark), "account": accountHref("s1"), "shift": "/shift",
		"reveal form": fmt.Sprintf("/verdicts/%d/reveal?message=m1&n=0", id)}
	for name, p := range pages {
		code, body := get(t, hc, c.ts.URL+p)
		require.Equal(t, http.StatusOK, code, "%s: %s", name, body)
		requireNoCorpusValue(t, name, body)
	}
	_, body := get(t, hc, room)
	require.Contains(t, body, lookAlikeHost, "a link's host stays visible")
	require.Contains(t, body, `class="masked"`, "masked values link to their reveal")
	_, body = get(t, hc, c.ts.URL+campaignHref(mark))
	require.Contains(t, body, "**-****-**32", "the campaign shows its message, masked")

	// The on-demand review's stream: tokens and verdict.
	req, _ := http.NewRequest(http.MethodPost, c.ts.URL+"/v1/reviews", strings.NewReader(fmt.Sprintf(`{"room_id":"room-corpus","window_start":%q,"window_end":%q}`,
		moderationtest.T0.Format(time.RFC3339), moderationtest.T0.Add(time.Hour).Format(time.RFC3339))))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", c.srv.auth.csrfToken(who, time.Now()))
	resp, err := hc.Do(req)
	require.NoError(t, err)
	stream, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", stream)
	require.Contains(t, string(stream), "event: verdict")
	requireNoCorpusValue(t, "review stream", strings.ReplaceAll(string(stream), `\u003c`, "<"))

	// A reveal without a reason, or whose audit row cannot be written,
	// shows nothing.
	csrf := c.srv.auth.csrfToken(who, time.Now())
	form := url.Values{"csrf": {csrf}, "message": {"m1"}, "n": {"0"}}
	resp, err = hc.PostForm(room+"/reveal", form)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	requireNoCorpusValue(t, "refused reveal", string(b))
	form.Set("reason", moderation.RevealReasons[0])
	st.ActionErr = func(moderation.AuditRecord) error { return fmt.Errorf("audit store down") }
	resp, err = hc.PostForm(room+"/reveal", form)
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	requireNoCorpusValue(t, "unaudited reveal", string(b))
	for _, a := range st.Actions() {
		require.NotEqual(t, moderation.ActionReveal, a.Action)
	}

	// Audited, the one value is shown, and only it.
	st.ActionErr = nil
	resp, err = hc.PostForm(room+"/reveal", form)
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	require.Contains(t, string(b), `<b id="revealed-value">010-9876-5432</b>`)
	require.NotContains(t, string(b), "０１０９８７６５４３２", "only the value asked for")
	var reveals []moderation.AuditRecord
	for _, a := range st.Actions() {
		if a.Action == moderation.ActionReveal {
			reveals = append(reveals, a)
		}
	}
	require.Len(t, reveals, 1)
	require.Equal(t, who.ID, reveals[0].Moderator)
	require.Equal(t, "room-corpus", reveals[0].RoomID)
	require.Equal(t, id, reveals[0].VerdictID)
	require.Equal(t, "message m1 value 0: "+moderation.RevealReasons[0], reveals[0].Detail)
	require.NotContains(t, reveals[0].Detail, "9876", "the audit record never holds the value")
}
