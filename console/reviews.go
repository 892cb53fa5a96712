package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/live"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/stop"
)

// reviews is the on-demand review API: POST /v1/reviews starts a review
// and streams its events; GET /v1/reviews/{id}/events resumes a stream
// from Last-Event-ID, on any pod, from the live log.
type reviews struct {
	cfg      Config
	hub      *live.Hub
	liveLog  pipeline.LiveLog
	reviewer pipeline.Reviewer
	chat     pipeline.ChatSource
	store    moderation.Verdicts
	guard    *stop.Guard        // nil: reviews cannot be stopped
	events   pipeline.EventSink // nil: no verdict events
	// planner decides the protective actions of a done verdict before
	// its save (nil: actions are off).
	planner pipeline.ActionPlanner
	log     *slog.Logger
	// clock times the heartbeats and dates the on-demand review events.
	clock clock.Clock

	// slots is the admission gate: a review takes one or is refused.
	slots chan struct{}
	// admission counts the gate's answers (nil: counted nowhere).
	admission *admissionMetrics
	// panics counts reviews that panicked (nil: counted nowhere).
	panics prometheus.Counter
	// ctx is the parent of every review and of the detached log tails:
	// cancelled when the drain deadline passes (App.Run).
	ctx     context.Context
	running sync.WaitGroup
	// streams counts the detached stream goroutines (see detach).
	streams sync.WaitGroup

	mu       sync.Mutex
	draining bool
}

// heartbeat keeps idle streams open through proxies.
const heartbeat = 15 * time.Second

// writeTimeout bounds one write to a client: a stalled client's handler
// returns instead of holding its goroutine.
const writeTimeout = 10 * time.Second

// reviewRequest is POST /v1/reviews's JSON body (or form fields).
type reviewRequest struct {
	RoomID      string    `json:"room_id"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	// Source is empty for a moderator's review; a campaign re-review's is
	// pipeline.SourceCampaign (campaignreview.go), never a client's.
	Source pipeline.ReviewSource `json:"-"`
}

func (rv *reviews) parse(r *http.Request) (reviewRequest, error) {
	var req reviewRequest
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		dec := json.NewDecoder(io.LimitReader(r.Body, 8<<10))
		if err := dec.Decode(&req); err != nil {
			return req, fmt.Errorf("body is not a review request: %v", err)
		}
	} else {
		req.RoomID = r.PostFormValue("room_id")
		var err1, err2 error
		req.WindowStart, err1 = time.Parse(time.RFC3339, r.PostFormValue("window_start"))
		req.WindowEnd, err2 = time.Parse(time.RFC3339, r.PostFormValue("window_end"))
		if err1 != nil || err2 != nil {
			return req, errors.New("window_start and window_end must be RFC 3339")
		}
	}
	var errs []error
	if req.RoomID == "" || len(req.RoomID) > 128 {
		errs = append(errs, errors.New("room_id must be 1..128 bytes"))
	}
	req.WindowStart, req.WindowEnd = req.WindowStart.UTC(), req.WindowEnd.UTC()
	if !req.WindowStart.Before(req.WindowEnd) {
		errs = append(errs, errors.New("window_start must be before window_end"))
	} else if req.WindowEnd.Sub(req.WindowStart) > rv.cfg.MaxWindow {
		errs = append(errs, fmt.Errorf("the window is longer than %s", rv.cfg.MaxWindow))
	}
	return req, errors.Join(errs...)
}

func (rv *reviews) refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(rv.cfg.RetryAfter.Seconds())))
	http.Error(w, msg, code)
}

// start serves POST /v1/reviews. Admission is decided before anything
// else runs: no free slot answers 429 at once, a draining pod 503, both
// with Retry-After; nothing waits in a hidden queue.
func (rv *reviews) start(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	req, err := rv.parse(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rv.mu.Lock()
	draining := rv.draining
	rv.mu.Unlock()
	if draining {
		rv.admission.count(admissionDraining)
		rv.refuse(w, http.StatusServiceUnavailable, "this console pod is shutting down; retry")
		return
	}
	select {
	case rv.slots <- struct{}{}:
	default:
		rv.admission.count(admissionBusy)
		rv.refuse(w, http.StatusTooManyRequests, "every on-demand review slot is busy; retry")
		return
	}
	id := uuid.NewString()
	st, err := rv.hub.Open(id)
	if err != nil {
		<-rv.slots
		rv.admission.count(admissionDraining)
		rv.refuse(w, http.StatusServiceUnavailable, "this console pod is shutting down; retry")
		return
	}
	rv.admission.count(admissionAdmitted)
	sub, _ := st.Subscribe(0) // a fresh stream: cannot fail
	rv.running.Add(1)
	// The review outlives the request; its trace continues the request's.
	parent := trace.SpanContextFromContext(r.Context())
	go func() {
		defer rv.running.Done()
		defer func() { <-rv.slots }()
		rv.runRecovered(st, req, who, parent)
	}()
	rv.log.Info("console: audit", "action", "review", "moderator", who.ID, "review_id", id, "room_id", req.RoomID,
		"window_start", req.WindowStart, "window_end", req.WindowEnd)
	w.Header().Set("X-Review-ID", id)
	rv.pump(w, r, st.ID(), sub)
}

// resume serves GET /v1/reviews/{id}/events: the events after
// Last-Event-ID (or ?after=N), from this pod's stream when the review runs
// here, else from the live log, until the stream's final event.
func (rv *reviews) resume(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := uuid.Parse(id); err != nil {
		http.Error(w, "no such review", http.StatusNotFound)
		return
	}
	after, err := afterOf(r, id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case <-rv.hub.Draining():
		rv.refuse(w, http.StatusServiceUnavailable, "this console pod is shutting down; retry")
		return
	default:
	}
	if st, ok := rv.hub.Lookup(id); ok {
		if sub, ok := st.Subscribe(after); ok {
			rv.pump(w, r, id, sub)
			return
		}
	}
	rv.tail(w, r, id, after)
}

// afterOf reads the resume position: Last-Event-ID "<review>.<seq>" or
// ?after=<seq>.
func afterOf(r *http.Request, id string) (uint64, error) {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		rid, seq, ok := strings.Cut(v, ".")
		if !ok || rid != id {
			return 0, errors.New("Last-Event-ID belongs to another review")
		}
		return strconv.ParseUint(seq, 10, 64)
	}
	if v := r.URL.Query().Get("after"); v != "" {
		return strconv.ParseUint(v, 10, 64)
	}
	return 0, nil
}

// sse writes events to one client. On HTTP/1.1 it hijacks the
// connection after the headers and writes events straight to it: an idle
// stream then holds no bufio buffers, no chunked writer and no background
// read goroutine (per-stream memory is what bounds how many
// moderators' streams one pod holds). A
// client that left is noticed at the next write (an event or the
// heartbeat). Elsewhere (HTTP/2, tests with a recorder) it writes through
// the ResponseWriter and flushes.
type sse struct {
	id   string
	buf  []byte
	conn net.Conn // nil: not hijacked
	w    http.ResponseWriter
	rc   *http.ResponseController
}

func startSSE(w http.ResponseWriter, id string) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	s := &sse{id: id, w: w, rc: http.NewResponseController(w)}
	if conn, brw, err := s.rc.Hijack(); err == nil {
		// The ResponseWriter holds the request and the server's buffers
		// for the connection: keep nothing of it.
		s.conn, s.w, s.rc = conn, nil, nil
		// What the client sent after its request (nothing, for a GET or
		// a read body) is of no use; the buffers are dropped with brw.
		_ = brw
		h.Set("Connection", "close")
		s.buf = append(s.buf, "HTTP/1.1 200 OK\r\n"...)
		for k, vs := range h {
			for _, v := range vs {
				s.buf = append(s.buf, k...)
				s.buf = append(s.buf, ": "...)
				s.buf = append(s.buf, v...)
				s.buf = append(s.buf, "\r\n"...)
			}
		}
		s.buf = append(s.buf, "\r\n"...)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	_ = s.flush()
	return s
}

func (s *sse) event(ev *pipeline.LiveEvent) {
	s.buf = append(s.buf, "id: "...)
	s.buf = append(s.buf, s.id...)
	s.buf = append(s.buf, '.')
	s.buf = strconv.AppendUint(s.buf, ev.Seq, 10)
	s.buf = append(s.buf, "\nevent: "...)
	s.buf = append(s.buf, ev.Type...)
	s.buf = append(s.buf, "\ndata: "...)
	s.buf = append(s.buf, ev.Data...)
	s.buf = append(s.buf, "\n\n"...)
}

func (s *sse) ping() { s.buf = append(s.buf, ": ping\n\n"...) }

// flush writes what is buffered, bounded by writeTimeout. The deadline is
// the socket's, on real time: it bounds a wait on the client's machine.
func (s *sse) flush() error {
	defer func() {
		// An idle stream keeps no buffer.
		if cap(s.buf) > 4096 {
			s.buf = nil
		} else {
			s.buf = s.buf[:0]
		}
	}()
	if s.conn != nil {
		if len(s.buf) == 0 {
			return nil
		}
		_ = s.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		_, err := s.conn.Write(s.buf)
		return err
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	return s.rc.Flush()
}

// close ends a hijacked connection (the server closes the others).
func (s *sse) close() {
	if s.conn != nil {
		_ = s.conn.Close()
	}
}

func (s *sse) reconnect(after time.Duration) {
	// No id: the client's Last-Event-ID stays that of the last real event.
	s.buf = fmt.Appendf(s.buf, "retry: %d\nevent: %s\ndata: {\"retry_ms\":%d}\n\n", after.Milliseconds(), pipeline.LiveReconnect, after.Milliseconds())
	_ = s.flush()
}

// pump delivers sub's events until the final one, the client leaves, the
// client is dropped for falling behind (the connection closes; it may
// resume), or the pod drains (a reconnect event).
func (rv *reviews) pump(w http.ResponseWriter, r *http.Request, id string, sub *live.Sub) {
	s := startSSE(w, id)
	rv.detach(s, r, func(gone <-chan struct{}) {
		defer sub.Leave()
		rv.pumpSub(s, sub, gone)
	})
}

// detach runs body, the rest of a stream, on a goroutine of its own when
// the connection was hijacked, and returns: the request's goroutine, its
// large stack and the server's buffers for the connection are then freed
// while the stream stays open (the goroutine's owner is rv.streams). gone
// is closed when the client leaves; for a hijacked connection it never is,
// and a gone client is noticed at the next write.
func (rv *reviews) detach(s *sse, r *http.Request, body func(gone <-chan struct{})) {
	if s.conn == nil {
		defer s.close()
		body(r.Context().Done())
		return
	}
	rv.streams.Add(1)
	go func() {
		defer rv.streams.Done()
		defer s.close()
		body(nil)
	}()
}

func (rv *reviews) pumpSub(s *sse, sub *live.Sub, gone <-chan struct{}) {
	tick := rv.clock.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return
			}
			s.event(ev)
			// Write what is already waiting before one flush.
			final := ev.Type.Final()
		batch:
			for !final {
				select {
				case ev, ok = <-sub.Events():
					if !ok {
						break batch
					}
					s.event(ev)
					final = ev.Type.Final()
				default:
					break batch
				}
			}
			if s.flush() != nil || final || !ok {
				return
			}
		case <-sub.Dropped():
			return
		case <-rv.hub.Draining():
			s.reconnect(time.Second)
			return
		case <-gone:
			return
		case <-tick.Chan():
			s.ping()
			if s.flush() != nil {
				return
			}
		}
	}
}

// TailWait bounds one blocking log read of a resumed stream, so a drain or
// a gone client is noticed within it; the live log's Redis client needs a
// read timeout above it.
const TailWait = 2 * time.Second

// tail delivers review id's events from the live log (the review runs on
// another pod, or ran and ended).
func (rv *reviews) tail(w http.ResponseWriter, r *http.Request, id string, after uint64) {
	if rv.liveLog == nil {
		http.Error(w, "no such review on this pod", http.StatusNotFound)
		return
	}
	ctx := r.Context()
	// The first read decides between a stream and a 404.
	evs, err := rv.liveLog.Read(ctx, id, after, 0)
	if errors.Is(err, pipeline.ErrLiveGone) {
		http.Error(w, "the review's events are no longer kept; start a new review", http.StatusGone)
		return
	}
	if err != nil {
		rv.refuse(w, http.StatusServiceUnavailable, "the live log is unreachable; retry")
		return
	}
	s := startSSE(w, id)
	rv.detach(s, r, func(gone <-chan struct{}) {
		ctx := rv.ctx
		if gone != nil {
			ctx = r.Context()
		}
		rv.tailLog(ctx, s, id, after, evs)
	})
}

func (rv *reviews) tailLog(ctx context.Context, s *sse, id string, after uint64, evs []pipeline.LiveEvent) {
	idle := rv.clock.Now()
	for {
		for i := range evs {
			ev := &evs[i]
			s.event(ev)
			after = ev.Seq
			if ev.Type.Final() {
				_ = s.flush()
				return
			}
		}
		if len(evs) > 0 {
			idle = rv.clock.Now()
			if s.flush() != nil {
				return
			}
		} else if rv.clock.Since(idle) > heartbeat {
			idle = rv.clock.Now()
			s.ping()
			if s.flush() != nil {
				return
			}
		}
		select {
		case <-rv.hub.Draining():
			s.reconnect(time.Second)
			return
		case <-ctx.Done():
			return
		default:
		}
		var err error
		evs, err = rv.liveLog.Read(ctx, id, after, TailWait)
		if err != nil {
			if ctx.Err() == nil {
				s.reconnect(rv.cfg.RetryAfter)
			}
			return
		}
	}
}

// runRecovered is run with a panic anywhere in it (chat preparation, the
// router, the reviewer, the store) confined to its own review: the stream
// ends with an error event, the panic is counted and logged with its
// stack, and the pod goes on serving every other stream. Unrecovered, a
// panic on this goroutine would end the process and every stream on it.
func (rv *reviews) runRecovered(st *live.Stream, req reviewRequest, who Who, parent trace.SpanContext) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if rv.panics != nil {
			rv.panics.Inc()
		}
		// The panic value may quote the chat: masked and clipped.
		rv.log.Error("console: on-demand review panicked", "review_id", st.ID(), "room_id", req.RoomID,
			"panic", pipeline.ClipRunes(chatprep.Redact(fmt.Sprint(r)), 300), "stack", string(debug.Stack()))
		// A no-op when the review already emitted its final event.
		st.Emit(pipeline.LiveError, mustJSON(map[string]any{"error": "the review failed on an internal error"}))
		st.Close()
	}()
	rv.run(st, req, who, parent)
}

// run is one on-demand review: history, stages (interactive class, every
// attempt and token emitted), the verdict stored as a new revision of the
// window's verdict whose run id says on-demand and who asked, and a final
// event naming the revision and its row id.
func (rv *reviews) run(st *live.Stream, req reviewRequest, who Who, parent trace.SpanContext) {
	ctx, cancel := context.WithTimeout(rv.ctx, rv.cfg.ReviewTimeout)
	defer cancel()
	ctx, span := startReviewSpan(ctx, parent)
	defer span.End()
	ev := pipeline.ReviewEvent{RoomID: req.RoomID, WindowStart: req.WindowStart, WindowEnd: req.WindowEnd,
		RunID: req.runID(who, st.ID()), Source: req.Source, PublishedAt: rv.clock.Now().UTC(), SchemaVersion: 1}
	if rv.guard != nil {
		var release func()
		ctx, release = rv.guard.Begin(ctx, ev)
		defer release()
	}
	em := &emitter{st: st}
	em.stage("history", 1, "")
	msgs, err := rv.chat.History(ctx, req.RoomID, req.WindowStart, req.WindowEnd)
	if err != nil {
		rv.finish(ctx, st, ev, pipeline.Verdict{}, fmt.Errorf("chat history: %w", err))
		return
	}
	v, err := rv.reviewer.Review(llm.WithObserver(ctx, em), ev, msgs, 1)
	em.flush()
	v.OldestMessageAt, v.NewestMessageAt = pipeline.MessageSpan(msgs, req.WindowStart, req.WindowEnd)
	rv.finish(ctx, st, ev, v, err)
}

// finish stores the verdict and emits the final event; the verdict's lake
// event carries ctx's trace.
func (rv *reviews) finish(ctx context.Context, st *live.Stream, ev pipeline.ReviewEvent, v pipeline.Verdict, err error) {
	var stopped *pipeline.StoppedError
	if v.Key.RoomID != "" {
		if errors.As(err, &stopped) {
			v.Status, v.Error = pipeline.StatusStopped, pipeline.ClipRunes(stopped.Error(), 500)
		} else if err != nil {
			v.Status, v.Error = pipeline.StatusFailed, pipeline.ClipRunes(err.Error(), 500)
		}
		if v.FinishedAt.IsZero() {
			v.FinishedAt = rv.clock.Now().UTC()
		}
		// An explicit re-review is a new revision of the window's verdict:
		// the one moderators decided on is kept as it was, and the queue
		// shows the new one.
		v = rv.save(ctx, st.ID(), v, pipeline.ActionSourceOf(ev.Source, true))
	}
	rv.log.Info("console: on-demand review", "review_id", st.ID(), "room_id", ev.RoomID, "run_id", ev.RunID,
		"status", v.Status, "err", errString(err))
	switch {
	case errors.As(err, &stopped):
		st.Emit(pipeline.LiveStopped, mustJSON(map[string]any{"reason": stopped.Error()}))
	case err != nil:
		st.Emit(pipeline.LiveError, mustJSON(map[string]any{"error": pipeline.ClipRunes(chatprep.Redact(err.Error()), 300)}))
	default:
		out := map[string]any{"label": v.Label, "category": v.Category, "severity": v.Severity, "confidence": v.Confidence,
			"action": v.Action, "rationale": chatprep.Redact(v.Rationale), "evidence_ids": v.EvidenceIDs, "run_id": v.RunID}
		if v.Revision > 0 {
			out["revision"] = v.Revision
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(rv.ctx), 5*time.Second)
		if id, err := rv.store.VerdictID(sctx, v.Key); err == nil {
			out["verdict_id"] = id
		}
		cancel()
		st.Emit(pipeline.LiveVerdict, mustJSON(out))
	}
}

// save stores an on-demand verdict as a new revision of its window's,
// with the protective actions the policy decides for it (when actions are
// on) written in the same transaction, as the workers' are: the one
// planner (pipeline.ActionPlanner), source src (on_demand; campaign for a
// campaign re-review, which escalates at most). A verdict whose
// actions cannot be decided is not saved (no verdict is stored without
// the actions it owes); a failed save is logged, as the review's event
// still reaches its moderator. It returns v with its revision when the
// store committed it.
func (rv *reviews) save(ctx context.Context, reviewID string, v pipeline.Verdict, src pipeline.ActionSource) pipeline.Verdict {
	// The save outlives a cancelled review: what was paid for is kept.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(rv.ctx), 10*time.Second)
	defer cancel()
	if rv.planner != nil {
		planned, err := rv.planner.Plan(sctx, v, src)
		if err != nil {
			rv.log.Error("console: on-demand verdict not saved: its protective actions could not be decided", "review_id", reviewID, "room_id", v.Key.RoomID, "err", err)
			return v
		}
		v = planned
		pipeline.SetActionOffenders(v.Actions, rv.reviewer)
	}
	rev, committed, err := rv.store.Revise(sctx, v)
	if err != nil {
		rv.log.Error("console: on-demand verdict not saved", "review_id", reviewID, "room_id", v.Key.RoomID, "err", err)
		return v
	}
	if committed {
		v.Revision = rev
		rv.publish(v, trace.SpanContextFromContext(ctx))
		if rv.planner != nil {
			rv.planner.Committed(v)
		}
	}
	return v
}

// publish hands the committed revision's verdict event to the lake, with
// its subjects as the reviewer's keyed pseudonyms (none without a key).
func (rv *reviews) publish(v pipeline.Verdict, tc trace.SpanContext) {
	if rv.events == nil {
		return
	}
	var subjects []string
	if p, ok := rv.reviewer.(pipeline.SubjectPseudonymizer); ok && len(v.Subjects) > 0 {
		subjects = p.SubjectPseudonyms(v.Subjects)
	}
	ev := pipeline.VerdictLakeEvent(v, subjects, rv.clock.Now())
	ev.Trace = tc
	rv.events.Publish(ev)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// emitter is the llm.Observer of one review: stage events per attempt and
// token events of the answer. Tokens are buffered to word boundaries and
// masked (chatprep.Redact) before they leave the process: the answer may
// quote the chat's phone and account numbers, and a number split over two
// events would escape the mask.
type emitter struct {
	st  *live.Stream
	mu  sync.Mutex
	cur pipeline.StageName
	buf strings.Builder
}

var _ llm.Observer = (*emitter)(nil)

// Attempt implements llm.Observer.
func (e *emitter) Attempt(stage pipeline.StageName, n int, pool pipeline.Pool) {
	e.flush()
	e.stage(stage, n, pool)
}

func (e *emitter) stage(stage pipeline.StageName, n int, pool pipeline.Pool) {
	e.mu.Lock()
	e.cur = stage
	e.mu.Unlock()
	e.st.Emit(pipeline.LiveStage, mustJSON(map[string]any{"stage": stage, "attempt": n, "pool": pool}))
}

// tokenFlushBytes is the buffered answer size from which a word boundary
// away from digits flushes.
const tokenFlushBytes = 24

// Delta implements llm.Observer.
func (e *emitter) Delta(stage pipeline.StageName, text string) {
	e.mu.Lock()
	e.buf.WriteString(text)
	flush := false
	if s := e.buf.String(); strings.ContainsRune(text, '\n') || len(s) >= 512 {
		flush = true
	} else if len(s) >= tokenFlushBytes {
		r := []rune(s)
		last := r[len(r)-1]
		flush = (unicode.IsSpace(last) || last == ',' || last == '"') && !strings.ContainsAny(string(r[max(0, len(r)-12):]), "0123456789")
	}
	e.mu.Unlock()
	if flush {
		e.flush()
	}
}

func (e *emitter) flush() {
	e.mu.Lock()
	text, stage := e.buf.String(), e.cur
	e.buf.Reset()
	e.mu.Unlock()
	if text == "" {
		return
	}
	e.st.Emit(pipeline.LiveToken, mustJSON(map[string]any{"stage": stage, "text": chatprep.Redact(text)}))
}
