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

// decisionActions counts the decide and bulk_decide rows of the audit
// record so far.
func (e *takeEnv) decisionActions(t *testing.T) int {
	n := 0
	for _, r := range e.actions(t) {
		if r.Action == moderation.ActionDecide || r.Action == moderation.ActionBulkDecide {
			n++
		}
	}
	return n
}

// A no-change overturn and a confirm whose label or category were edited
// are refused with the reason on the page, before anything is audited or
// recorded; a canned reason leads the stored note.
func TestDecisionsThatDoNotMeanWhatTheySayAreRefused(t *testing.T) {
	e := newTakeEnv(t)
	alice := e.signIn(t, "alice@example.com")
	id := e.ids[0]
	for _, tc := range []struct {
		form url.Values
		why  string
	}{
		{url.Values{"decision": {"overturn"}, "label": {"abusive"}, "category": {"external_payment"}}, "an overturn must change the verdict&#39;s label or category"},
		{url.Values{"decision": {"confirm"}, "label": {"abusive"}, "category": {"phishing_link"}}, "a confirm keeps the verdict&#39;s label and category"},
		{url.Values{"decision": {"confirm"}, "label": {"suspicious"}, "category": {"external_payment"}}, "a confirm keeps the verdict&#39;s label and category"},
	} {
		code, _, body := alice.post(t, verdictPath(id, "/decide"), tc.form)
		require.Equal(t, http.StatusConflict, code, body)
		require.Contains(t, body, `id="refused"`)
		require.Contains(t, body, tc.why)
	}
	code, _, body := alice.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"confirm"}, "reason": {"no such reason"}})
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Zero(t, e.decisionActions(t), "a refused form is not audited")
	ds, err := e.db.Decisions(testCtx(t), id, 10)
	require.NoError(t, err)
	require.Empty(t, ds)

	code, _, body = alice.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"confirm"}, "label": {"abusive"},
		"category": {"external_payment"}, "reason": {"known scam script"}, "note": {"  same script as yesterday "}})
	require.Equal(t, http.StatusOK, code, body)
	ds, err = e.db.Decisions(testCtx(t), id, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, "known scam script: same script as yesterday", ds[0].Note)
}

// Undo: only one's own decision in force, within the window, audited
// before the reversing row; the item is back in the queue and nothing is
// deleted.
func TestUndoReversesADecisionWithinTheWindow(t *testing.T) {
	e := newTakeEnv(t)
	alice, bob := e.signIn(t, "alice@example.com"), e.signIn(t, "bob@example.com")
	id := e.ids[0]
	code, _, body := alice.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"overturn"}, "label": {"clean"}})
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `id="undo-form"`, "the moderator is offered the undo")
	ds, err := e.db.Decisions(testCtx(t), id, 10)
	require.NoError(t, err)
	undo := url.Values{"decision_id": {strconv.FormatUint(ds[0].ID, 10)}}
	require.NotContains(t, bob.get(t, verdictPath(id, "")), `id="undo-form"`, "not offered to another moderator")
	code, _, body = bob.post(t, verdictPath(id, "/undo"), undo)
	require.Equal(t, http.StatusConflict, code, body)
	require.Contains(t, body, "only your own decision can be undone")
	require.NotContains(t, alice.get(t, "/queue"), verdictPath(id, ""), "decided: out of the queue")

	before := len(e.actions(t))
	fb := e.srv.feedback.(*fakeFeedback)
	sentBefore := len(fb.msgs)
	code, _, body = alice.post(t, verdictPath(id, "/undo"), undo)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Saved: undo of overturn")
	// The undo's feedback event names the undone decision's, so the lake
	// can leave both out; SQS took it, so its row is marked sent.
	require.Len(t, fb.msgs, sentBefore+1, "an undo sends its feedback event")
	var ev struct {
		EventID string                     `json:"event_id"`
		Payload pipeline.ModeratorFeedback `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(fb.msgs[sentBefore].Body, &ev))
	require.Equal(t, pipeline.FeedbackUndo, ev.Payload.Decision)
	require.Equal(t, feedbackEventID(ds[0].ID), ev.Payload.ReversesEventID)
	require.Equal(t, pipeline.LabelClean, ev.Payload.DecidedLabel, "the label undone")
	require.Equal(t, alice.who.ID, ev.Payload.ModeratorID)
	rows := e.actions(t)[before:]
	require.Len(t, rows, 1)
	require.Equal(t, moderation.AuditRecord{Moderator: alice.who.ID, Action: moderation.ActionDecide, VerdictID: id, RoomID: "room-take-1",
		Decision: moderation.DecisionUndo, Label: pipeline.LabelClean, DecisionID: ds[0].ID}, moderation.AuditRecord{Moderator: rows[0].Moderator,
		Action: rows[0].Action, VerdictID: rows[0].VerdictID, RoomID: rows[0].RoomID, Decision: rows[0].Decision, Label: rows[0].Label, DecisionID: rows[0].DecisionID})
	ds, err = e.db.Decisions(testCtx(t), id, 10)
	require.NoError(t, err)
	require.Len(t, ds, 2, "a reversing row, never a delete")
	require.Equal(t, feedbackEventID(ds[0].ID), ev.EventID)
	require.False(t, ds[0].FeedbackSentAt.IsZero(), "the undo's event was accepted: marked")
	_, inForce := moderation.InForce(ds)
	require.False(t, inForce)
	require.Contains(t, alice.get(t, "/queue"), verdictPath(id, ""), "undone: back in the queue")
	code, _, body = alice.post(t, verdictPath(id, "/undo"), undo)
	require.Equal(t, http.StatusConflict, code, "undone once: %s", body)

	// Past the window, the undo is refused: decide again instead.
	code, _, _ = alice.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"confirm"}})
	require.Equal(t, http.StatusOK, code)
	ds, err = e.db.Decisions(testCtx(t), id, 10)
	require.NoError(t, err)
	e.clock.Advance(e.srv.cfg.UndoWindow + time.Second)
	code, _, body = alice.post(t, verdictPath(id, "/undo"), url.Values{"decision_id": {strconv.FormatUint(ds[0].ID, 10)}})
	require.Equal(t, http.StatusConflict, code, body)
	require.Contains(t, body, "the undo window")
}

// A bulk decision from the queue's multi-select: no default category, a
// confirmation step showing what is applied (nothing audited before it),
// then one bulk_decide and a decide per item.
func TestQueueBulkDecisionConfirmsWhatItApplies(t *testing.T) {
	e := newTakeEnv(t)
	alice := e.signIn(t, "alice@example.com")
	form := url.Values{"decision": {"overturn"}, "label": {"suspicious"}, "id": {strconv.FormatUint(e.ids[0], 10), strconv.FormatUint(e.ids[1], 10)}}
	code, _, body := alice.post(t, "/queue/decide", form)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "choose the category to apply")
	confirm := url.Values{"decision": {"confirm"}, "label": {"abusive"}, "id": form["id"], "confirmed": {"1"}}
	code, _, body = alice.post(t, "/queue/decide", confirm)
	require.Equal(t, http.StatusConflict, code, body)
	require.Contains(t, body, "a confirm keeps each verdict&#39;s label and category")

	form.Set("category", string(pipeline.CategorySpam))
	code, _, body = alice.post(t, "/queue/decide", form)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `id="apply-category">spam`)
	require.Contains(t, body, `<span class="badge suspicious">suspicious</span>`)
	require.Contains(t, body, `id="bulk-yes">Yes, overturn 2 item(s)`)
	require.Contains(t, body, `<input type="hidden" name="category" value="spam">`, "the step posts the same form again")
	require.Zero(t, e.decisionActions(t), "the confirmation step does not act")

	form.Set("confirmed", "1")
	code, _, body = alice.post(t, "/queue/decide", form)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "<b>2</b> item(s) decided")
	var kinds []moderation.ActionKind
	for _, r := range e.actions(t) {
		kinds = append(kinds, r.Action)
	}
	require.Equal(t, []moderation.ActionKind{moderation.ActionBulkDecide, moderation.ActionDecide, moderation.ActionDecide}, kinds)
	for _, id := range e.ids {
		ds, err := e.db.Decisions(testCtx(t), id, 10)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.Equal(t, pipeline.CategorySpam, ds[0].Category)
	}
}

// The queue list shows each item's evidence snippet and the first line of
// its rationale, masked, and "my items" keeps the items one holds.
func TestQueueListShowsMaskedEvidenceAndMyItems(t *testing.T) {
	e := newTakeEnv(t)
	alice := e.signIn(t, "alice@example.com")
	ctx := testCtx(t)
	ws := window.Add(-5 * time.Hour)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: "room-snippet", WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"},
		RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 5,
		Action: pipeline.ActionWarn, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: ws,
		Rationale: "asks for a deposit first to 010-9876-5432\nsecond line stays on the room page",
		Stages: []pipeline.StageResult{{Stage: pipeline.StageExtract, Pool: pipeline.PoolPrimary, Model: "m", Attempts: 1,
			Output: []byte(`{"evidence":[{"message_id":"m1","category":"external_payment","quote":"선입금 먼저 010-1234-5678 로 연락"}]}`)}}}
	storetest.MustSave(t, ctx, e.db, v)
	page := alice.get(t, "/queue")
	require.Contains(t, page, `<q class="snippet">선입금 먼저`)
	require.Contains(t, page, `<div class="why">asks for a deposit first to`)
	require.NotContains(t, page, "second line")
	for _, raw := range []string{"010-1234-5678", "01012345678", "010-9876-5432"} {
		require.NotContains(t, page, raw, "the list never shows a contact value")
	}
	code, _, _ := alice.post(t, verdictPath(e.ids[1], "/take"), nil)
	require.Equal(t, http.StatusSeeOther, code)
	mine := alice.get(t, "/queue?mine=1")
	require.Contains(t, mine, verdictPath(e.ids[1], ""))
	require.NotContains(t, mine, verdictPath(e.ids[0], ""))
	require.Equal(t, 1, strings.Count(mine, `class="pick"`))
}

func TestUndoWindowAndReasonsAreValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DevLogin = true
	require.NoError(t, cfg.Validate())
	for _, bad := range []func(c *Config){
		func(c *Config) { c.UndoWindow = -time.Second },
		func(c *Config) { c.UndoWindow = 2 * time.Hour },
		func(c *Config) { c.DecisionReasons = []string{"same", "same"} },
		func(c *Config) { c.DecisionReasons = []string{" padded"} },
		func(c *Config) { c.DecisionReasons = []string{strings.Repeat("x", 101)} },
	} {
		c := cfg
		bad(&c)
		require.Error(t, c.Validate())
	}
	require.Equal(t, "선입금 먼저 ***-****-**78 로 연락", snippet("선입금 먼저\n010-1234-5678 로 연락"), "masked as the worker masks, on one line")
	require.Equal(t, "first", firstLine("\n  \nfirst\nsecond"))
	require.Len(t, []rune(snippet(strings.Repeat("가", 500))), snippetRunes)
}
