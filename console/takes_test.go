package console

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

// syncBuffer is a log sink the handlers write from their goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// audits returns the actions of the audit lines logged so far, in order.
func (s *syncBuffer) audits(t *testing.T) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var l struct{ Msg, Action string }
		require.NoError(t, json.Unmarshal([]byte(line), &l))
		if l.Msg == "console: audit" {
			out = append(out, l.Action)
		}
	}
	return out
}

type takeEnv struct {
	ts    *httptest.Server
	srv   *server
	db    *mysql.Store
	clock *clock.Fake
	log   *syncBuffer
	ids   []uint64
}

// newTakeEnv is a console on the real MariaDB with two flagged verdicts,
// on a fake clock.
func newTakeEnv(t *testing.T) *takeEnv {
	t.Helper()
	db, _ := stacktest.MySQL(t)
	ctx := testCtx(t)
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	st := mysql.New(db)
	var ids []uint64
	for i, room := range []string{"room-take-1", "room-take-2"} {
		ws := window.Add(-time.Duration(i) * time.Hour)
		v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"},
			RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
			Action: pipeline.ActionWarn, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: ws}
		storetest.MustSave(t, ctx, st, v)
		id, err := st.VerdictID(ctx, v.Key)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	tmpl, err := parseTemplates()
	require.NoError(t, err)
	clk := clock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	cfg := DefaultConfig()
	cfg.DevLogin = true
	logs := &syncBuffer{}
	s := &server{cfg: cfg, auth: &auth{devLogin: true, key: []byte("0123456789abcdef0123456789abcdef"), clock: clk},
		store: st, chat: fakeChat{}, feedback: &fakeFeedback{}, log: slog.New(slog.NewJSONHandler(logs, nil)), tmpl: tmpl, clock: clk}
	ts := httptest.NewServer(s.routes())
	t.Cleanup(ts.Close)
	return &takeEnv{ts: ts, srv: s, db: st, clock: clk, log: logs, ids: ids}
}

// moderator is one signed-in browser: a cookie jar that does not follow
// redirects (the tests read where a POST sends the moderator).
type moderator struct {
	hc  *http.Client
	who Who
	e   *takeEnv
}

func (e *takeEnv) signIn(t *testing.T, email string) *moderator {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.PostForm(e.ts.URL+"/login", url.Values{"email": {email}, "next": {"/queue"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	return &moderator{hc: hc, who: Who{Email: email, ID: moderatorID(email)}, e: e}
}

func (m *moderator) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := m.hc.Get(m.e.ts.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return string(b)
}

// post posts form (with the CSRF token) as htmx does; it returns the status,
// the Location and the body.
func (m *moderator) post(t *testing.T, path string, form url.Values) (int, string, string) {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", m.e.srv.auth.csrfToken(m.who, m.e.clock.Now()))
	req, err := http.NewRequest(http.MethodPost, m.e.ts.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	resp, err := m.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

func verdictPath(id uint64, action string) string {
	return "/verdicts/" + strconv.FormatUint(id, 10) + action
}

func TestTakeShowsInTheQueueAndBlocksAnotherModeratorsDecision(t *testing.T) {
	e := newTakeEnv(t)
	alice, bob := e.signIn(t, "alice@example.com"), e.signIn(t, "bob@example.com")
	id := e.ids[0]

	code, loc, _ := alice.post(t, verdictPath(id, "/take"), nil)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, verdictPath(id, ""), loc, "taking opens the room")
	queue := alice.get(t, "/queue")
	require.Contains(t, queue, "taken by you")
	require.Contains(t, queue, `hx-get="/queue/counts"`, "the header's counts load after the page")
	counts := alice.get(t, "/queue/counts")
	require.Contains(t, counts, "<b>2</b> open", "the header counts the open queue")
	require.Contains(t, counts, "external_payment: <b>2</b>")
	require.Contains(t, counts, "over a day: <b>2</b>")
	require.Contains(t, bob.get(t, "/queue"), "taken by "+alice.who.ID)
	require.Contains(t, bob.get(t, verdictPath(id, "")), "Taken by <b>"+alice.who.ID+"</b>")

	// Bob cannot take it, and his decision is refused with the holder named.
	code, loc, _ = bob.post(t, verdictPath(id, "/take"), nil)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, verdictPath(id, "?take=refused"), loc)
	code, _, body := bob.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"confirm"}})
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, body, "Taken by "+alice.who.ID)
	require.Contains(t, body, `id="override-button"`)
	ds, err := e.db.Decisions(testCtx(t), id, 10)
	require.NoError(t, err)
	require.Empty(t, ds, "a refused decision records nothing")

	// Alice decides; her take ends with it.
	code, _, body = alice.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"confirm"}})
	require.Equal(t, http.StatusOK, code, body)
	_, held, err := e.db.TakeOf(testCtx(t), id)
	require.NoError(t, err)
	require.False(t, held, "a decision releases the take")

	// Bob's page was drawn before Alice's decision: he is told, not let
	// decide a second time unseen.
	code, _, body = bob.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"overturn"}, "label": {"clean"}, "seen": {"0"}})
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, body, "Decided meanwhile by "+alice.who.ID)
	ds, err = e.db.Decisions(testCtx(t), id, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, []string{"dev_login", "dev_login", "take", "take", "decide", "decide", "decide"}, e.log.audits(t),
		"Bob's refused take and decisions are audited too: each is recorded before it is tried")
}

func TestOverrideIsAuditedBeforeItActs(t *testing.T) {
	e := newTakeEnv(t)
	alice, bob := e.signIn(t, "alice@example.com"), e.signIn(t, "bob@example.com")
	id := e.ids[0]
	code, _, _ := alice.post(t, verdictPath(id, "/take"), nil)
	require.Equal(t, http.StatusSeeOther, code)

	code, _, body := bob.post(t, verdictPath(id, "/decide"), url.Values{"decision": {"overturn"}, "label": {"clean"}, "override": {"1"}})
	require.Equal(t, http.StatusOK, code, body)
	ds, err := e.db.Decisions(testCtx(t), id, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, bob.who.ID, ds[0].Moderator)
	require.Equal(t, []string{"dev_login", "dev_login", "take", "decide", "override_take"}, e.log.audits(t), "the override is recorded before it takes the item over")
	rows := e.actions(t)
	require.Equal(t, moderation.AuditRecord{Moderator: bob.who.ID, Action: moderation.ActionOverrideTake, VerdictID: id, RoomID: "room-take-1",
		Override: true, Holder: alice.who.ID}, rows[len(rows)-1], "the override's row names the holder")
}

func TestTakeGoesStaleAfterTheTimeoutAndItsTakerReleasesIt(t *testing.T) {
	e := newTakeEnv(t)
	alice, bob := e.signIn(t, "alice@example.com"), e.signIn(t, "bob@example.com")
	id, other := e.ids[0], e.ids[1]
	code, _, _ := alice.post(t, verdictPath(id, "/take"), nil)
	require.Equal(t, http.StatusSeeOther, code)

	// Alice's looking at the room is activity: it renews the take.
	e.clock.Advance(9 * time.Minute)
	alice.get(t, verdictPath(id, ""))
	e.clock.Advance(9 * time.Minute)
	require.Contains(t, bob.get(t, "/queue"), "taken by "+alice.who.ID)
	e.clock.Advance(time.Minute + time.Second)
	require.NotContains(t, bob.get(t, "/queue"), "taken by "+alice.who.ID, "ten minutes idle: shown free")
	code, loc, _ := bob.post(t, verdictPath(id, "/take"), nil)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, verdictPath(id, ""), loc)
	require.Contains(t, alice.get(t, verdictPath(id, "")), "Taken by <b>"+bob.who.ID+"</b>")

	// Only the taker releases: Alice's release of Bob's take changes nothing.
	code, _, _ = alice.post(t, verdictPath(id, "/release"), nil)
	require.Equal(t, http.StatusSeeOther, code)
	tk, held, err := e.db.TakeOf(testCtx(t), id)
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, bob.who.ID, tk.Moderator)
	code, loc, _ = bob.post(t, verdictPath(id, "/release"), nil)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/queue", loc)
	_, held, err = e.db.TakeOf(testCtx(t), id)
	require.NoError(t, err)
	require.False(t, held)
	_, held, err = e.db.TakeOf(testCtx(t), other)
	require.NoError(t, err)
	require.False(t, held, "nobody touched the other item")

	// Without a CSRF token a take is refused like every other POST.
	resp, err := bob.hc.PostForm(e.ts.URL+verdictPath(id, "/take"), url.Values{})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}
