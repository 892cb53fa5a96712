package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/internal/bearer"
	"github.com/chatguard/chatguard/internal/tlstest"
	"github.com/chatguard/chatguard/pipeline"
)

const (
	consoleToken = "console-token-0123456789abcdef0123456789abcdef"
	oncallToken  = "oncall-token-0123456789abcdef0123456789abcdef0"
)

// tokensDir writes the two test identities like a mounted Secret.
func tokensDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "console"), []byte(consoleToken+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "oncall-kim"), []byte(oncallToken), 0o600))
	return dir
}

// memAudit is the audit trail in memory. err fails every write (the
// entry is not kept); finishErr fails only FinishStop.
type memAudit struct {
	mu        sync.Mutex
	entries   []pipeline.StopAuditEntry
	err       error
	finishErr error
}

func (a *memAudit) RecordStop(_ context.Context, e pipeline.StopAuditEntry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	a.entries = append(a.entries, e)
	return nil
}

func (a *memAudit) BeginStop(_ context.Context, e pipeline.StopAuditEntry) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return 0, a.err
	}
	e.Outcome, e.HTTPStatus, e.FinishedAt = pipeline.StopPending, 0, time.Time{}
	a.entries = append(a.entries, e)
	return int64(len(a.entries)), nil
}

func (a *memAudit) FinishStop(_ context.Context, id int64, e pipeline.StopAuditEntry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	if a.finishErr != nil {
		return a.finishErr
	}
	if id < 1 || id > int64(len(a.entries)) || a.entries[id-1].Outcome != pipeline.StopPending {
		return errors.New("no pending stop entry with that id")
	}
	p := &a.entries[id-1]
	p.Outcome, p.HTTPStatus, p.Detail, p.FinishedAt = e.Outcome, e.HTTPStatus, e.Detail, e.FinishedAt
	return nil
}

func (a *memAudit) all() []pipeline.StopAuditEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]pipeline.StopAuditEntry(nil), a.entries...)
}

// memPublisher keeps published signals; onPublish, when set, runs on each
// publish (before it succeeds or fails with err).
type memPublisher struct {
	mu        sync.Mutex
	sigs      []pipeline.StopSignal
	err       error
	onPublish func()
}

func (p *memPublisher) Publish(_ context.Context, s pipeline.StopSignal) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onPublish != nil {
		p.onPublish()
	}
	if p.err != nil {
		return 0, p.err
	}
	p.sigs = append(p.sigs, s)
	return 3, nil
}

func (p *memPublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sigs)
}

func newTestOperator(t testing.TB, pub pipeline.StopPublisher) (*httptest.Server, *memAudit, *prometheus.Registry, *syncBuffer) {
	t.Helper()
	return newTestOperatorAt(t, pub, nil)
}

// newTestOperatorAt is newTestOperator on the clock now (time.Now when nil).
func newTestOperatorAt(t testing.TB, pub pipeline.StopPublisher, now func() time.Time) (*httptest.Server, *memAudit, *prometheus.Registry, *syncBuffer) {
	t.Helper()
	tokens, err := bearer.LoadDir(tokensDir(t))
	require.NoError(t, err)
	audit, reg, logs := &memAudit{}, prometheus.NewRegistry(), &syncBuffer{}
	api := newOperatorAPI(tokens, pub, audit, reg, slog.New(slog.NewJSONHandler(logs, nil)))
	if now != nil {
		api.now = now
	}
	srv := httptest.NewServer(api.handler())
	t.Cleanup(srv.Close)
	return srv, audit, reg, logs
}

func post(t testing.TB, url, auth, body string) int {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/stop", strings.NewReader(body))
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestOperatorStopRefusesAndAuditsUnauthenticated(t *testing.T) {
	t.Parallel()
	pub := &memPublisher{}
	srv, audit, reg, logs := newTestOperator(t, pub)
	body := `{"run_id":"run-7","ttl":"168h","reason":"call 010-1234-5678"}`

	require.Equal(t, 401, post(t, srv.URL, "", body))
	require.Equal(t, 401, post(t, srv.URL, "Bearer "+consoleToken[:len(consoleToken)-1]+"x", body))
	require.Equal(t, 401, post(t, srv.URL, "Basic "+consoleToken, body))
	require.Zero(t, pub.count(), "nothing refused is published")

	es := audit.all()
	require.Len(t, es, 3, "every refused request is audited")
	for _, e := range es {
		require.Equal(t, pipeline.StopRefused, e.Outcome)
		require.Equal(t, 401, e.HTTPStatus)
		require.Empty(t, e.Identity)
		require.Equal(t, "run-7", e.RunID, "the audit keeps what was asked for")
		require.NotContains(t, e.Reason, "1234-5678", "a reason is masked before it is stored")
		require.False(t, e.RequestedAt.IsZero())
		require.NotEmpty(t, e.RemoteAddr)
	}
	require.Equal(t, "no bearer token", es[0].Detail)
	require.Equal(t, 3.0, metricValue(t, reg, "chatguard_operator_stop_requests_total", "refused"))
	require.Contains(t, logs.tail(1<<20), `"outcome":"refused"`)
	require.NotContains(t, logs.tail(1<<20), consoleToken[:20], "no token in the log")

	// Authenticated: the token's name is the audited identity.
	require.Equal(t, 202, post(t, srv.URL, "Bearer "+oncallToken, body))
	require.Equal(t, 400, post(t, srv.URL, "Bearer "+consoleToken, `{"ttl":"5m"}`))
	require.Equal(t, 400, post(t, srv.URL, "Bearer "+consoleToken, `{"run_id":"r","surprise":1}`))
	es = audit.all()[3:]
	require.Equal(t, []pipeline.StopOutcome{pipeline.StopAccepted, pipeline.StopInvalid, pipeline.StopInvalid}, []pipeline.StopOutcome{es[0].Outcome, es[1].Outcome, es[2].Outcome})
	require.Equal(t, "oncall-kim", es[0].Identity)
	require.Equal(t, pipeline.StopScopeRun, es[0].Scope)
	require.Equal(t, "168h0m0s", es[0].TTL.String())
	require.Equal(t, "console", es[1].Identity)
	require.Equal(t, 1, pub.count())
	require.NotContains(t, pub.sigs[0].Reason, "1234-5678", "the published reason is masked too")

	// A Redis failure is audited as failed and answered 503.
	pub.mu.Lock()
	pub.err = errors.New("redis: connection refused")
	pub.mu.Unlock()
	require.Equal(t, 503, post(t, srv.URL, "Bearer "+consoleToken, body))
	require.Equal(t, pipeline.StopFailed, audit.all()[6].Outcome)
}

// TestOperatorStopRefusedWhenTheAuditFails: a stop whose audit row cannot
// be written is not published and is answered 503; the log keeps the
// request, and the error is counted.
func TestOperatorStopRefusedWhenTheAuditFails(t *testing.T) {
	t.Parallel()
	pub := &memPublisher{}
	srv, audit, reg, logs := newTestOperator(t, pub)
	audit.err = errors.New("mysql: down")
	require.Equal(t, 503, post(t, srv.URL, "Bearer "+consoleToken, `{"room_id":"room-1"}`))
	require.Zero(t, pub.count(), "not audited, not published")
	require.Equal(t, 1.0, metricValue(t, reg, "chatguard_operator_audit_errors_total", ""))
	require.Equal(t, 1.0, metricValue(t, reg, "chatguard_operator_stop_requests_total", "failed"))
	require.Contains(t, logs.tail(1<<20), `"audit_err":"mysql: down"`, "the log keeps the trail when MySQL cannot")
	require.Contains(t, logs.tail(1<<20), `"identity":"console"`)
}

// TestOperatorStopOutcomeFailureNeverPublishesTwice: a stop that was
// published but whose outcome cannot be recorded is answered as
// published, counted and logged, and published once.
func TestOperatorStopOutcomeFailureNeverPublishesTwice(t *testing.T) {
	t.Parallel()
	pub := &memPublisher{}
	srv, audit, reg, logs := newTestOperator(t, pub)
	audit.finishErr = errors.New("mysql: gone away")
	require.Equal(t, 202, post(t, srv.URL, "Bearer "+consoleToken, `{"room_id":"room-1"}`))
	require.Equal(t, 1, pub.count())
	require.Equal(t, 1.0, metricValue(t, reg, "chatguard_operator_audit_outcome_errors_total", ""))
	require.Equal(t, pipeline.StopPending, audit.all()[0].Outcome, "the row stays pending")
	require.Contains(t, logs.tail(1<<20), "stays pending: mysql: gone away")
	require.Contains(t, logs.tail(1<<20), `"outcome":"accepted"`, "the log line has the outcome")
}

// metricValue is the value of a counter, with the outcome label when given.
func metricValue(t testing.TB, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if outcome == "" {
				return m.GetCounter().GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no metric %s{outcome=%q}", name, outcome)
	return 0
}

func TestOperatorConfig(t *testing.T) {
	t.Parallel()
	base := DefaultConfig()
	require.Empty(t, base.PprofAddr, "pprof is off by default")
	require.Empty(t, base.OperatorAddr, "the operator API is off until tokens are configured")
	for addr, ok := range map[string]bool{"127.0.0.1:6060": true, "[::1]:6060": true, "localhost:6060": true,
		":6060": false, "0.0.0.0:6060": false, "10.0.0.5:6060": false, "pod.local:6060": false} {
		c := base
		c.PprofAddr = addr
		err := c.validateOperator()
		if ok {
			require.NoError(t, err, addr)
		} else {
			require.ErrorContains(t, err, "--pprof-addr", addr)
		}
	}
	c := base
	c.OperatorAddr = ":9091"
	require.ErrorContains(t, c.validateOperator(), "--operator-tokens-dir is required")
	c.OperatorTokensDir, c.OperatorClientCA = "/tokens", "/ca.pem"
	require.ErrorContains(t, c.validateOperator(), "--operator-client-ca needs")
	c.OperatorClientCA = ""
	require.NoError(t, c.validateOperator())
	c.OperatorAddr = c.AdminAddr
	require.ErrorContains(t, c.validateOperator(), "must differ")
}

func TestPprofOnlyOnItsOwnListener(t *testing.T) {
	t.Parallel()
	s, err := listen("pprof", "127.0.0.1:0", pprofHandler(), nil)
	require.NoError(t, err)
	serving(t, s)
	resp, err := http.Get("http://" + s.Addr() + "/debug/pprof/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)

	srv, _, _, _ := newTestOperator(t, &memPublisher{})
	resp, err = http.Get(srv.URL + "/debug/pprof/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 404, resp.StatusCode, "the operator API serves no profiles")
}

func TestStopClientSendsTheToken(t *testing.T) {
	t.Parallel()
	pub := &memPublisher{}
	srv, audit, _, _ := newTestOperator(t, pub)
	tokenFile := filepath.Join(tokensDir(t), "oncall-kim")
	var out, errb strings.Builder
	code := runStop(context.Background(), []string{"--operator-url", srv.URL, "--token-file", tokenFile, "--run", "run-9", "--reason", "bad window"},
		func(string) string { return "" }, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	var ans struct {
		Identity  string              `json:"identity"`
		Receivers int                 `json:"receivers"`
		Signal    pipeline.StopSignal `json:"signal"`
	}
	require.NoError(t, json.Unmarshal([]byte(out.String()), &ans))
	require.Equal(t, "oncall-kim", ans.Identity)
	require.Equal(t, "run-9", ans.Signal.RunID)

	// From the environment, and refused with a wrong one.
	env := map[string]string{operatorTokenEnv: consoleToken}
	code = runStop(context.Background(), []string{"--operator-url", srv.URL, "--room", "room-3"}, func(k string) string { return env[k] }, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	env[operatorTokenEnv] = strings.Repeat("w", 40)
	errb.Reset()
	code = runStop(context.Background(), []string{"--operator-url", srv.URL, "--room", "room-3"}, func(k string) string { return env[k] }, &out, &errb)
	require.Equal(t, 1, code)
	require.Contains(t, errb.String(), "401")
	es := audit.all()
	require.Equal(t, []string{"oncall-kim", "console", ""}, []string{es[0].Identity, es[1].Identity, es[2].Identity})

	// No token at all is a usage error; so is a token given as a flag value.
	code = runStop(context.Background(), []string{"--operator-url", srv.URL, "--room", "room-3"}, func(string) string { return "" }, &out, &errb)
	require.Equal(t, 2, code)
	code = runStop(context.Background(), []string{"--operator-url", srv.URL, "--room", "room-3", "--token", consoleToken}, func(string) string { return "" }, &out, &errb)
	require.Equal(t, 2, code)
	require.Equal(t, 2, pub.count())
}

// TestOperatorMTLS: with a client CA, the operator listener refuses a
// client without a certificate before any token is looked at, and
// `worker stop` gets through with its certificate and token.
func TestOperatorMTLS(t *testing.T) {
	t.Parallel()
	cert, key := tlstest.SelfSigned(t)
	cfg := DefaultConfig()
	cfg.OperatorAddr, cfg.OperatorTokensDir = "127.0.0.1:0", tokensDir(t)
	cfg.OperatorTLSCert, cfg.OperatorTLSKey, cfg.OperatorClientCA = cert, key, cert
	require.NoError(t, cfg.validateOperator())
	audit := &memAudit{}
	s, err := openOperator(cfg, &memPublisher{}, audit, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	serving(t, s)
	url := "https://" + s.Addr()

	var out, errb strings.Builder
	code := runStop(context.Background(), []string{"--operator-url", url, "--token-file", filepath.Join(cfg.OperatorTokensDir, "console"), "--room", "r1", "--ca-file", cert},
		func(string) string { return "" }, &out, &errb)
	require.Equal(t, 1, code, "no client certificate: the handshake fails")
	require.Empty(t, audit.all(), "refused before HTTP: nothing to audit")

	errb.Reset()
	code = runStop(context.Background(), []string{"--operator-url", url, "--token-file", filepath.Join(cfg.OperatorTokensDir, "console"), "--room", "r1",
		"--ca-file", cert, "--cert-file", cert, "--key-file", key}, func(string) string { return "" }, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Equal(t, "console", audit.all()[0].Identity)
}

// TestRefusedRequestsCannotFloodTheAudit: unauthenticated requests write
// audit rows only up to a rate; past it they are logged and counted, and
// an authenticated stop is still audited.
func TestRefusedRequestsCannotFloodTheAudit(t *testing.T) {
	t.Parallel()
	// A clock that stands still: the limiter refills nothing however long
	// the requests take on a busy machine.
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	srv, audit, reg, logs := newTestOperatorAt(t, &memPublisher{}, func() time.Time { return at })
	for range refusedRowsBurst + 30 {
		require.Equal(t, 401, post(t, srv.URL, "Bearer wrong", `{"room_id":"r"}`))
	}
	rows := len(audit.all())
	require.Equal(t, refusedRowsBurst, rows, "the burst is written, the rest held back")
	require.Equal(t, float64(refusedRowsBurst+30-rows), metricValue(t, reg, "chatguard_operator_audit_rows_skipped_total", ""))
	require.Contains(t, logs.tail(1<<20), "refused-request rate limit")
	require.Equal(t, 202, post(t, srv.URL, "Bearer "+consoleToken, `{"room_id":"r"}`))
	require.Equal(t, "console", audit.all()[rows].Identity, "authenticated stops are never limited")
}

// serving serves s until the test ends and fails it if serving failed.
func serving(tb testing.TB, s *lifecycle.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
}

// A stop the console sends names the moderator; the audit entry keeps it
// as a field, not only inside the reason.
func TestOperatorStopRecordsTheConsoleModerator(t *testing.T) {
	t.Parallel()
	pub := &memPublisher{}
	srv, audit, _, _ := newTestOperator(t, pub)
	require.Equal(t, 202, post(t, srv.URL, "Bearer "+consoleToken, `{"room_id":"room-1","ttl":"10m","reason":"console: stopped by mod-1","moderator":"mod-1"}`))
	audit.mu.Lock()
	defer audit.mu.Unlock()
	require.Len(t, audit.entries, 1)
	require.Equal(t, "mod-1", audit.entries[0].Moderator)
	require.Equal(t, "console", audit.entries[0].Identity)
}
