package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation/moderationtest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// An overturn reverses the verdict's protective actions after its
// decide row is audited: the restriction's lift is owed to the actions
// queue and the account is cleared for the rule.
func TestAnOverturnReversesTheVerdictsActions(t *testing.T) {
	e := newTakeEnv(t)
	e.srv.actions = e.db
	ctx := testCtx(t)
	ws := window.Add(-3 * time.Hour)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: "room-act-1", WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"},
		RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
		Action: pipeline.ActionRestrict, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: ws.Add(time.Hour),
		Subjects: []string{"seller-5"}, OffenderRole: pipeline.RoleSeller}
	until := ws.Add(25 * time.Hour)
	key := pipeline.ForwardActionKey(v.Key, 1, "heavy", pipeline.ActionRestrictSender, "seller-5")
	v.Actions = []pipeline.ActionRecord{{Key: v.Key, ProtectiveAction: pipeline.ProtectiveAction{
		SchemaVersion: 1, IdempotencyKey: key, PolicyVersion: "t", PolicyHash: strings.Repeat("a", 64), VerdictRevision: 1,
		Source: pipeline.ActionSourceRealtime, Mode: pipeline.ModeOn, IssuedAt: ws.Add(time.Hour), ExpiresAt: ws.Add(2 * time.Hour),
		Item: pipeline.ActionEntity{ID: "room-act-1", TypeID: pipeline.EntityRoom}, Creator: pipeline.ActionEntity{ID: "seller-5", TypeID: pipeline.EntityAccount},
		Action: pipeline.ActionRef{ID: pipeline.ActionRestrictSender}, Rules: []pipeline.ActionRule{{ID: "heavy", Name: "Heavy"}},
		Custom: pipeline.ActionCustom{Until: &until},
	}}}
	storetest.MustSave(t, ctx, e.db, v)
	id, err := e.db.VerdictID(ctx, v.Key)
	require.NoError(t, err)

	alice := e.signIn(t, "alice@example.com")
	code, _, body := alice.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"overturn"}, "label": {"clean"}})
	require.Equal(t, http.StatusOK, code, body)

	var audited, lifts, cleared int
	db := e.db.DB()
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM moderation_actions WHERE action = 'decide' AND verdict_id = ?", id).Scan(&audited))
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox o JOIN protective_actions a ON a.idempotency_key = o.event_id
		WHERE a.action = 'lift_restriction' AND a.reverses = ? AND a.source = 'moderator'`, key).Scan(&lifts))
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM action_clearances WHERE account_id = 'seller-5' AND rule_id = 'heavy' AND decision_id IS NOT NULL").Scan(&cleared))
	require.Equal(t, 1, audited)
	require.Equal(t, 1, lifts)
	require.Equal(t, 1, cleared)

	// Undone, the overturn's reversal is undone: the restriction is
	// applied again under a key of its own, the clearance is gone.
	ds, err := e.db.Decisions(ctx, id, 5)
	require.NoError(t, err)
	code, _, body = alice.post(t, verdictPath(id, "/undo"), url.Values{"decision_id": {strconv.FormatUint(ds[0].ID, 10)}})
	require.Equal(t, http.StatusOK, code, body)
	var reapplied int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox o JOIN protective_actions a ON a.idempotency_key = o.event_id
		WHERE a.action = 'restrict_sender' AND a.reverses = ?`, key).Scan(&reapplied))
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM action_clearances").Scan(&cleared))
	require.Equal(t, 1, reapplied)
	require.Zero(t, cleared)
}

// The room page lists the room's actions with their state, and an
// overturn swaps them in reversed beside the decision.
func TestTheRoomPageShowsTheActionsAndTheirReversal(t *testing.T) {
	e := newTakeEnv(t)
	e.srv.actions = e.db
	ctx := testCtx(t)
	ws := window.Add(-3 * time.Hour)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: "room-act-2", WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"},
		RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
		Action: pipeline.ActionWarn, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: ws.Add(time.Hour),
		Subjects: []string{"seller-6"}, OffenderRole: pipeline.RoleSeller}
	warn := moderationtest.SeedAction(v.Key.RoomID, "seller-6", "notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, ws.Add(time.Hour))
	warn.Key = v.Key
	v.Actions = []pipeline.ActionRecord{warn}
	storetest.MustSave(t, ctx, e.db, v)
	id, err := e.db.VerdictID(ctx, v.Key)
	require.NoError(t, err)

	alice := e.signIn(t, "alice@example.com")
	page := alice.get(t, verdictPath(id, ""))
	require.Contains(t, page, `id="room-actions"`)
	require.Contains(t, page, `data-key="`+warn.IdempotencyKey+`" data-action="warn_counterpart" data-state="written"`)

	code, _, body := alice.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"overturn"}, "label": {"clean"}})
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `id="protective" aria-labelledby="protective-h" hx-swap-oob="true"`, "swapped in with the decision")
	require.Contains(t, body, `data-key="`+warn.IdempotencyKey+`" data-action="warn_counterpart" data-state="reversed"`)
	require.Contains(t, body, `data-action="retract_notice" data-state="written"`, "the retraction is listed too")
}
