package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

const testMark = "hmac:0123456789abcdef01234567"

// campaignRooms saves a flagged verdict about seller in each room, each
// carrying testMark on message m2 (as the pipeline writes it), and returns
// their row ids.
func (e *takeEnv) campaignRooms(t *testing.T, seller string, rooms ...string) []uint64 {
	t.Helper()
	ctx := testCtx(t)
	var ids []uint64
	for i, room := range rooms {
		ws := window.Add(time.Duration(i) * time.Minute)
		v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"},
			RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
			Action: pipeline.ActionRestrict, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: ws.Add(time.Hour),
			Subjects: []string{seller}, OffenderRole: pipeline.RoleSeller}
		storetest.MustSave(t, ctx, e.db, v)
		id, err := e.db.VerdictID(ctx, v.Key)
		require.NoError(t, err)
		_, err = e.db.DB().ExecContext(ctx, `INSERT INTO verdict_campaigns (verdict_id, kind, mark, message_id, rooms, senders, room_id, label, category, decided_at)
			SELECT id, 'script', ?, 'm2', 40, 9, room_id, label, category, finished_at FROM verdicts WHERE id = ?`, testMark, id)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids
}

func TestAccountViewListsVerdictsHistoryAndCampaigns(t *testing.T) {
	e := newTakeEnv(t)
	alice := e.signIn(t, "alice@example.com")
	ids := e.campaignRooms(t, "seller-77", "room-acc-1", "room-acc-2")
	code, _, body := alice.post(t, verdictPath(ids[0], "/decide"), url.Values{"decision": {"overturn"}, "label": {"clean"}})
	require.Equal(t, http.StatusOK, code, body)

	room := alice.get(t, verdictPath(ids[1], ""))
	require.Contains(t, room, `id="open-account" href="/accounts/seller-77"`, "the a shortcut opens the verdict's subject")
	require.Contains(t, room, `href="/campaigns/`+url.PathEscape(testMark)+`"`, "the verdict links its campaign")

	// A clean room the seller only took part in is listed too, apart.
	ws := window.Add(-5 * time.Hour)
	clean := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: "room-acc-clean", WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"},
		RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelClean, Action: pipeline.ActionNone, Attempts: 1,
		PublishedAt: ws, StartedAt: ws, FinishedAt: ws.Add(time.Hour),
		Participants: []pipeline.HistoryAccount{{SenderID: "seller-77", Role: pipeline.RoleSeller}, {SenderID: "buyer-3", Role: pipeline.RoleBuyer}}}
	storetest.MustSave(t, testCtx(t), e.db, clean)
	cleanID, err := e.db.VerdictID(testCtx(t), clean.Key)
	require.NoError(t, err)

	page := alice.get(t, "/accounts/seller-77")
	require.Contains(t, page, `href="/verdicts/`+strconv.FormatUint(cleanID, 10)+`">room-acc-clean</a></td><td>seller</td>
<td>took part</td>`)
	require.Equal(t, 2, strings.Count(page, `<span class="subject">subject</span>`), "the two verdicts naming the seller")
	for _, id := range ids {
		require.Contains(t, page, `href="/verdicts/`+strconv.FormatUint(id, 10)+`"`)
	}
	require.Contains(t, page, `<span class="overturned">overturned</span> → clean`, "the overturn is shown, not only coloured")
	require.Contains(t, page, "in 2 of this account's rooms")
	history := page[strings.Index(page, `id="history"`):strings.Index(page, `id="campaigns"`)]
	require.Contains(t, history, "<td>external_payment</td><td>stands</td><td>1</td>", "the history counts the room that stands")
	require.Contains(t, history, "<td>external_payment</td><td><span class=\"overturned\">overturned</span></td><td>1</td>")

	require.Contains(t, alice.get(t, "/accounts/nobody"), "No verdict of a room with this account.")
	resp, err := alice.hc.Get(e.ts.URL + "/accounts/seller-77?cursor=bogus")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// A campaign's bulk decision is one audited action with its room count,
// then one decision and one feedback event per room; a room another
// moderator took is skipped unless overridden, a decided one never
// decided again.
func TestBulkDecisionRespectsTakesAndIsAuditedFirst(t *testing.T) {
	e := newTakeEnv(t)
	alice, bob := e.signIn(t, "alice@example.com"), e.signIn(t, "bob@example.com")
	ids := e.campaignRooms(t, "seller-9", "room-c-1", "room-c-2", "room-c-3", "room-c-4")
	code, _, _ := bob.post(t, verdictPath(ids[1], "/take"), nil)
	require.Equal(t, http.StatusSeeOther, code)
	code, _, body := bob.post(t, verdictPath(ids[3], "/decide"), url.Values{"decision": {"confirm"}})
	require.Equal(t, http.StatusOK, code, body)

	page := alice.get(t, "/campaigns/"+url.PathEscape(testMark))
	require.Contains(t, page, "pay to my account", "each room's matching message, fetched live")
	require.Contains(t, page, "taken by "+bob.who.ID)
	require.Contains(t, page, "Decide the 3 open room(s) shown")
	fb := e.srv.feedback.(*fakeFeedback)
	before := len(fb.msgs)

	all := url.Values{"decision": {"confirm"}, "confirmed": {"1"}}
	for _, id := range ids {
		all.Add("id", strconv.FormatUint(id, 10))
	}
	code, _, body = alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/decide", all)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "<b>2</b> room(s) decided")
	require.Contains(t, body, "Skipped, taken by another moderator: "+bob.who.ID)
	require.Contains(t, body, "Skipped, decided already: 1")
	for i, want := range []int{1, 0, 1, 1} {
		ds, err := e.db.Decisions(testCtx(t), ids[i], 10)
		require.NoError(t, err)
		require.Len(t, ds, want, "room %d", i)
	}
	require.Len(t, fb.msgs, before+2, "one feedback event per room decided")
	for _, m := range fb.msgs[before:] {
		var ev struct {
			EventType string `json:"event_type"`
		}
		require.NoError(t, json.Unmarshal(m.Body, &ev))
		require.Equal(t, string(pipeline.EventModeratorFeedback), ev.EventType)
	}
	ds, err := e.db.Decisions(testCtx(t), ids[0], 1)
	require.NoError(t, err)
	require.Equal(t, alice.who.ID, ds[0].Moderator)
	require.False(t, ds[0].FeedbackSentAt.IsZero(), "marked sent once SQS took it")
	audits := e.log.audits(t)
	require.Equal(t, []string{"bulk_decide", "decide", "decide"}, audits[len(audits)-3:], "audited as one action before it acts")
	require.Contains(t, e.log.b.String(), `"action":"bulk_decide","moderator":"`+alice.who.ID+`","mark":"`+testMark+`","decision":"confirm"`)
	require.Contains(t, e.log.b.String(), `"rooms":2`)

	// With an override, Bob's room is decided too: audited with his name.
	all.Set("override", "1")
	all.Set("decision", "overturn")
	all.Set("label", "suspicious")
	all.Set("category", string(pipeline.CategorySpam))
	code, _, body = alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/decide", all)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "<b>1</b> room(s) decided")
	require.Contains(t, body, "Decided over the take of: "+bob.who.ID)
	ds, err = e.db.Decisions(testCtx(t), ids[1], 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, moderation.Decision{VerdictID: ids[1], Moderator: alice.who.ID, Decision: moderation.DecisionOverturn, Label: pipeline.LabelSuspicious,
		Category: pipeline.CategorySpam}, moderation.Decision{VerdictID: ds[0].VerdictID, Moderator: ds[0].Moderator, Decision: ds[0].Decision, Label: ds[0].Label, Category: ds[0].Category})
	require.Contains(t, e.log.b.String(), `"action":"override_take","moderator":"`+alice.who.ID+`","verdict_id":`+strconv.FormatUint(ids[1], 10))
	require.Contains(t, e.log.b.String(), `"holder":"`+bob.who.ID+`"`)
	_, held, err := e.db.TakeOf(testCtx(t), ids[1])
	require.NoError(t, err)
	require.False(t, held, "the decision ended the take")

	// A room not on the page the moderator decided from is not decided.
	fresh := e.campaignRooms(t, "seller-9", "room-c-5")
	code, _, body = alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/decide", all)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "<b>0</b> room(s) decided")
	ds, err = e.db.Decisions(testCtx(t), fresh[0], 10)
	require.NoError(t, err)
	require.Empty(t, ds)

	// An overturn without a label is refused before anything is audited.
	n := len(e.log.audits(t))
	code, _, _ = alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/decide", url.Values{"decision": {"overturn"}, "id": all["id"]})
	require.Equal(t, http.StatusBadRequest, code)
	require.Len(t, e.log.audits(t), n)

	// Without a CSRF token, nothing.
	resp, err := bob.hc.PostForm(e.ts.URL+"/campaigns/"+url.PathEscape(testMark)+"/decide", all)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// Taking a whole campaign is audited first as one action with its open
// room count; Bob's room stays his and is named, the decided room is not
// taken, and Alice's release ends her takes only.
func TestTakeAllOfACampaignLeavesOthersTakes(t *testing.T) {
	e := newTakeEnv(t)
	alice, bob := e.signIn(t, "alice@example.com"), e.signIn(t, "bob@example.com")
	ids := e.campaignRooms(t, "seller-5", "room-t-1", "room-t-2", "room-t-3", "room-t-4")
	code, _, _ := bob.post(t, verdictPath(ids[1], "/take"), nil)
	require.Equal(t, http.StatusSeeOther, code)
	code, _, body := bob.post(t, verdictPath(ids[3], "/decide"), url.Values{"decision": {"confirm"}})
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, alice.get(t, "/campaigns/"+url.PathEscape(testMark)), `id="take-button"`)

	code, _, body = alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/take", nil)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "You hold <b>2</b> open room(s) of the campaign.")
	require.Contains(t, body, "Already taken by another moderator, left to them: "+bob.who.ID+" (1)")
	require.Contains(t, body, `id="release-all"`)
	audits := e.log.audits(t)
	require.Equal(t, "take_campaign", audits[len(audits)-1])
	require.Contains(t, e.log.b.String(), `"action":"take_campaign","moderator":"`+alice.who.ID+`","mark":"`+testMark+`","rooms":3`)
	for i, want := range []string{alice.who.ID, bob.who.ID, alice.who.ID, ""} {
		tk, _, err := e.db.TakeOf(testCtx(t), ids[i])
		require.NoError(t, err)
		require.Equal(t, want, tk.Moderator, "room %d", i)
	}
	// Bob is refused Alice's rooms as for any taken item.
	code, _, _ = bob.post(t, verdictPath(ids[0], "/decide"), url.Values{"decision": {"confirm"}})
	require.Equal(t, http.StatusConflict, code)

	code, _, body = alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/release", nil)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Released <b>2</b> room(s)")
	require.Equal(t, "release_campaign", e.log.audits(t)[len(e.log.audits(t))-1])
	tk, held, err := e.db.TakeOf(testCtx(t), ids[1])
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, bob.who.ID, tk.Moderator, "a release ends the releaser's takes only")
	_, held, err = e.db.TakeOf(testCtx(t), ids[0])
	require.NoError(t, err)
	require.False(t, held)

	// Without a CSRF token, nothing.
	resp, err := bob.hc.PostForm(e.ts.URL+"/campaigns/"+url.PathEscape(testMark)+"/take", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

func TestOpenAccountIsWhoTheVerdictIsAbout(t *testing.T) {
	chat := []pipeline.ChatMessage{{SenderID: "b1", SenderRole: pipeline.RoleBuyer}, {SenderID: "s1", SenderRole: pipeline.RoleSeller}}
	require.Equal(t, "s9", openAccount(pipeline.Verdict{Subjects: []string{"s9"}, OffenderRole: pipeline.RoleSeller}, chat))
	require.Equal(t, "s1", openAccount(pipeline.Verdict{OffenderRole: pipeline.RoleSeller}, chat), "the offender's side, not the first sender")
	require.Empty(t, openAccount(pipeline.Verdict{}, chat), "no guess when the verdict names no one")
}

// A shop repeating its greeting: its account page says so in one line,
// with no link to a campaign, and the mark's campaign view has no room to
// take or decide.
func TestARepeatSenderIsOneLineNotACampaign(t *testing.T) {
	e := newTakeEnv(t)
	alice := e.signIn(t, "alice@example.com")
	ids := e.campaignRooms(t, "shop-1", "room-shop-1", "room-shop-2")
	_, err := e.db.DB().ExecContext(testCtx(t), "UPDATE verdict_campaigns SET class = 'repeat_sender' WHERE verdict_id IN (?, ?)", ids[0], ids[1])
	require.NoError(t, err)

	page := alice.get(t, "/accounts/shop-1")
	require.Contains(t, page, `<li class="repeat-sender">Repeat sender: repeats its own script in 2 of this account's rooms`)
	require.NotContains(t, page, `class="campaign"`)
	require.NotContains(t, alice.get(t, verdictPath(ids[0], "")), `href="/campaigns/`)
	campaign := alice.get(t, "/campaigns/"+url.PathEscape(testMark))
	require.Contains(t, campaign, "No room carries this mark.")
	require.NotContains(t, campaign, `id="take-button"`)
	require.NotContains(t, campaign, `id="confirm-all"`)
}
