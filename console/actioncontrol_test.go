package console

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation/moderationtest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// seedControlRoom saves a done verdict of room with a counterpart notice
// (on) and a restriction (dry run) about seller-c, and returns the
// verdict's id and the two records.
func seedControlRoom(t *testing.T, e *takeEnv, room string) (uint64, pipeline.ActionRecord, pipeline.ActionRecord) {
	t.Helper()
	ctx := testCtx(t)
	ws := window.Add(-3 * time.Hour)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"},
		RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
		Action: pipeline.ActionWarn, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: ws.Add(time.Hour),
		Subjects: []string{"seller-c"}, OffenderRole: pipeline.RoleSeller}
	warn := moderationtest.SeedAction(room, "seller-c", "notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, ws.Add(time.Hour))
	restrict := moderationtest.SeedAction(room, "seller-c", "heavy", pipeline.ActionRestrictSender, pipeline.ModeDryRun, ws.Add(time.Hour))
	warn.Key, restrict.Key = v.Key, v.Key
	v.Actions = []pipeline.ActionRecord{warn, restrict}
	storetest.MustSave(t, ctx, e.db, v)
	id, err := e.db.VerdictID(ctx, v.Key)
	require.NoError(t, err)
	return id, warn, restrict
}

func (e *takeEnv) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.DB().QueryRowContext(context.Background(), query, args...).Scan(&n))
	return n
}

// A moderator reverses one action by its key: audited first, its
// retraction written with its outbox message under a key of its own, the
// account cleared for the rule; a second click does nothing twice. The
// other action of the room is left as it was.
func TestAModeratorReversesOneActionByItsKey(t *testing.T) {
	e := newTakeEnv(t)
	e.srv.control = e.db
	id, warn, restrict := seedControlRoom(t, e, "room-ctl-1")
	alice := e.signIn(t, "alice@example.com")
	page := alice.get(t, verdictPath(id, ""))
	require.Contains(t, page, `action="/verdicts/`+itoa(id)+`/actions/reverse"`)
	require.Contains(t, page, `name="key" value="`+warn.IdempotencyKey+`"`)

	// Without a CSRF token: refused, nothing audited.
	resp, err := alice.hc.PostForm(e.ts.URL+verdictPath(id, "/actions/reverse"), url.Values{"key": {warn.IdempotencyKey}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Zero(t, e.count(t, "SELECT COUNT(*) FROM moderation_actions WHERE action = 'reverse_action'"))

	for range 2 {
		code, _, body := alice.post(t, verdictPath(id, "/actions/reverse"), url.Values{"key": {warn.IdempotencyKey}})
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `data-key="`+warn.IdempotencyKey+`" data-action="warn_counterpart" data-state="reversed"`)
		require.Contains(t, body, `data-key="`+restrict.IdempotencyKey+`" data-action="restrict_sender" data-state="written"`)
	}
	require.Equal(t, 2, e.count(t, "SELECT COUNT(*) FROM moderation_actions WHERE action = 'reverse_action' AND detail = ? AND verdict_id = ?",
		"key "+warn.IdempotencyKey, id), "each click is audited")
	retract := pipeline.ReversalActionKey(warn.IdempotencyKey, 1)
	require.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM protective_actions WHERE reverses = ? AND action = 'retract_notice' AND source = 'moderator'`,
		warn.IdempotencyKey), "reversed once")
	require.Equal(t, 1, e.count(t, "SELECT COUNT(*) FROM outbox WHERE destination = ? AND event_id = ?", string(pipeline.OutboxActions), retract))
	require.Equal(t, 1, e.count(t, "SELECT COUNT(*) FROM action_clearances WHERE account_id = 'seller-c' AND rule_id = 'notice'"))
	require.Zero(t, e.count(t, "SELECT COUNT(*) FROM action_clearances WHERE rule_id = 'heavy'"))

	code, _, _ := alice.post(t, verdictPath(id, "/actions/reverse"), url.Values{"key": {"a1-unknown"}})
	require.Equal(t, http.StatusNotFound, code, "an unknown key")
	code, _, _ = alice.post(t, verdictPath(e.ids[0], "/actions/reverse"), url.Values{"key": {restrict.IdempotencyKey}})
	require.Equal(t, http.StatusNotFound, code, "another room's key")
	// The audit row is written before the action: with the audit table
	// gone, nothing is reversed.
	_, err = e.db.DB().ExecContext(testCtx(t), "RENAME TABLE moderation_actions TO moderation_actions_off")
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = e.db.DB().ExecContext(context.Background(), "RENAME TABLE moderation_actions_off TO moderation_actions")
	})
	code, _, _ = alice.post(t, verdictPath(id, "/actions/reverse"), url.Values{"key": {restrict.IdempotencyKey}})
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, 1, e.count(t, "SELECT COUNT(*) FROM protective_actions WHERE state = 'written' AND idempotency_key = ?", restrict.IdempotencyKey))
}

// A moderator confirms one action: the first confirmation stays and the
// room page shows it; the Confirm control is gone.
func TestAModeratorConfirmsOneActionOnce(t *testing.T) {
	e := newTakeEnv(t)
	e.srv.control = e.db
	id, warn, _ := seedControlRoom(t, e, "room-ctl-2")
	alice, bob := e.signIn(t, "alice@example.com"), e.signIn(t, "bob@example.com")
	code, _, body := alice.post(t, verdictPath(id, "/actions/confirm"), url.Values{"key": {warn.IdempotencyKey}})
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `data-key="`+warn.IdempotencyKey+`" data-action="warn_counterpart" data-state="written" data-mode="on" data-confirmed-by="`+alice.who.ID+`"`)
	require.Contains(t, body, `id="action-note" role="status">confirmed<`)
	code, _, body = bob.post(t, verdictPath(id, "/actions/confirm"), url.Values{"key": {warn.IdempotencyKey}})
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "already confirmed")
	require.Equal(t, 1, e.count(t, "SELECT COUNT(*) FROM protective_actions WHERE idempotency_key = ? AND confirmed_by = ? AND confirmed_at IS NOT NULL",
		warn.IdempotencyKey, alice.who.ID))
	require.Equal(t, 2, e.count(t, "SELECT COUNT(*) FROM moderation_actions WHERE action = 'confirm_action' AND detail = ?", "key "+warn.IdempotencyKey))
	page := alice.get(t, verdictPath(id, ""))
	require.NotContains(t, page, `class="confirm-action" method="post" action="/verdicts/`+itoa(id)+`/actions/confirm" hx-post="/verdicts/`+itoa(id)+`/actions/confirm" hx-target="#protective" hx-swap="outerHTML"><input type="hidden" name="csrf" value="`+e.srv.auth.csrfToken(alice.who, e.clock.Now())+`"><input type="hidden" name="key" value="`+warn.IdempotencyKey+`"`)
	require.Contains(t, page, "confirmed by "+alice.who.ID)

	// Without the port, the page offers no control and the endpoints 404.
	e.srv.control = nil
	require.NotContains(t, alice.get(t, verdictPath(id, "")), "/actions/reverse")
	code, _, _ = alice.post(t, verdictPath(id, "/actions/reverse"), url.Values{"key": {warn.IdempotencyKey}})
	require.Equal(t, http.StatusNotFound, code)
}

func itoa(id uint64) string { return verdictPath(id, "")[len("/verdicts/"):] }
