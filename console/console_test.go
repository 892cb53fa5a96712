package console

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/live"
	"github.com/chatguard/chatguard/pipeline/llm"
)

var window = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

type fakeStore struct {
	mu        sync.Mutex
	verdict   pipeline.Verdict
	decisions []moderation.Decision
	saved     []pipeline.Verdict
	actions   []moderation.AuditRecord
	// auditErr, when set, fails every RecordAction (nothing recorded).
	auditErr error
}

func (f *fakeStore) ListQueue(context.Context, moderation.QueueFilter, string) (moderation.QueuePage, error) {
	return moderation.QueuePage{Items: []moderation.QueueItem{{ID: 7, Key: f.verdict.Key, Label: f.verdict.Label, Category: f.verdict.Category, Severity: 4}}}, nil
}
func (f *fakeStore) ListAudit(context.Context, float64, int) ([]moderation.QueueItem, error) {
	return nil, nil
}
func (f *fakeStore) CountQueue(context.Context, time.Time) (moderation.QueueCounts, error) {
	return moderation.QueueCounts{}, nil
}
func (f *fakeStore) VerdictByID(_ context.Context, id uint64) (pipeline.Verdict, error) {
	if id != 7 {
		return pipeline.Verdict{}, pipeline.ErrVerdictNotFound
	}
	return f.verdict, nil
}
func (f *fakeStore) VerdictID(context.Context, pipeline.ReviewKey) (uint64, error) { return 7, nil }
func (f *fakeStore) AddDecision(_ context.Context, d moderation.Decision) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decisions = append(f.decisions, d)
	return uint64(len(f.decisions)), nil
}
func (f *fakeStore) MarkFeedbackSent(_ context.Context, at time.Time, ids ...uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if f.decisions[id-1].FeedbackSentAt.IsZero() {
			f.decisions[id-1].FeedbackSentAt = at
		}
	}
	return nil
}
func (f *fakeStore) Decisions(context.Context, uint64, int) ([]moderation.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]moderation.Decision(nil), f.decisions...), nil
}
func (f *fakeStore) Revise(_ context.Context, v pipeline.Verdict) (int, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saved = append(f.saved, v)
	return len(f.saved), true, nil
}
func (f *fakeStore) Ping(context.Context) error { return nil }

func (f *fakeStore) RoomActions(context.Context, string, int) ([]moderation.RoomAction, error) {
	return nil, nil
}

func (f *fakeStore) RecordAction(_ context.Context, r moderation.AuditRecord) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.auditErr != nil {
		return 0, f.auditErr
	}
	if err := r.Validate(); err != nil {
		return 0, pipeline.Permanent(err)
	}
	f.actions = append(f.actions, r)
	return uint64(len(f.actions)), nil
}

// Assignment: nobody else works here, so every take is the caller's
// (takes_test.go runs assignment on the real MariaDB).
func (f *fakeStore) TakeItem(_ context.Context, id uint64, mod string, now, _ time.Time, _ bool) (moderation.Take, error) {
	return moderation.Take{VerdictID: id, Moderator: mod, TakenAt: now, ActiveAt: now}, nil
}
func (f *fakeStore) TakeOf(context.Context, uint64) (moderation.Take, bool, error) {
	return moderation.Take{}, false, nil
}
func (f *fakeStore) TouchTake(context.Context, uint64, string, time.Time) (bool, error) {
	return false, nil
}
func (f *fakeStore) ReleaseItem(context.Context, uint64, string) (bool, error)   { return true, nil }
func (f *fakeStore) CountOpenCampaignRooms(context.Context, string) (int, error) { return 0, nil }
func (f *fakeStore) TakeCampaign(context.Context, string, string, time.Time, time.Time) (moderation.CampaignTakes, error) {
	return moderation.CampaignTakes{}, nil
}
func (f *fakeStore) ReleaseCampaign(context.Context, string, string) (int, error) { return 0, nil }

// Accounts and campaigns: none here (accounts_test.go reads the real
// MariaDB).
func (f *fakeStore) AccountVerdicts(context.Context, string, string, int) (moderation.AccountPage, error) {
	return moderation.AccountPage{}, nil
}
func (f *fakeStore) AccountHistory(context.Context, pipeline.HistoryQuery) ([]pipeline.HistoryCount, error) {
	return nil, nil
}
func (f *fakeStore) AccountCampaigns(context.Context, string) ([]moderation.CampaignMark, error) {
	return nil, nil
}
func (f *fakeStore) VerdictCampaigns(context.Context, uint64) ([]moderation.CampaignMark, error) {
	return nil, nil
}
func (f *fakeStore) CampaignRooms(context.Context, string, string, int) (moderation.CampaignPage, error) {
	return moderation.CampaignPage{}, nil
}

// The outbox's methods: these tests run no sweeper (feedback_test.go
// sweeps a real database).
func (f *fakeStore) SweepUnsentFeedback(context.Context, time.Time, time.Duration, int,
	func(context.Context, []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error)) (moderation.FeedbackSweep, error) {
	return moderation.FeedbackSweep{}, nil
}
func (f *fakeStore) FeedbackBacklog(context.Context) (moderation.FeedbackBacklog, error) {
	return moderation.FeedbackBacklog{}, nil
}

type fakeChat struct{}

func (fakeChat) History(context.Context, string, time.Time, time.Time) ([]pipeline.ChatMessage, error) {
	return []pipeline.ChatMessage{
		{MessageID: "m1", SenderRole: pipeline.RoleBuyer, Kind: pipeline.KindText, Text: "hello", SentAt: window},
		{MessageID: "m2", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, Text: "pay to my account", SentAt: window.Add(time.Minute)},
	}, nil
}

type fakeFeedback struct {
	mu   sync.Mutex
	msgs []pipeline.OutMessage
	err  error // when set, Send fails with it and keeps nothing
}

func (f *fakeFeedback) Send(_ context.Context, m []pipeline.OutMessage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.msgs = append(f.msgs, m...)
	return nil
}

// streamingReviewer streams tokens through the observer like the router,
// then waits for release (or ctx) before answering.
type streamingReviewer struct {
	release chan struct{}
	calls   int
	mu      sync.Mutex
}

func (s *streamingReviewer) PipelineVersion() string { return "v1" }
func (s *streamingReviewer) Review(ctx context.Context, ev pipeline.ReviewEvent, _ []pipeline.ChatMessage, _ int) (pipeline.Verdict, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	v := pipeline.Verdict{Key: ev.Key("v1"), RunID: ev.RunID, Status: pipeline.StatusFailed}
	o := llm.ObserverFrom(ctx)
	o.Attempt(pipeline.StageJudge, 1, pipeline.PoolPrimary)
	for range 40 {
		o.Delta(pipeline.StageJudge, "token ")
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return v, context.Cause(ctx)
	}
	v.Status, v.Label, v.Category, v.Severity = pipeline.StatusDone, pipeline.LabelAbusive, pipeline.CategoryExternalPayment, 4
	return v, nil
}

type testConsole struct {
	app   *App
	srv   *server
	ts    *httptest.Server
	store *fakeStore
	fb    *fakeFeedback
	rev   *streamingReviewer
	log   *memLog
}

type memLog struct {
	mu  sync.Mutex
	evs map[string][]pipeline.LiveEvent
}

func (m *memLog) Append(_ context.Context, id string, evs []pipeline.LiveEvent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evs[id] = append(m.evs[id], evs...)
	return nil
}

func (m *memLog) Read(_ context.Context, id string, after uint64, _ time.Duration) ([]pipeline.LiveEvent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	evs, ok := m.evs[id]
	if !ok {
		return nil, pipeline.ErrLiveGone
	}
	var out []pipeline.LiveEvent
	for _, ev := range evs {
		if ev.Seq > after {
			out = append(out, ev)
		}
	}
	return out, nil
}

func newTestConsole(t *testing.T, maxReviews int) *testConsole {
	t.Helper()
	return newTestConsoleOn(t, maxReviews, nil)
}

// newTestConsoleOn is newTestConsole on clock c (nil: the wall clock).
func newTestConsoleOn(t *testing.T, maxReviews int, c clock.Clock) *testConsole {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MaxReviews, cfg.DevLogin, cfg.TrustedProxies = maxReviews, true, "127.0.0.1/32"
	st := &fakeStore{verdict: pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: "room-1", WindowStart: window, WindowEnd: window.Add(time.Hour), PipelineVersion: "v1"},
		Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4, EvidenceIDs: []string{"m2"}, Rationale: "asks for a bank transfer"}}
	ml := &memLog{evs: map[string][]pipeline.LiveEvent{}}
	hub, err := live.NewHub(cfg.Hub(), ml, nil)
	require.NoError(t, err)
	rev := &streamingReviewer{release: make(chan struct{})}
	fb := &fakeFeedback{}
	app, err := New(cfg, Deps{Store: st, Feedback: fb, Chat: fakeChat{}, Reviewer: rev, Hub: hub, LiveLog: ml, Clock: c})
	require.NoError(t, err)
	ts := httptest.NewServer(app.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(rev.release); app.cancelWork(nil); app.rv.running.Wait() })
	return &testConsole{app: app, srv: app.srv, ts: ts, store: st, fb: fb, rev: rev, log: ml}
}

func (c *testConsole) client(t *testing.T, email string) *http.Client {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	resp, err := hc.PostForm(c.ts.URL+"/login", url.Values{"email": {email}, "next": {"/queue"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return hc
}

func TestAuthTrustsTheHeaderOnlyFromTheProxy(t *testing.T) {
	a := &auth{proxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, header: DefaultConfig().IdentityHeader, key: []byte("k"), clock: clock.Real()}
	r := httptest.NewRequest("GET", "/queue", nil)
	r.Header.Set("X-Forwarded-Email", "mod@example.com")
	r.RemoteAddr = "10.1.2.3:5555"
	who, ok := a.identify(r)
	require.True(t, ok)
	require.Equal(t, moderatorID("mod@example.com"), who.ID)
	require.NotContains(t, who.ID, "example")
	r.RemoteAddr = "192.168.1.1:5555"
	_, ok = a.identify(r)
	require.False(t, ok, "the identity header from outside the proxy's addresses is ignored")
}

func TestPagesDecisionAndCSRF(t *testing.T) {
	c := newTestConsole(t, 2)
	hc := c.client(t, "alice@example.com")
	resp, err := hc.Get(c.ts.URL + "/queue")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), `/verdicts/7`)

	resp, err = hc.Get(c.ts.URL + "/verdicts/7")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	require.Contains(t, page, `id="msg-m2" class="msg seller evidence"`, "the evidence message is highlighted")
	require.Contains(t, page, `id="msg-m1" class="msg buyer"`)
	require.Equal(t, 1, strings.Count(page, `<span class="ev-tag">evidence</span>`), "evidence is named in words, not by colour alone")

	// No CSRF token: refused, nothing recorded.
	resp, err = hc.PostForm(c.ts.URL+"/verdicts/7/decide", url.Values{"decision": {"confirm"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, c.store.decisions)

	who := Who{Email: "alice@example.com", ID: moderatorID("alice@example.com")}
	resp, err = hc.PostForm(c.ts.URL+"/verdicts/7/decide", url.Values{"decision": {"overturn"}, "label": {"clean"}, "category": {"spam"},
		"csrf": {c.srv.auth.csrfToken(who, time.Now())}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, c.store.decisions, 1)
	d := c.store.decisions[0]
	require.Equal(t, who.ID, d.Moderator)
	require.Equal(t, pipeline.LabelClean, d.Label)
	require.Len(t, c.fb.msgs, 1)
	var ev struct {
		EventType string                     `json:"event_type"`
		Payload   pipeline.ModeratorFeedback `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(c.fb.msgs[0].Body, &ev))
	require.Equal(t, "moderator_feedback", ev.EventType)
	require.Equal(t, pipeline.LabelAbusive, ev.Payload.VerdictLabel)
	require.Equal(t, pipeline.CategoryClean, ev.Payload.DecidedCategory)
	require.Equal(t, who.ID, ev.Payload.ModeratorID)
}

type sseEvent struct{ id, typ, data string }

func readEvents(t *testing.T, body io.Reader, n int, stopAt string) []sseEvent {
	t.Helper()
	sc := bufio.NewScanner(body)
	var out []sseEvent
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.typ != "" {
				out = append(out, cur)
				if len(out) == n || cur.typ == stopAt {
					return out
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

func (c *testConsole) startReview(t *testing.T, hc *http.Client) *http.Response {
	who := Who{ID: moderatorID("alice@example.com")}
	body := `{"room_id":"room-1","window_start":"2026-11-30T10:00:00Z","window_end":"2026-11-30T11:00:00Z"}`
	req, _ := http.NewRequest("POST", c.ts.URL+"/v1/reviews", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(csrfHeader, c.srv.auth.csrfToken(who, time.Now()))
	resp, err := hc.Do(req)
	require.NoError(t, err)
	return resp
}

func TestReviewStreamsAdmitsDrainsAndResumes(t *testing.T) {
	c := newTestConsole(t, 1)
	hc := c.client(t, "alice@example.com")
	resp := c.startReview(t, hc)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	id := resp.Header.Get("X-Review-ID")
	evs := readEvents(t, resp.Body, 4, "")
	require.Equal(t, "stage", evs[0].typ)
	require.Contains(t, evs[1].data, `"judge"`)
	require.Equal(t, "token", evs[2].typ)
	require.Contains(t, evs[2].data, "token")

	// The one slot is taken: the next review is refused at the door.
	busy := c.startReview(t, hc)
	busy.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, busy.StatusCode)
	require.NotEmpty(t, busy.Header.Get("Retry-After"))

	// Drain: the open stream gets a reconnect event; the review goes on.
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.app.Run(drain.WithHard(ctx, context.Background())) }()
	stop()
	rest := readEvents(t, resp.Body, 0, "reconnect")
	require.Equal(t, "reconnect", rest[len(rest)-1].typ)
	last := evs[len(evs)-1].id
	for _, e := range rest {
		if e.id != "" {
			last = e.id
		}
	}
	c.rev.release <- struct{}{}
	require.NoError(t, <-ran, "Run returns once the review has finished")
	require.NoError(t, c.srv.hub.Wait(context.Background()))

	// Resume (on "another pod": this one's hub is draining, so read the
	// log directly as a fresh pod would).
	other := newTestConsole(t, 1)
	other.log.evs = c.log.evs
	hc2 := other.client(t, "alice@example.com")
	req, _ := http.NewRequest("GET", other.ts.URL+"/v1/reviews/"+id+"/events", nil)
	req.Header.Set("Last-Event-ID", last)
	r2, err := hc2.Do(req)
	require.NoError(t, err)
	defer r2.Body.Close()
	require.Equal(t, http.StatusOK, r2.StatusCode)
	resumed := readEvents(t, r2.Body, 0, "verdict")
	require.Equal(t, "verdict", resumed[len(resumed)-1].typ)
	require.Contains(t, resumed[len(resumed)-1].data, `"abusive"`)
	require.Equal(t, 1, c.rev.calls, "no second model call")
	require.Equal(t, 0, other.rev.calls)
	require.Len(t, c.store.saved, 1)
	require.True(t, strings.HasPrefix(c.store.saved[0].RunID, "ondemand:"+moderatorID("alice@example.com")+":"))
}

// The drain's two phases: at Run's ctx new reviews are refused and open
// streams told to reconnect while the running review goes on; at hard (the
// drain deadline) the review is cancelled, its verdict still saved, and
// Run returns.
func TestDrainRefusesThenCancelsAtTheDeadline(t *testing.T) {
	c := newTestConsole(t, 2)
	hc := c.client(t, "alice@example.com")
	resp := c.startReview(t, hc)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readEvents(t, resp.Body, 2, "")

	hard, cancelHard := context.WithCancelCause(context.Background())
	defer cancelHard(nil)
	ctx, stop := context.WithCancel(drain.WithHard(context.Background(), hard))
	ran := make(chan error, 1)
	go func() { ran <- c.app.Run(ctx) }()
	stop()
	rest := readEvents(t, resp.Body, 0, "reconnect")
	require.Equal(t, "reconnect", rest[len(rest)-1].typ)
	refused := c.startReview(t, hc)
	refused.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, refused.StatusCode)
	require.NotEmpty(t, refused.Header.Get("Retry-After"))
	select {
	case <-ran:
		t.Fatal("Run returned with a review running before its deadline")
	default:
	}

	cancelHard(errors.New("drain deadline"))
	require.NoError(t, <-ran)
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	require.Len(t, c.store.saved, 1, "the cancelled review's verdict is saved")
	require.Equal(t, pipeline.StatusFailed, c.store.saved[0].Status)
	require.Contains(t, c.store.saved[0].Error, "drain deadline")
}

// An idle stream's heartbeat comes from the app's clock: the fake clock
// passing the heartbeat interval writes the ping (on the wall clock none
// would come for 15 s).
func TestIdleStreamHeartbeatsOnTheClock(t *testing.T) {
	clk := clock.NewFake(time.Now())
	c := newTestConsoleOn(t, 1, clk)
	hc := c.client(t, "alice@example.com")
	resp := c.startReview(t, hc)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The stream's ticker is the one thing waiting on the clock: the
	// review waits for its release.
	require.NoError(t, clk.BlockUntilContext(ctx, 1))
	clk.Advance(heartbeat)
	pinged := make(chan error, 1)
	go func() {
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == ": ping\n" {
				pinged <- err
				return
			}
		}
	}()
	select {
	case err := <-pinged:
		require.NoError(t, err)
	case <-ctx.Done():
		resp.Body.Close() // ends the reader
		t.Fatal("no heartbeat after the clock passed its interval")
	}
}
