package console

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// actions reads the moderation_actions rows so far, in order, without
// their times (the fake clock's).
func (e *takeEnv) actions(t *testing.T) []moderation.AuditRecord {
	t.Helper()
	rows, err := e.db.DB().QueryContext(testCtx(t), `SELECT moderator, action, verdict_id, room_id, mark, decision, label, category,
		override, holder, decision_id, rooms, detail FROM moderation_actions ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []moderation.AuditRecord
	for rows.Next() {
		var (
			r                     moderation.AuditRecord
			action, label, cat    string
			verdictID, decisionID sql.NullInt64
		)
		require.NoError(t, rows.Scan(&r.Moderator, &action, &verdictID, &r.RoomID, &r.Mark, &r.Decision, &label, &cat, &r.Override, &r.Holder,
			&decisionID, &r.Rooms, &r.Detail))
		r.Action, r.Label, r.Category = moderation.ActionKind(action), pipeline.Label(label), pipeline.Category(cat)
		r.VerdictID, r.DecisionID = uint64(verdictID.Int64), uint64(decisionID.Int64)
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// raceStore runs hook once, right after the next campaign page read that
// follows arm: what another moderator does between a bulk decision's page
// read and its takes.
type raceStore struct {
	moderation.Store
	mu    sync.Mutex
	armed func()
}

func (r *raceStore) arm(hook func()) {
	r.mu.Lock()
	r.armed = hook
	r.mu.Unlock()
}

func (r *raceStore) CampaignRooms(ctx context.Context, mark, cursor string, limit int) (moderation.CampaignPage, error) {
	page, err := r.Store.CampaignRooms(ctx, mark, cursor, limit)
	r.mu.Lock()
	hook := r.armed
	r.armed = nil
	r.mu.Unlock()
	if hook != nil {
		hook()
	}
	return page, err
}

// Between a bulk decision's page read and its take of a room, Bob takes,
// decides and releases that room. Alice's bulk confirm must not record a
// second decision over his unseen: the room is skipped and reported as
// decided meanwhile, like a taken one. With the override it is decided,
// after an override_decided row naming Bob.
func TestBulkDecisionSkipsARoomDecidedAfterThePageRead(t *testing.T) {
	e := newTakeEnv(t)
	race := &raceStore{Store: e.srv.store}
	e.srv.store = race
	alice, bob := e.signIn(t, "alice@example.com"), e.signIn(t, "bob@example.com")
	ids := e.campaignRooms(t, "seller-9", "room-r-1", "room-r-2")
	all := url.Values{"decision": {"confirm"}, "confirmed": {"1"}, "id": {strconv.FormatUint(ids[0], 10), strconv.FormatUint(ids[1], 10)}}
	race.arm(func() {
		code, _, _ := bob.post(t, verdictPath(ids[1], "/take"), nil)
		require.Equal(t, http.StatusSeeOther, code)
		code, _, body := bob.post(t, verdictPath(ids[1], "/decide"), url.Values{"decision": {"overturn"}, "label": {"clean"}})
		require.Equal(t, http.StatusOK, code, body)
		code, _, _ = bob.post(t, verdictPath(ids[1], "/release"), nil)
		require.Equal(t, http.StatusSeeOther, code)
	})
	code, _, body := alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/decide", all)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "<b>1</b> room(s) decided")
	require.Contains(t, body, "Skipped, decided meanwhile by: "+bob.who.ID)
	ds, err := e.db.Decisions(testCtx(t), ids[1], 10)
	require.NoError(t, err)
	require.Len(t, ds, 1, "Bob's decision alone: no second, contradicting one unseen")
	require.Equal(t, bob.who.ID, ds[0].Moderator)
	_, held, err := e.db.TakeOf(testCtx(t), ids[1])
	require.NoError(t, err)
	require.False(t, held, "the skipped room's take, the bulk decision's own, is released")

	// Decided over on purpose: the override names whose decision it replaces.
	bobsDecision := ds[0].ID
	all.Set("override", "1")
	all.Set("id", strconv.FormatUint(ids[1], 10))
	race.arm(func() {})
	code, _, body = alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/decide", all)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Skipped, decided already: 1", "the page read already shows Bob's decision: never decided unseen")

	// The same race with the override on: decided, audited first.
	ids2 := e.campaignRooms(t, "seller-9", "room-r-3")
	all.Set("id", strconv.FormatUint(ids2[0], 10))
	race.arm(func() {
		code, _, _ := bob.post(t, verdictPath(ids2[0], "/decide"), url.Values{"decision": {"overturn"}, "label": {"clean"}})
		require.Equal(t, http.StatusOK, code)
	})
	code, _, body = alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/decide", all)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Decided over the decision of: "+bob.who.ID)
	ds, err = e.db.Decisions(testCtx(t), ids2[0], 10)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	require.Equal(t, alice.who.ID, ds[0].Moderator)
	var over *moderation.AuditRecord
	for _, r := range e.actions(t) {
		if r.Action == moderation.ActionOverrideDecided {
			over = &r
		}
	}
	require.NotNil(t, over, "the override is recorded")
	require.Equal(t, moderation.AuditRecord{Moderator: alice.who.ID, Action: moderation.ActionOverrideDecided, VerdictID: ids2[0], RoomID: "room-r-3",
		Mark: testMark, Override: true, Holder: bob.who.ID, DecisionID: ds[1].ID}, *over)
	require.NotEqual(t, bobsDecision, ds[1].ID)
}

// With override=1, a room Bob takes after the page read is taken over,
// and the audit row before it names him.
func TestBulkOverrideNamesTheHolderOfARoomTakenAfterThePageRead(t *testing.T) {
	e := newTakeEnv(t)
	race := &raceStore{Store: e.srv.store}
	e.srv.store = race
	alice, bob := e.signIn(t, "alice@example.com"), e.signIn(t, "bob@example.com")
	ids := e.campaignRooms(t, "seller-9", "room-o-1")
	race.arm(func() {
		code, _, _ := bob.post(t, verdictPath(ids[0], "/take"), nil)
		require.Equal(t, http.StatusSeeOther, code)
	})
	code, _, body := alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/decide",
		url.Values{"decision": {"confirm"}, "confirmed": {"1"}, "override": {"1"}, "id": {strconv.FormatUint(ids[0], 10)}})
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Decided over the take of: "+bob.who.ID)
	rows := e.actions(t)
	kinds := make([]moderation.ActionKind, len(rows))
	for i, r := range rows {
		kinds[i] = r.Action
	}
	require.Equal(t, []moderation.ActionKind{moderation.ActionTake, moderation.ActionBulkDecide, moderation.ActionOverrideTake, moderation.ActionDecide}, kinds)
	require.Equal(t, moderation.AuditRecord{Moderator: alice.who.ID, Action: moderation.ActionOverrideTake, VerdictID: ids[0], RoomID: "room-o-1",
		Mark: testMark, Override: true, Holder: bob.who.ID}, rows[2])
	ds, err := e.db.Decisions(testCtx(t), ids[0], 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, alice.who.ID, ds[0].Moderator)
}

// auditedFirst checks, at each effect, that the action's audit row is in
// MySQL already.
type auditedFirst struct {
	moderation.Store
	t   *testing.T
	e   *takeEnv
	saw []moderation.ActionKind
}

func (a *auditedFirst) last() moderation.ActionKind {
	rows := a.e.actions(a.t)
	require.NotEmpty(a.t, rows, "an effect with no audit row before it")
	return rows[len(rows)-1].Action
}

func (a *auditedFirst) TakeItem(ctx context.Context, id uint64, who string, now, stale time.Time, force bool) (moderation.Take, error) {
	a.saw = append(a.saw, a.last())
	return a.Store.TakeItem(ctx, id, who, now, stale, force)
}

func (a *auditedFirst) AddDecision(ctx context.Context, d moderation.Decision) (uint64, error) {
	require.Equal(a.t, moderation.ActionDecide, a.last(), "a decision's row is written before it")
	return a.Store.AddDecision(ctx, d)
}

func (a *auditedFirst) ReleaseCampaign(ctx context.Context, mark, who string) (int, error) {
	require.Equal(a.t, moderation.ActionReleaseCampaign, a.last())
	return a.Store.ReleaseCampaign(ctx, mark, who)
}

func (a *auditedFirst) TakeCampaign(ctx context.Context, mark, who string, now, stale time.Time) (moderation.CampaignTakes, error) {
	require.Equal(a.t, moderation.ActionTakeCampaign, a.last())
	return a.Store.TakeCampaign(ctx, mark, who, now, stale)
}

// Every action's row is in moderation_actions when its effect happens.
func TestEveryActionIsRecordedBeforeItActs(t *testing.T) {
	e := newTakeEnv(t)
	af := &auditedFirst{Store: e.srv.store, t: t, e: e}
	e.srv.store = af
	alice := e.signIn(t, "alice@example.com")
	ids := e.campaignRooms(t, "seller-9", "room-a-1", "room-a-2")
	code, _, _ := alice.post(t, verdictPath(e.ids[0], "/take"), nil)
	require.Equal(t, http.StatusSeeOther, code)
	code, _, _ = alice.post(t, verdictPath(e.ids[0], "/decide"), url.Values{"decision": {"confirm"}})
	require.Equal(t, http.StatusOK, code)
	code, _, _ = alice.post(t, verdictPath(e.ids[1], "/release"), nil)
	require.Equal(t, http.StatusSeeOther, code)
	code, _, _ = alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/take", nil)
	require.Equal(t, http.StatusOK, code)
	code, _, _ = alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/release", nil)
	require.Equal(t, http.StatusOK, code)
	code, _, _ = alice.post(t, "/campaigns/"+url.PathEscape(testMark)+"/decide",
		url.Values{"decision": {"confirm"}, "confirmed": {"1"}, "id": {strconv.FormatUint(ids[0], 10), strconv.FormatUint(ids[1], 10)}})
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []moderation.ActionKind{moderation.ActionTake, moderation.ActionDecide, moderation.ActionBulkDecide, moderation.ActionBulkDecide}, af.saw,
		"each take happened after its action's row")
	var kinds []moderation.ActionKind
	for _, r := range e.actions(t) {
		kinds = append(kinds, r.Action)
	}
	require.Equal(t, []moderation.ActionKind{moderation.ActionTake, moderation.ActionDecide, moderation.ActionRelease, moderation.ActionTakeCampaign,
		moderation.ActionReleaseCampaign, moderation.ActionBulkDecide, moderation.ActionDecide, moderation.ActionDecide}, kinds)
}

// When MariaDB refuses the audit row, every action is refused with a
// clear message and changes nothing.
func TestAnActionWhoseAuditRowFailsIsRefusedAndChangesNothing(t *testing.T) {
	e := newTakeEnv(t)
	alice, bob := e.signIn(t, "alice@example.com"), e.signIn(t, "bob@example.com")
	ids := e.campaignRooms(t, "seller-9", "room-f-1")
	code, _, _ := bob.post(t, verdictPath(e.ids[1], "/take"), nil)
	require.Equal(t, http.StatusSeeOther, code)
	_, err := e.db.DB().ExecContext(testCtx(t), `CREATE TRIGGER moderation_actions_refuse BEFORE INSERT ON moderation_actions FOR EACH ROW
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit refused (test)'`)
	require.NoError(t, err)
	before := e.actions(t)
	camp := "/campaigns/" + url.PathEscape(testMark)
	for _, c := range []struct {
		path string
		form url.Values
	}{
		{verdictPath(e.ids[0], "/take"), nil},
		{verdictPath(e.ids[0], "/decide"), url.Values{"decision": {"confirm"}}},
		{verdictPath(e.ids[1], "/decide"), url.Values{"decision": {"confirm"}, "override": {"1"}}},
		{verdictPath(e.ids[1], "/release"), nil},
		{camp + "/take", nil},
		{camp + "/release", nil},
		{camp + "/decide", url.Values{"decision": {"confirm"}, "confirmed": {"1"}, "id": {strconv.FormatUint(ids[0], 10)}}},
	} {
		code, _, body := alice.post(t, c.path, c.form)
		require.Equal(t, http.StatusServiceUnavailable, code, "%s: %s", c.path, body)
		require.Contains(t, body, "could not be recorded in the audit log", c.path)
	}
	require.Equal(t, before, e.actions(t))
	for _, id := range append([]uint64{ids[0]}, e.ids...) {
		ds, err := e.db.Decisions(testCtx(t), id, 10)
		require.NoError(t, err)
		require.Empty(t, ds)
	}
	_, held, err := e.db.TakeOf(testCtx(t), e.ids[0])
	require.NoError(t, err)
	require.False(t, held)
	_, held, err = e.db.TakeOf(testCtx(t), ids[0])
	require.NoError(t, err)
	require.False(t, held)
	tk, _, err := e.db.TakeOf(testCtx(t), e.ids[1])
	require.NoError(t, err)
	require.Equal(t, bob.who.ID, tk.Moderator, "the refused override left Bob's take")
}

// On the fake store: a decision or a stop whose audit row fails is refused
// and does nothing; a stop that is recorded names the moderator as a
// field of the stop request (which the operator API keeps in its own
// audit row).
func TestAFailingAuditStoreRefusesDecisionsAndStops(t *testing.T) {
	c := newTestConsole(t, 2)
	stops := &recordingStopper{}
	c.srv.stops = stops
	c.store.mu.Lock()
	c.store.auditErr = errors.New("audit store down")
	c.store.mu.Unlock()
	hc := c.client(t, "carol@example.com")
	who := Who{Email: "carol@example.com", ID: moderatorID("carol@example.com")}
	post := func(path string, form url.Values) int {
		form.Set("csrf", c.srv.auth.csrfToken(who, time.Now()))
		resp, err := hc.PostForm(c.ts.URL+path, form)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusServiceUnavailable, post("/verdicts/7/decide", url.Values{"decision": {"confirm"}}))
	require.Equal(t, http.StatusServiceUnavailable, post("/verdicts/7/stop", url.Values{}))
	c.store.mu.Lock()
	require.Empty(t, c.store.decisions, "not decided without its audit row")
	c.store.mu.Unlock()
	require.Empty(t, stops.reqs, "not published without its audit row")

	c.store.mu.Lock()
	c.store.auditErr = nil
	c.store.mu.Unlock()
	require.Equal(t, http.StatusOK, post("/verdicts/7/stop", url.Values{}))
	require.Len(t, stops.reqs, 1)
	require.Equal(t, who.ID, stops.reqs[0].Moderator)
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	require.Len(t, c.store.actions, 1)
	require.Equal(t, moderation.AuditRecord{At: c.store.actions[0].At, Moderator: who.ID, Action: moderation.ActionStop, VerdictID: 7, RoomID: "room-1",
		Detail: "ttl 10m0s"}, c.store.actions[0])
}

type recordingStopper struct {
	mu   sync.Mutex
	reqs []pipeline.StopRequest
}

func (r *recordingStopper) Stop(_ context.Context, req pipeline.StopRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return nil
}
