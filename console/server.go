package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/live"
)

//go:embed web/templates/*.html
var templateFS embed.FS

//go:embed web/static
var staticFS embed.FS

// FeedbackSender sends lake events to the feedback queue and returns once
// SQS holds them (*sqs.Queue). An error leaves the events to the outbox
// sweeper; a *pipeline.BatchError names the entries that failed.
type FeedbackSender interface {
	Send(ctx context.Context, msgs []pipeline.OutMessage) error
}

// stopper publishes a stop signal through the operator API.
type stopper interface {
	Stop(ctx context.Context, req pipeline.StopRequest) error
}

// server is the console's HTTP side.
type server struct {
	cfg   Config
	auth  *auth
	store moderation.Store
	// actions reverses an overturned verdict's protective actions; nil:
	// none (actions.go).
	actions moderation.ProtectiveActions
	// control reverses or confirms one action by its key; nil: the room
	// page offers neither (actioncontrol.go).
	control  moderation.ActionControl
	chat     pipeline.ChatSource
	feedback FeedbackSender
	fbm      *feedbackMetrics // nil: counted nowhere
	stops    stopper          // nil: no stop button
	reviews  *reviews
	hub      *live.Hub
	log      *slog.Logger
	tmpl     *template.Template
	clock    clock.Clock
	// historyTimeout bounds the room page's chat history fetch.
	historyTimeout time.Duration
	// counts caches the queue header's counts (counts.go).
	counts countsCache
	// shift is the time zone and deadlines; history the take history the
	// shift page reads (nil: none kept) (shift.go).
	shift   shift
	history moderation.TakeHistory
}

var funcs = template.FuncMap{
	"labels": func() []string { return []string{"abusive", "suspicious", "clean"} },
	"fmtTime": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"mask":    chatprep.Redact,
	"dur":     func(d time.Duration) string { return d.Round(time.Second).String() },
	// due is replaced per server (withShift): an item's deadline.
	"due":      func(time.Time, pipeline.Category, time.Time, bool) dueView { return dueView{} },
	"age":      queueAge,
	"fresh":    freshness,
	"account":  accountHref,
	"campaign": campaignHref,
	"pct":      func(f float64) string { return strconv.Itoa(int(f*100+0.5)) + "%" },
	"ms":       func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + " ms" },
	"pretty": func(b json.RawMessage) string {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return string(b)
		}
		out, _ := json.MarshalIndent(v, "", "  ")
		return string(out)
	},
	// The queue list's evidence snippet and rationale line, masked
	// (decisions.go).
	"snippet":   snippet,
	"firstLine": firstLine,
}

// queueAge is how long an item has waited at now since it entered the
// queue (its verdict finished), coarse enough to read at a glance.
func queueAge(now, since time.Time) string {
	if since.IsZero() {
		return ""
	}
	d := max(now.Sub(since), 0)
	switch {
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h " + strconv.Itoa(int(d%time.Hour/time.Minute)) + " min"
	default:
		return strconv.Itoa(int(d/(24*time.Hour))) + " d " + strconv.Itoa(int(d%(24*time.Hour)/time.Hour)) + " h"
	}
}

// freshness is how long after a message its verdict was finished, to the
// second under an hour (real-time verdicts are minutes old); "unknown"
// when either time is (verdicts from before the span was kept, windows
// without messages).
func freshness(sent, done time.Time) string {
	if sent.IsZero() || done.IsZero() {
		return "unknown"
	}
	d := max(done.Sub(sent), 0).Truncate(time.Second)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min " + strconv.Itoa(int(d%time.Minute/time.Second)) + " s"
	default:
		return queueAge(done, sent)
	}
}

func parseTemplates() (*template.Template, error) {
	return template.New("").Funcs(funcs).ParseFS(templateFS, "web/templates/*.html")
}

// routes returns the console's handler: static files and /login open, the
// rest behind auth.
func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "web")
	mux.Handle("GET /static/", http.FileServerFS(static))
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)
	app := http.NewServeMux()
	app.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/queue", http.StatusSeeOther) })
	app.HandleFunc("GET /queue", s.queuePage)
	app.HandleFunc("GET /queue/counts", s.queueCounts)
	app.HandleFunc("GET /shift", s.shiftPage)
	app.HandleFunc("GET /verdicts/{id}", s.roomPage)
	app.HandleFunc("POST /verdicts/{id}/decide", s.decide)
	app.HandleFunc("POST /verdicts/{id}/undo", s.undo)
	app.HandleFunc("POST /queue/decide", s.queueBulkDecide)
	app.HandleFunc("POST /verdicts/{id}/take", s.take)
	app.HandleFunc("POST /verdicts/{id}/release", s.release)
	app.HandleFunc("POST /verdicts/{id}/stop", s.stop)
	app.HandleFunc("GET /verdicts/{id}/reveal", s.revealPage)
	app.HandleFunc("POST /verdicts/{id}/reveal", s.reveal)
	app.HandleFunc("POST /verdicts/{id}/actions/reverse", s.reverseAction)
	app.HandleFunc("POST /verdicts/{id}/actions/confirm", s.confirmAction)
	app.HandleFunc("GET /accounts/{sender}", s.accountPage)
	app.HandleFunc("GET /campaigns/{mark}", s.campaignPage)
	app.HandleFunc("POST /campaigns/{mark}/decide", s.bulkDecide)
	app.HandleFunc("POST /campaigns/{mark}/take", s.takeCampaign)
	app.HandleFunc("POST /campaigns/{mark}/release", s.releaseCampaign)
	app.HandleFunc("POST /logout", s.logout)
	app.HandleFunc("POST /v1/reviews", s.reviews.start)
	app.HandleFunc("GET /v1/reviews/{id}/events", s.reviews.resume)
	mux.Handle("/", s.auth.require(app))
	return securityHeaders(mux)
}

// securityHeaders: no framing, no sniffing, scripts only from here (htmx
// and the console's script are embedded files).
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		h.ServeHTTP(w, r)
	})
}

func (s *server) render(w http.ResponseWriter, name string, code int, data map[string]any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if err := s.tmpl.ExecuteTemplate(w, name, data); err != nil {
		s.log.Warn("console: render", "template", name, "err", err)
	}
}

func (s *server) page(r *http.Request, data map[string]any) map[string]any {
	who, _ := whoFrom(r.Context())
	data["Who"] = who
	data["CSRF"] = s.auth.csrfToken(who, s.clock.Now())
	return data
}

func (s *server) fail(w http.ResponseWriter, r *http.Request, code int, msg string, err error) {
	if err != nil {
		s.log.Warn("console: request failed", "path", r.URL.Path, "code", code, "err", err)
	}
	http.Error(w, msg, code)
}

// loginPage and login are the development login (--dev-login): any e-mail
// signs in. Production runs behind the auth proxy with it off.
func (s *server) loginPage(w http.ResponseWriter, r *http.Request) {
	if !s.auth.devLogin {
		http.Error(w, "sign in through the auth proxy", http.StatusNotFound)
		return
	}
	s.render(w, "login.html", http.StatusOK, map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if !s.auth.devLogin {
		http.Error(w, "sign in through the auth proxy", http.StatusNotFound)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
		http.Error(w, "cross-site login refused", http.StatusForbidden)
		return
	}
	email := strings.TrimSpace(r.PostFormValue("email"))
	if !validEmail(email) {
		s.render(w, "login.html", http.StatusBadRequest, map[string]any{"Error": "enter an e-mail address", "Next": safeNext(r.PostFormValue("next"))})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.auth.session(email), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(sessionTTL.Seconds())})
	s.log.Info("console: audit", "action", "dev_login", "moderator", s.auth.ids.of(email))
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeNext keeps a post-login redirect on this site.
func safeNext(n string) string {
	if !strings.HasPrefix(n, "/") || strings.HasPrefix(n, "//") || strings.Contains(n, "\\") {
		return "/queue"
	}
	return n
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// queueFilter reads the queue's filter from the query string.
// "mine" keeps the items who holds.
func queueFilter(q url.Values, who Who) (moderation.QueueFilter, error) {
	var (
		f    moderation.QueueFilter
		errs []error
	)
	f.Status = pipeline.Status(q.Get("status"))
	if l := q.Get("label"); l != "" {
		f.Labels = []pipeline.Label{pipeline.Label(l)}
	}
	f.Category = pipeline.Category(q.Get("category"))
	if v := q.Get("severity"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, errors.New("severity is not a number"))
		}
		f.MinSeverity = n
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := q.Get(t.name); v != "" {
			tm, err := parseFormTime(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %v", t.name, err))
			}
			*t.dst = tm
		}
	}
	f.RunID = q.Get("run")
	f.IncludeDecided = q.Get("decided") == "1"
	if q.Get("mine") == "1" {
		f.TakenBy = who.ID
	}
	return f, errors.Join(errs...)
}

// parseFormTime takes RFC 3339 or a datetime-local input's value (UTC).
func parseFormTime(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errors.New("not a time (RFC 3339 or YYYY-MM-DDTHH:MM, UTC)")
}

func (s *server) queuePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	who, _ := whoFrom(r.Context())
	f, ferr := queueFilter(q, who)
	data := s.page(r, map[string]any{"Q": q, "Now": s.clock.Now(), "Categories": pipeline.AbuseCategories, "Reasons": s.cfg.DecisionReasons,
		"Statuses": []pipeline.Status{pipeline.StatusDone, pipeline.StatusFailed, pipeline.StatusExpired, pipeline.StatusStopped}})
	if ferr != nil {
		data["Error"] = ferr.Error()
		s.render(w, "queue.html", http.StatusBadRequest, data)
		return
	}
	page, err := s.listQueue(r.Context(), f, q)
	if err != nil {
		data["Error"] = "could not read the queue: " + err.Error()
		s.log.Warn("console: queue", "err", err)
		s.render(w, "queue.html", http.StatusBadRequest, data)
		return
	}
	s.hideStaleTakes(page.Items)
	data["Page"] = page
	if page.Next != "" {
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("cursor", page.Next)
		data["NextURL"] = "/queue?" + nq.Encode()
	}
	if r.Header.Get("HX-Request") == "true" && q.Get("cursor") != "" {
		// "More" appends rows to the table.
		s.render(w, "queue_rows", http.StatusOK, data)
		return
	}
	s.render(w, "queue.html", http.StatusOK, data)
}

// chatLine is one message as the room page shows it.
type chatLine struct {
	pipeline.ChatMessage
	Evidence bool
	// Pieces is the text, masked, with each contact value a piece of its
	// own (reveal.go).
	Pieces []shownPiece
}

func verdictIDParam(r *http.Request) (uint64, bool) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	return id, err == nil && id > 0
}

// verdictFromPath reads the verdict the path's {id} names. When it
// returns false it has answered: 404 for a malformed or unknown id, 503
// when MySQL could not say.
func (s *server) verdictFromPath(w http.ResponseWriter, r *http.Request) (uint64, pipeline.Verdict, bool) {
	id, ok := verdictIDParam(r)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "no such verdict", nil)
		return 0, pipeline.Verdict{}, false
	}
	v, err := s.store.VerdictByID(r.Context(), id)
	if errors.Is(err, pipeline.ErrVerdictNotFound) {
		s.fail(w, r, http.StatusNotFound, "no such verdict", nil)
		return 0, pipeline.Verdict{}, false
	}
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the verdict", err)
		return 0, pipeline.Verdict{}, false
	}
	return id, v, true
}

func (s *server) roomPage(w http.ResponseWriter, r *http.Request) {
	id, v, ok := s.verdictFromPath(w, r)
	if !ok {
		return
	}
	decisions, err := s.store.Decisions(r.Context(), id, 20)
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the decisions", err)
		return
	}
	who, _ := whoFrom(r.Context())
	take, err := s.takeOf(r.Context(), id, who)
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read who took the item", err)
		return
	}
	campaigns, err := s.store.VerdictCampaigns(r.Context(), id)
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the verdict's campaigns", err)
		return
	}
	data := s.decisionsData(r, id, decisions)
	for k, val := range map[string]any{"V": v, "Categories": pipeline.AbuseCategories, "Reasons": s.cfg.DecisionReasons,
		"Evidence": evidenceIDs(v), "CanStop": s.stops != nil, "Take": take, "TakeRefused": r.URL.Query().Get("take") == "refused",
		"Campaigns": campaigns, "Audit": moderation.IsAuditItem(v.Key, v.Status, v.Label, s.cfg.AuditShare)} {
		data[k] = val
	}
	s.roomShift(data, v, len(decisions) > 0)
	if !v.SupersededAt.IsZero() {
		// A re-review replaced this revision: the page says so and links
		// the current one (decisions here stay on this revision).
		if cur, err := s.store.VerdictID(r.Context(), v.Key); err == nil && cur != id {
			data["CurrentID"] = cur
		}
	}
	// The chat is fetched live and never stored by the console.
	hctx, cancel := context.WithTimeout(r.Context(), s.historyTimeout)
	defer cancel()
	msgs, err := s.chat.History(hctx, v.Key.RoomID, v.Key.WindowStart, v.Key.WindowEnd)
	if err != nil {
		s.log.Warn("console: chat history", "room_id", v.Key.RoomID, "err", err)
		data["ChatError"] = "the chat history could not be fetched: " + err.Error()
	}
	data["Chat"] = chatLines(msgs, data["Evidence"].(map[string]bool))
	data["OpenAccount"] = openAccount(v, msgs)
	s.roomActions(r.Context(), v.Key.RoomID, data)
	s.render(w, "room.html", http.StatusOK, data)
}

// openAccount is the account the "a" shortcut opens from a room: the
// verdict's first subject, else the first sender on the side the judge
// named the offender. "" when the verdict names neither: the shortcut then
// does nothing rather than guess (the first sender may be the victim);
// every participant in the chat still links to their account.
func openAccount(v pipeline.Verdict, msgs []pipeline.ChatMessage) string {
	if len(v.Subjects) > 0 {
		return v.Subjects[0]
	}
	if v.OffenderRole == "" {
		return ""
	}
	for _, m := range msgs {
		if m.SenderID != "" && m.SenderRole == v.OffenderRole {
			return m.SenderID
		}
	}
	return ""
}

// evidenceIDs are the messages the judge cited plus the spans extract
// found: the lines the room page highlights.
func evidenceIDs(v pipeline.Verdict) map[string]bool {
	out := map[string]bool{}
	for _, id := range v.EvidenceIDs {
		out[id] = true
	}
	for _, st := range v.Stages {
		if st.Stage != pipeline.StageExtract || len(st.Output) == 0 {
			continue
		}
		var ex struct {
			Evidence []struct {
				MessageID string `json:"message_id"`
			} `json:"evidence"`
		}
		if json.Unmarshal(st.Output, &ex) == nil {
			for _, e := range ex.Evidence {
				out[e.MessageID] = true
			}
		}
	}
	return out
}

// decide records a confirm or overturn of one item, once the moderator
// holds it (claimForDecision), through record: the path a campaign's bulk
// decision takes too. It answers success once the row is committed.
func (s *server) decide(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	id, v, ok := s.verdictFromPath(w, r)
	if !ok {
		return
	}
	// Microseconds, as the row keeps it: a resend built from the row
	// carries the same occurred_at (and so the same lake partition).
	d, code, err := s.decisionForm(r, who, id, v.Label, v.Category, s.clock.Now().UTC().Truncate(time.Microsecond))
	if err != nil {
		// Refused before the audit row: a form that can only fail must not
		// be recorded as about to decide.
		s.refuse(w, r, id, code, "Not decided: "+err.Error()+".")
		return
	}
	// The decision is audited before its first effect, the take.
	if err := s.audit(r.Context(), decideRecord(who, id, v.Key.RoomID, d)); err != nil {
		s.refuseUnaudited(w, r, err)
		return
	}
	c, err := s.claimForDecision(r, who, id, v.Key.RoomID)
	if errors.Is(err, errAudit) {
		s.refuseUnaudited(w, r, err)
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not take the item to decide it", err)
		return
	}
	if c != nil {
		s.renderConflict(w, r, id, c)
		return
	}
	res, err := s.record(r.Context(), who, []pendingDecision{{Verdict: decidedVerdict{ID: id, Key: v.Key, Label: v.Label, Category: v.Category, Action: v.Action}, D: d, Audited: true}})
	var perm *pipeline.PermanentError
	switch {
	case errors.Is(err, moderation.ErrNoChange), errors.Is(err, moderation.ErrConfirmChanged):
		// The store's word on it (the page was checked above).
		s.refuse(w, r, id, http.StatusConflict, "Not decided: "+refusalOf(err)+".")
		return
	case errors.As(err, &perm):
		s.fail(w, r, http.StatusBadRequest, err.Error(), nil)
		return
	case errors.Is(err, errAudit):
		s.refuseUnaudited(w, r, err)
		return
	case err != nil:
		s.fail(w, r, http.StatusServiceUnavailable, "could not save the decision", err)
		return
	}
	saved := d.Decision
	if res.Queued > 0 {
		saved += " (feedback queued)"
	}
	s.decided(w, r, id, saved)
}

// stop publishes a room stop through the operator API, audited before it
// acts; the request names the moderator, which the operator API's own
// audit row (stop_signals) keeps as a field.
func (s *server) stop(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	if s.stops == nil {
		s.fail(w, r, http.StatusNotFound, "the stop button is off (no --operator-url)", nil)
		return
	}
	id, v, ok := s.verdictFromPath(w, r)
	if !ok {
		return
	}
	req := pipeline.StopRequest{RoomID: v.Key.RoomID, TTL: s.cfg.StopTTL.String(), Reason: "console: stopped by " + who.ID, Moderator: who.ID}
	if err := s.audit(r.Context(), moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionStop, VerdictID: id, RoomID: v.Key.RoomID,
		Detail: "ttl " + req.TTL}); err != nil {
		s.refuseUnaudited(w, r, err)
		return
	}
	sctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if err := s.stops.Stop(sctx, req); err != nil {
		s.fail(w, r, http.StatusBadGateway, "the stop was not published: "+err.Error(), err)
		return
	}
	s.log.Info("console: stop published", "moderator", who.ID, "verdict_id", id, "room_id", v.Key.RoomID, "ttl", req.TTL)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "stop published for room %s (%s)\n", v.Key.RoomID, req.TTL)
}
