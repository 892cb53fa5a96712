package console

import (
	"context"
	"encoding/json"
	"errors"
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

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

// The decision is answered once its row is committed, even when SQS
// refuses the event: the row is the outbox.
func TestDecideAnswersOnceTheRowIsSavedWhenTheSendFails(t *testing.T) {
	c := newTestConsole(t, 1)
	c.fb.err = errors.New("sqs: 503")
	fbm := newFeedbackMetrics(nil)
	c.srv.fbm = fbm
	hc := c.client(t, "alice@example.com")
	who := Who{ID: moderatorID("alice@example.com")}
	req, _ := http.NewRequest("POST", c.ts.URL+"/verdicts/7/decide", nil)
	req.PostForm = url.Values{"decision": {"confirm"}, "csrf": {c.srv.auth.csrfToken(who, time.Now())}}
	resp, err := hc.PostForm(c.ts.URL+"/verdicts/7/decide", req.PostForm)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "not a 502: the decision is saved")
	require.Contains(t, string(body), "(feedback queued)")
	require.Len(t, c.store.decisions, 1)
	require.True(t, c.store.decisions[0].FeedbackSentAt.IsZero(), "unsent: left for the sweeper")
	require.Equal(t, 1.0, testutil.ToFloat64(fbm.failed.WithLabelValues("decide")))

	c.fb.err = nil
	resp, err = hc.PostForm(c.ts.URL+"/verdicts/7/decide", req.PostForm)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, c.store.decisions[1].FeedbackSentAt.IsZero(), "marked once SQS accepted it")
	require.Equal(t, 1.0, testutil.ToFloat64(fbm.sent.WithLabelValues("decide")))
}

// lostReply is a queue that keeps what it is sent but answers with an
// error while fail is set: SQS accepted the events and the reply was lost,
// so the sender cannot tell them from events never sent.
type lostReply struct {
	*queuetest.Fake
	mu   sync.Mutex
	fail bool
}

func (l *lostReply) Send(ctx context.Context, msgs []pipeline.OutMessage) error {
	err := l.Fake.Send(ctx, msgs)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.fail {
		return errors.New("sqs: connection reset after the request was sent")
	}
	return err
}

// outboxEnv is a console's request path and sweeper over a real, migrated
// MariaDB database and a fake feedback queue.
type outboxEnv struct {
	store   *mysql.Store
	queue   *queuetest.Fake
	sender  *lostReply
	ts      *httptest.Server
	srv     *server
	verdict uint64
	t0      time.Time
	dsn     string
	// clock is the clock of the last sweeper made.
	clock *clock.Fake
}

func newOutboxEnv(t *testing.T) *outboxEnv {
	t.Helper()
	db, dsn := stacktest.MySQL(t)
	ctx := testCtx(t)
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	st := mysql.New(db)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: "room-outbox", WindowStart: window, WindowEnd: window.Add(time.Hour), PipelineVersion: "v1"},
		RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
		Action: pipeline.ActionWarn, Attempts: 1, PublishedAt: window, StartedAt: window, FinishedAt: window}
	storetest.MustSave(t, ctx, st, v)
	vid, err := st.VerdictID(ctx, v.Key)
	require.NoError(t, err)
	t0 := time.Date(2026, 12, 1, 4, 0, 0, 123456789, time.UTC)
	q := queuetest.NewFake(queuetest.Config{})
	sender := &lostReply{Fake: q}
	tmpl, err := parseTemplates()
	require.NoError(t, err)
	cfg := DefaultConfig()
	cfg.DevLogin = true
	s := &server{cfg: cfg, auth: &auth{devLogin: true, key: []byte("0123456789abcdef0123456789abcdef"), clock: clock.Real()},
		store: st, chat: fakeChat{}, feedback: sender, fbm: newFeedbackMetrics(nil), log: slog.New(slog.DiscardHandler), tmpl: tmpl,
		clock: clock.NewFake(t0)}
	ts := httptest.NewServer(s.routes())
	t.Cleanup(ts.Close)
	return &outboxEnv{store: st, queue: q, sender: sender, ts: ts, srv: s, verdict: vid, t0: t0, dsn: dsn}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// decide posts a decision as a signed-in moderator and returns the page.
func (e *outboxEnv) decide(t *testing.T, form url.Values) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	resp, err := hc.PostForm(e.ts.URL+"/login", url.Values{"email": {"bob@example.com"}, "next": {"/queue"}})
	require.NoError(t, err)
	resp.Body.Close()
	form.Set("csrf", e.srv.auth.csrfToken(Who{ID: moderatorID("bob@example.com")}, time.Now()))
	req, _ := http.NewRequest("POST", e.ts.URL+"/verdicts/"+strconv.FormatUint(e.verdict, 10)+"/decide", nil)
	req.Header.Set("HX-Request", "true")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Body = io.NopCloser(strings.NewReader(form.Encode()))
	resp, err = hc.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return string(body)
}

// sweeper returns an outbox over e on a fake clock set to now (e.clock
// until the next sweeper), with the backoff's ceiling for its delay, so
// that a failed row's next attempt is known. Tests call its sweep
// directly; Run is tested on its own.
func (e *outboxEnv) sweeper(st moderation.FeedbackOutbox, now time.Time) *outbox {
	cfg := DefaultOutboxConfig()
	e.clock = clock.NewFake(now)
	o := newOutbox(cfg, st, e.sender, newFeedbackMetrics(nil), slog.New(slog.DiscardHandler), e.clock)
	o.backoff = cfg.retryPolicy().Ceiling
	return o
}

type feedbackMsg struct {
	EventID    string                     `json:"event_id"`
	OccurredAt time.Time                  `json:"occurred_at"`
	Payload    pipeline.ModeratorFeedback `json:"payload"`
}

func messages(t *testing.T, q *queuetest.Fake) ([]feedbackMsg, [][]byte) {
	var out []feedbackMsg
	var bodies [][]byte
	for _, m := range q.Messages() {
		var ev feedbackMsg
		require.NoError(t, json.Unmarshal(m.Body, &ev))
		out = append(out, ev)
		bodies = append(bodies, m.Body)
	}
	return out, bodies
}

// A send that fails leaves the decision unsent; the sweeper resends it
// past the grace period, with the event id derived from the row id, and
// the backlog drains to zero.
func TestOutboxResendsAFailedSend(t *testing.T) {
	e := newOutboxEnv(t)
	e.queue.SetFault(func(queuetest.Op, queuetest.Entry) error { return errors.New("ServiceUnavailable") })
	page := e.decide(t, url.Values{"decision": {"overturn"}, "label": {"clean"}, "category": {"spam"}})
	require.Contains(t, page, "overturn (feedback queued)")
	require.Empty(t, e.queue.Messages())

	// Inside the grace period the sweeper leaves it to the request path.
	ctx := testCtx(t)
	o := e.sweeper(e.store, e.t0.Add(30*time.Second))
	require.Equal(t, sweepResult{}, o.sweep(ctx))
	require.Equal(t, 1.0, testutil.ToFloat64(o.metrics.unsent))
	require.InDelta(t, 30.0, testutil.ToFloat64(o.metrics.oldest), 0.001)

	// Past it, with SQS still failing: counted, left unsent.
	o = e.sweeper(e.store, e.t0.Add(2*time.Minute))
	r := o.sweep(ctx)
	require.Error(t, r.Err)
	require.Equal(t, 1, r.Failed)
	require.Equal(t, 1.0, testutil.ToFloat64(o.metrics.failed.WithLabelValues("sweep")))
	require.Equal(t, 1.0, testutil.ToFloat64(o.metrics.unsent))

	// Not again before its backoff, even with SQS back.
	e.queue.SetFault(nil)
	r = o.sweep(ctx)
	require.Equal(t, sweepResult{}, r, "the failed row waits for its backoff")

	// Past it: resent, marked, backlog empty.
	e.clock.Advance(DefaultOutboxConfig().FeedbackRetryInitial)
	r = o.sweep(ctx)
	require.NoError(t, r.Err)
	require.Equal(t, 1, r.Sent)
	require.Equal(t, 1.0, testutil.ToFloat64(o.metrics.sent.WithLabelValues("sweep")))
	require.Equal(t, 0.0, testutil.ToFloat64(o.metrics.unsent))
	require.Equal(t, 0.0, testutil.ToFloat64(o.metrics.oldest))
	evs, _ := messages(t, e.queue)
	require.Len(t, evs, 1)
	ds, err := e.store.Decisions(testCtx(t), e.verdict, 5)
	require.NoError(t, err)
	require.Equal(t, feedbackEventID(ds[0].ID), evs[0].EventID)
	require.Equal(t, pipeline.CategoryClean, evs[0].Payload.DecidedCategory)
	require.Equal(t, pipeline.LabelAbusive, evs[0].Payload.VerdictLabel)
	require.Equal(t, pipeline.ActionWarn, evs[0].Payload.ActionTaken)
	require.Equal(t, moderatorID("bob@example.com"), evs[0].Payload.ModeratorID)
	require.False(t, ds[0].FeedbackSentAt.IsZero())

	require.Equal(t, sweepResult{}, o.sweep(ctx), "nothing left to resend")
	require.Len(t, e.queue.Messages(), 1)
}

// A reply lost after SQS took the event: the sweeper sends it again, and
// the copy is byte for byte the request path's event (same id, same
// occurred_at, so the same lake partition): moderator_feedback_dedup
// keeps one.
func TestOutboxResendIsTheSameLakeEvent(t *testing.T) {
	e := newOutboxEnv(t)
	e.sender.fail = true
	e.decide(t, url.Values{"decision": {"confirm"}})
	e.sender.mu.Lock()
	e.sender.fail = false
	e.sender.mu.Unlock()
	o := e.sweeper(e.store, e.t0.Add(5*time.Minute))
	require.Equal(t, 1, o.sweep(testCtx(t)).Sent)
	evs, bodies := messages(t, e.queue)
	require.Len(t, evs, 2)
	require.Equal(t, string(bodies[0]), string(bodies[1]))
	require.Equal(t, e.t0.Truncate(time.Microsecond), evs[0].OccurredAt)
}

// Two consoles sweeping one backlog at the same time send every event
// once: each takes rows the other has not locked.
func TestOutboxTwoConsolesSendEachEventOnce(t *testing.T) {
	e := newOutboxEnv(t)
	ctx := testCtx(t)
	const n = 35
	for i := range n {
		_, err := e.store.AddDecision(ctx, moderation.Decision{VerdictID: e.verdict, Moderator: "mod-" + strconv.Itoa(i%3), Decision: moderation.DecisionConfirm,
			Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, DecidedAt: e.t0.Add(time.Duration(i) * time.Millisecond)})
		require.NoError(t, err)
	}
	// The second console: its own pool of connections to the same database.
	mc := mysql.DefaultConfig()
	mc.DSN, mc.MaxOpenConns = e.dsn, 4
	db2, err := mysql.OpenDB(mc)
	require.NoError(t, err)
	t.Cleanup(func() { db2.Close() })
	a := e.sweeper(e.store, e.t0.Add(time.Hour))
	b := e.sweeper(mysql.New(db2), e.t0.Add(time.Hour))
	a.cfg.FeedbackSweepBatch, b.cfg.FeedbackSweepBatch = 3, 3
	a.cfg.FeedbackSweepMaxBatches, b.cfg.FeedbackSweepMaxBatches = 2, 2 // the two interleave
	for range 4 {
		var wg sync.WaitGroup
		var ra, rb sweepResult
		wg.Go(func() { ra = a.sweep(ctx) })
		wg.Go(func() { rb = b.sweep(ctx) })
		wg.Wait()
		require.NoError(t, ra.Err)
		require.NoError(t, rb.Err)
	}
	evs, _ := messages(t, e.queue)
	seen := map[string]int{}
	for _, ev := range evs {
		seen[ev.EventID]++
	}
	require.Len(t, seen, n)
	require.Len(t, evs, n, "no event sent twice")
	require.Equal(t, 0.0, testutil.ToFloat64(a.metrics.unsent))
}

// Two-phase stop: a batch in flight when the console stops finishes and
// marks its rows before Run returns.
func TestOutboxStopFinishesTheBatchInFlight(t *testing.T) {
	e := newOutboxEnv(t)
	e.queue.SetFault(func(queuetest.Op, queuetest.Entry) error { return errors.New("down") })
	e.decide(t, url.Values{"decision": {"confirm"}})
	e.queue.SetFault(nil)
	inSend, release := make(chan struct{}), make(chan struct{})
	blocking := &blockingSender{next: e.sender, inSend: inSend, release: release}
	o := e.sweeper(e.store, e.t0.Add(time.Hour))
	o.send = blocking
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	require.NoError(t, e.clock.BlockUntilContext(testCtx(t), 1), "Run's ticker")
	e.clock.Advance(o.cfg.FeedbackSweepEvery)
	<-inSend
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned with a batch in flight")
	default:
	}
	close(release)
	require.NoError(t, <-done)
	b, err := e.store.FeedbackBacklog(testCtx(t))
	require.NoError(t, err)
	require.Zero(t, b.Unsent, "the batch begun before the stop is marked")
	require.Len(t, e.queue.Messages(), 1)
}

type blockingSender struct {
	next    FeedbackSender
	inSend  chan struct{}
	release chan struct{}
}

func (b *blockingSender) Send(ctx context.Context, msgs []pipeline.OutMessage) error {
	close(b.inSend)
	<-b.release
	return b.next.Send(ctx, msgs)
}
