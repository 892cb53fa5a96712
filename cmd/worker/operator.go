package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/internal/bearer"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

// The operator surface: three listeners, each with its own
// peers. --admin-addr serves probes and metrics to the cluster; the
// operator API (POST /v1/stop) is on --operator-addr behind bearer tokens
// (and optionally mTLS), every request audited; pprof exists only when
// --pprof-addr names a loopback address.

func (c *Config) operatorFlags(fs *cli.FlagSet) {
	fs.StringVar(&c.OperatorAddr, "operator-addr", "listen address of the operator API (POST /v1/stop, bearer tokens); empty disables it")
	fs.StringVar(&c.OperatorTokensDir, "operator-tokens-dir", "directory of operator tokens (a mounted Secret): each file's name is the audited identity, its content the bearer token (32+ characters)")
	fs.StringVar(&c.OperatorTLSCert, "operator-tls-cert", "PEM certificate of the operator listener; with --operator-tls-key it serves HTTPS")
	fs.StringVar(&c.OperatorTLSKey, "operator-tls-key", "PEM private key of the operator listener")
	fs.StringVar(&c.OperatorClientCA, "operator-client-ca", "PEM CA bundle; when set, operator clients must present a certificate it signed (mTLS), as well as a token")
	fs.StringVar(&c.PprofAddr, "pprof-addr", "loopback listen address of /debug/pprof (127.0.0.1:6060); empty (the default) serves no profiles")
}

func (c Config) validateOperator() error {
	var errs []error
	if c.OperatorAddr != "" {
		if _, _, err := net.SplitHostPort(c.OperatorAddr); err != nil {
			errs = append(errs, fmt.Errorf("--operator-addr %q: %v", c.OperatorAddr, err))
		}
		if c.OperatorTokensDir == "" {
			errs = append(errs, errors.New("--operator-tokens-dir is required with --operator-addr: the operator API never runs unauthenticated"))
		}
		if _, port, _ := net.SplitHostPort(c.OperatorAddr); c.OperatorAddr == c.AdminAddr && port != "0" {
			errs = append(errs, errors.New("--operator-addr must differ from --admin-addr"))
		}
	}
	if (c.OperatorTLSCert == "") != (c.OperatorTLSKey == "") {
		errs = append(errs, errors.New("--operator-tls-cert and --operator-tls-key go together"))
	}
	if c.OperatorClientCA != "" && c.OperatorTLSCert == "" {
		errs = append(errs, errors.New("--operator-client-ca needs --operator-tls-cert and --operator-tls-key (mTLS is TLS)"))
	}
	if c.PprofAddr != "" {
		if err := loopbackOnly(c.PprofAddr); err != nil {
			errs = append(errs, fmt.Errorf("--pprof-addr: %w", err))
		}
	}
	return errors.Join(errs...)
}

// loopbackOnly accepts host:port whose host is a loopback IP or
// "localhost": profiles show the command line and memory, so they are for
// kubectl port-forward / exec only, never the pod network.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address (127.0.0.1:PORT or [::1]:PORT)", addr)
	}
	return nil
}

// operatorTLS returns the operator listener's TLS config, nil for plain
// HTTP.
func (c Config) operatorTLS() (*tls.Config, error) {
	if c.OperatorTLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.OperatorTLSCert, c.OperatorTLSKey)
	if err != nil {
		return nil, fmt.Errorf("operator tls: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if c.OperatorClientCA != "" {
		pool, err := cli.LoadCAPool(c.OperatorClientCA)
		if err != nil {
			return nil, fmt.Errorf("operator tls: %w", err)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// operatorAPI serves the authenticated operator endpoints.
type operatorAPI struct {
	tokens *bearer.Set
	pub    pipeline.StopPublisher // nil: stop signals disabled (no Redis)
	audit  pipeline.StopAudit
	log    *slog.Logger
	now    func() time.Time
	// requests counts stop requests by outcome; auditErrors audit rows
	// that could not be written (the log line is then the only trail; an
	// authenticated stop is then refused, unpublished); outcomeErrors
	// published stops whose outcome could not be recorded on their
	// pending row.
	requests      *prometheus.CounterVec
	auditErrors   prometheus.Counter
	outcomeErrors prometheus.Counter
	// refusedRows bounds the MySQL rows unauthenticated requests may
	// write, so that anyone who reaches the port cannot fill the audit
	// table; past it a refused request is only logged and counted in
	// auditSkipped.
	refusedRows  *rate.Limiter
	auditSkipped prometheus.Counter
}

// Refused requests write at most refusedRowsPerSecond audit rows (burst
// refusedRowsBurst); authenticated ones are always written.
const (
	refusedRowsPerSecond = 5
	refusedRowsBurst     = 50
)

func newOperatorAPI(tokens *bearer.Set, pub pipeline.StopPublisher, audit pipeline.StopAudit, reg prometheus.Registerer, log *slog.Logger) *operatorAPI {
	o := &operatorAPI{tokens: tokens, pub: pub, audit: audit, log: log, now: time.Now,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_operator_stop_requests_total",
			Help: "POST /v1/stop requests by outcome (accepted|refused|invalid|failed)."}, []string{"outcome"}),
		auditErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_operator_audit_errors_total",
			Help: "Operator requests whose audit row could not be written to MySQL (the log line is the trail; a stop is then not published)."}),
		outcomeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_operator_audit_outcome_errors_total",
			Help: "Stops acted on whose outcome could not be recorded on their pending audit row (the row stays pending; the log line has the outcome)."}),
		refusedRows: rate.NewLimiter(refusedRowsPerSecond, refusedRowsBurst),
		auditSkipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_operator_audit_rows_skipped_total",
			Help: "Refused (unauthenticated) operator requests past the audit-row rate limit: logged, no MySQL row."}),
	}
	for _, oc := range []pipeline.StopOutcome{pipeline.StopAccepted, pipeline.StopRefused, pipeline.StopInvalid, pipeline.StopFailed} {
		o.requests.WithLabelValues(string(oc))
	}
	reg.MustRegister(o.requests, o.auditErrors, o.outcomeErrors, o.auditSkipped)
	return o
}

// handler routes the operator API. Anything else is 404, pprof included.
func (o *operatorAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/stop", o.stop)
	return mux
}

// stop serves POST /v1/stop: "Authorization: Bearer <token>" and a JSON
// pipeline.StopRequest in; 202 with the published signal and the number of
// pods that heard it; 401 without a valid token; 400 for a bad body; 503
// when the audit row cannot be written, Redis fails or stops are
// disabled. Every request is audited (MySQL stop_signals and one log
// line), refused ones included, and a stop is audited before it acts: its
// row is written pending first, and a stop whose row cannot be written is
// not published.
func (o *operatorAPI) stop(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	e := pipeline.StopAuditEntry{RequestedAt: o.now().UTC(), RemoteAddr: r.RemoteAddr}
	identity, ok := o.tokens.Identify(r)
	var (
		req    pipeline.StopRequest
		decErr error
	)
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<10))
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		decErr = dec.Decode(&req)
	} else {
		decErr = err
	}
	// Contact details typed into a reason are masked before the reason is
	// published, stored on stopped verdicts or audited.
	req.Reason = pipeline.ClipRunes(chatprep.Redact(req.Reason), 500)
	e.RoomID, e.RunID, e.WindowStart, e.WindowEnd, e.Reason = req.RoomID, req.RunID, req.WindowStart, req.WindowEnd, req.Reason
	e.Moderator = pipeline.ClipRunes(req.Moderator, 128)
	if d, err := time.ParseDuration(req.TTL); err == nil {
		e.TTL = d
	}
	answer := func(code int, outcome pipeline.StopOutcome, detail string, v any) {
		e.HTTPStatus, e.Outcome, e.Detail = code, outcome, detail
		o.record(r.Context(), e)
		writeJSON(w, code, v)
	}
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="chatguard-operator"`)
		detail := "no bearer token"
		if r.Header.Get("Authorization") != "" {
			detail = "bearer token matches no operator token"
		}
		answer(http.StatusUnauthorized, pipeline.StopRefused, detail, map[string]string{"error": "unauthorized"})
		return
	}
	e.Identity = identity
	if decErr != nil {
		answer(http.StatusBadRequest, pipeline.StopInvalid, decErr.Error(), map[string]string{"error": "body is not a stop request: " + decErr.Error()})
		return
	}
	sig, err := req.Signal(o.now())
	if err != nil {
		answer(http.StatusBadRequest, pipeline.StopInvalid, err.Error(), map[string]string{"error": err.Error()})
		return
	}
	e.Scope, e.TTL = sig.Scope, sig.ExpiresAt.Sub(sig.PublishedAt)
	if o.pub == nil {
		answer(http.StatusServiceUnavailable, pipeline.StopFailed, "stop signals disabled (no --redis-addr)",
			map[string]string{"error": "stop signals are disabled on this worker (no --redis-addr)"})
		return
	}
	id, err := o.begin(r.Context(), e)
	if err != nil {
		e.HTTPStatus, e.Outcome, e.Detail = http.StatusServiceUnavailable, pipeline.StopFailed, "not published: the audit row could not be written"
		o.requests.WithLabelValues(string(e.Outcome)).Inc()
		o.logEntry(r.Context(), e, err, false)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the stop was not published: its audit row could not be written"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	n, err := o.pub.Publish(ctx, sig)
	if err != nil {
		o.finish(r.Context(), id, e, http.StatusServiceUnavailable, pipeline.StopFailed, err.Error())
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	o.finish(r.Context(), id, e, http.StatusAccepted, pipeline.StopAccepted, "")
	writeJSON(w, http.StatusAccepted, map[string]any{"signal": sig, "receivers": n, "identity": identity})
}

// auditContext bounds one audit write, which a client that hung up does
// not cut short.
func auditContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
}

// record writes the audit row of a request that does not act (refused,
// invalid, stops disabled) and the log line.
func (o *operatorAPI) record(ctx context.Context, e pipeline.StopAuditEntry) {
	o.requests.WithLabelValues(string(e.Outcome)).Inc()
	e.FinishedAt = e.RequestedAt
	actx, cancel := auditContext(ctx)
	defer cancel()
	var auditErr error
	skipped := e.Outcome == pipeline.StopRefused && !o.refusedRows.AllowN(o.now(), 1)
	if skipped {
		o.auditSkipped.Inc()
	} else {
		auditErr = o.audit.RecordStop(actx, e)
	}
	if auditErr != nil {
		o.auditErrors.Inc()
	}
	o.logEntry(ctx, e, auditErr, skipped)
}

// begin writes the pending audit row of a stop about to be published. An
// error is counted; the caller refuses the stop and logs it.
func (o *operatorAPI) begin(ctx context.Context, e pipeline.StopAuditEntry) (int64, error) {
	actx, cancel := auditContext(ctx)
	defer cancel()
	id, err := o.audit.BeginStop(actx, e)
	if err != nil {
		o.auditErrors.Inc()
	}
	return id, err
}

// finish records the outcome of a stop that was acted on, on its pending
// row, and logs it. A failed update is counted and logged with the
// outcome; the stop is never published again for it.
func (o *operatorAPI) finish(ctx context.Context, id int64, e pipeline.StopAuditEntry, code int, outcome pipeline.StopOutcome, detail string) {
	e.HTTPStatus, e.Outcome, e.Detail, e.FinishedAt = code, outcome, detail, o.now().UTC()
	o.requests.WithLabelValues(string(e.Outcome)).Inc()
	actx, cancel := auditContext(ctx)
	defer cancel()
	err := o.audit.FinishStop(actx, id, e)
	if err != nil {
		o.outcomeErrors.Inc()
		err = fmt.Errorf("audit row %d stays pending: %w", id, err)
	}
	o.logEntry(ctx, e, err, false)
}

// logEntry writes the one log line of a request: the whole entry, so the
// log is a second trail, and the audit error when the row could not be
// written.
func (o *operatorAPI) logEntry(ctx context.Context, e pipeline.StopAuditEntry, auditErr error, skipped bool) {
	level := slog.LevelInfo
	if e.Outcome != pipeline.StopAccepted {
		level = slog.LevelWarn
	}
	attrs := []any{"identity", e.Identity, "moderator", e.Moderator, "outcome", string(e.Outcome), "status", e.HTTPStatus, "remote", e.RemoteAddr,
		"scope", string(e.Scope), "room_id", e.RoomID, "run_id", e.RunID, "ttl", e.TTL.String(), "reason", e.Reason, "detail", chatprep.Redact(e.Detail)}
	if !e.WindowStart.IsZero() {
		attrs = append(attrs, "window_start", e.WindowStart.UTC().Format(time.RFC3339), "window_end", e.WindowEnd.UTC().Format(time.RFC3339))
	}
	if skipped {
		attrs = append(attrs, "audit_row", "skipped (refused-request rate limit)")
	}
	if auditErr != nil {
		level = slog.LevelError
		attrs = append(attrs, "audit_err", auditErr.Error())
	}
	o.log.Log(ctx, level, "worker: operator stop", attrs...)
}

// pprofHandler serves the runtime profiles; it is mounted only on the
// loopback --pprof-addr listener.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// serverDrain bounds a listener's graceful shutdown: requests in flight
// get this long to finish.
const serverDrain = 2 * time.Second

// listen opens addr for h (TLS when tc is set).
func listen(name, addr string, h http.Handler, tc *tls.Config) (*lifecycle.Server, error) {
	return lifecycle.Listen(name, addr, &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, TLSConfig: tc})
}

// openOperator loads the tokens and TLS files and opens the operator API's
// listener (server.run serves it).
func openOperator(cfg Config, pub pipeline.StopPublisher, audit pipeline.StopAudit, reg prometheus.Registerer, log *slog.Logger) (*lifecycle.Server, error) {
	tokens, err := bearer.LoadDir(cfg.OperatorTokensDir)
	if err != nil {
		return nil, err
	}
	tc, err := cfg.operatorTLS()
	if err != nil {
		return nil, err
	}
	api := newOperatorAPI(tokens, pub, audit, reg, log)
	s, err := listen("operator", cfg.OperatorAddr, api.handler(), tc)
	if err != nil {
		return nil, err
	}
	log.Info("worker: operator API", "addr", s.Addr(), "identities", tokens.Names(), "tls", tc != nil, "mtls", tc != nil && tc.ClientCAs != nil)
	return s, nil
}
