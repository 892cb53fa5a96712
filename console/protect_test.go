package console

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/moderation/moderationtest"
	"github.com/chatguard/chatguard/pipeline"
)

// seedActions writes, as the worker's save does, a notice in force, a
// dry-run restriction and an escalation in room-take-1.
func (e *takeEnv) seedActions(t *testing.T) (warn, restrict pipeline.ActionRecord) {
	t.Helper()
	at := e.clock.Now().Add(-time.Minute)
	warn = moderationtest.SeedAction("room-take-1", "acct-s", "prepay_notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, at)
	restrict = moderationtest.SeedAction("room-take-1", "acct-s", "prepay_hold", pipeline.ActionRestrictSender, pipeline.ModeDryRun, at)
	esc := moderationtest.SeedAction("room-take-1", "", "prepay_notice", pipeline.ActionEscalate, pipeline.ModeOn, at)
	for _, r := range []pipeline.ActionRecord{warn, restrict, esc} {
		require.NoError(t, e.db.WriteReversal(testCtx(t), moderation.Reversal{At: at, Actions: []pipeline.ActionRecord{r}}))
	}
	return warn, restrict
}

func (e *takeEnv) states(t *testing.T) map[string]string {
	t.Helper()
	rows, err := e.db.RoomActions(testCtx(t), "room-take-1", 100)
	require.NoError(t, err)
	out := map[string]string{}
	for _, r := range rows {
		out[r.Key] = r.State
	}
	return out
}

func (e *takeEnv) cleared(t *testing.T, account, rule string) bool {
	t.Helper()
	st, err := e.db.ActionState(testCtx(t), pipeline.ActionStateQuery{Accounts: []string{account}, Now: e.clock.Now()})
	require.NoError(t, err)
	return st.Cleared[pipeline.ActionClearedKey(account, rule)]
}

func TestAnOverturnReversesTheRoomsActionsAndItsUndoReappliesThem(t *testing.T) {
	e := newTakeEnv(t)
	warn, restrict := e.seedActions(t)
	alice := e.signIn(t, "alice@example.com")
	id := e.ids[0]
	page := alice.get(t, verdictPath(id, ""))
	require.Contains(t, page, `id="room-actions"`)
	require.Contains(t, page, `data-key="`+warn.IdempotencyKey+`" data-action="warn_counterpart" data-state="written"`)

	e.clock.Advance(time.Minute)
	code, _, body := alice.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"overturn"}, "label": {"clean"}})
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `id="protective" aria-labelledby="protective-h" hx-swap-oob="true"`, "the page's actions are swapped in with the decision")
	require.Contains(t, body, `data-key="`+warn.IdempotencyKey+`" data-action="warn_counterpart" data-state="reversed"`)

	retract := pipeline.ReversalActionKey(warn.IdempotencyKey, 1)
	st := e.states(t)
	require.Equal(t, moderation.ActionReversed, st[warn.IdempotencyKey])
	require.Equal(t, moderation.ActionReversed, st[restrict.IdempotencyKey])
	require.Equal(t, moderation.ActionWritten, st[retract])
	require.True(t, e.cleared(t, "acct-s", "prepay_notice"), "the overturn clears the account for the rule")
	require.True(t, e.cleared(t, "acct-s", "prepay_hold"))
	var sent int
	require.NoError(t, e.db.DB().QueryRowContext(testCtx(t), "SELECT COUNT(*) FROM outbox WHERE destination = 'actions' AND event_id = ?", retract).Scan(&sent))
	require.Equal(t, 1, sent, "the retraction goes out through the outbox")

	audits := e.actions(t)
	last := audits[len(audits)-1]
	require.Equal(t, moderation.ActionDecide, last.Action)
	require.Equal(t, moderation.DecisionOverturn, last.Decision, "the overturn's audit row, written before it acted")
	var auditedAt, reversedAt time.Time
	require.NoError(t, e.db.DB().QueryRowContext(testCtx(t), "SELECT MAX(requested_at) FROM moderation_actions").Scan(&auditedAt))
	require.NoError(t, e.db.DB().QueryRowContext(testCtx(t), "SELECT created_at FROM protective_actions WHERE idempotency_key = ?", retract).Scan(&reversedAt))
	require.False(t, reversedAt.Before(auditedAt))

	// A confirm over the overturn undoes it: the actions are re-applied
	// under their own keys and the cleared states lifted.
	ds, err := e.db.Decisions(testCtx(t), id, 1)
	require.NoError(t, err)
	e.clock.Advance(time.Minute)
	code, _, body = alice.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"confirm"}, "label": {"abusive"},
		"category": {"external_payment"}, "seen": {strconv.FormatUint(ds[0].ID, 10)}})
	require.Equal(t, http.StatusOK, code, body)
	st = e.states(t)
	require.Equal(t, moderation.ActionWritten, st[pipeline.ReapplyActionKey(warn.IdempotencyKey, 1)])
	require.Equal(t, moderation.ActionWritten, st[pipeline.ReapplyActionKey(restrict.IdempotencyKey, 1)])
	require.False(t, e.cleared(t, "acct-s", "prepay_notice"))
	require.Len(t, st, 7, "three actions, two reversals, two re-applications")
}
