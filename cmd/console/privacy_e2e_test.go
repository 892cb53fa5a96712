package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

// modelRecorder is a reverse proxy in front of a model simulator that
// keeps the body of every chat completion request that reached it: what
// left the console for a model server.
type modelRecorder struct {
	URL  string // base URL ending in /v1
	mu   sync.Mutex
	reqs [][]byte
}

func recordModelRequests(t *testing.T, sim *standin.LLM) *modelRecorder {
	t.Helper()
	target, err := url.Parse(strings.TrimSuffix(sim.BaseURL, "/v1"))
	require.NoError(t, err)
	rec := &modelRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			rec.mu.Lock()
			rec.reqs = append(rec.reqs, b)
			rec.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.URL = srv.URL + "/v1"
	return rec
}

// texts returns every string in each recorded request body, JSON escapes
// undone, one string per request.
func (m *modelRecorder) texts(t *testing.T) []string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, b := range m.reqs {
		var v any
		require.NoError(t, json.Unmarshal(b, &v))
		var sb strings.Builder
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				sb.WriteString(x)
				sb.WriteByte('\n')
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for _, e := range x {
					walk(e)
				}
			}
		}
		walk(v)
		out = append(out, sb.String())
	}
	return out
}

// digitsAndLetters keeps letters and digits, lower case, without the
// transcript's datamarking: how a contact detail is looked for, whatever
// separators it was written or sent with.
func digitsAndLetters(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r != chatprep.DataMarker && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// TestOnDemandReviewKeepsChatDataFromTheModels boots the console as its
// pod runs it, against the local stack, with the primary pool down so that
// every stage goes to the third-party fallback, and asks for an on-demand
// review of a room whose chat holds a cloud-metadata image URL and a phone
// number: neither pool's server receives the URL, and the fallback never
// receives the number unmasked. The console's reviews go through the
// workers' stage engine (image gate, pseudonymisation), not a bare one.
func TestOnDemandReviewKeepsChatDataFromTheModels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dsn := stacktest.MySQL(t)
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	feedback := stacktest.NewQueue(t, "feedback", 5, 30*time.Second)

	const (
		room     = "room-ssrf"
		metadata = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
		phone    = "010-2345-6789"
	)
	at := time.Date(2026, 11, 30, 10, 5, 0, 0, time.UTC)
	chat := standin.StartChatAPI(t, map[string][]pipeline.ChatMessage{room: {
		{MessageID: "m1", SenderID: "b", SenderRole: pipeline.RoleBuyer, SentAt: at, Kind: pipeline.KindText, Text: "안녕하세요 아직 판매중인가요?"},
		{MessageID: "m2", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at.Add(time.Minute), Kind: pipeline.KindText,
			Text: "입금 확인 캡처 보내드릴게요 " + phone + " 로 문자 주세요"},
		{MessageID: "m3", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at.Add(2 * time.Minute), Kind: pipeline.KindImage, ImageURL: metadata},
		{MessageID: "m4", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at.Add(3 * time.Minute), Kind: pipeline.KindImage,
			ImageURL: "https://img.example-market.test/rooms/r1/receipt.jpg"},
	}})
	primary := recordModelRequests(t, standin.StartLLM(t, standin.LLMOptions{Name: "primary", Model: "sim-p",
		Config: `{"ttft":"1ms","itl":"0s","jitter":0,"faults":{"503":1}}`}))
	fallback := recordModelRequests(t, standin.StartLLM(t, standin.LLMOptions{Name: "fallback", Model: "sim-f",
		Config: `{"ttft":"1ms","itl":"0s","jitter":0}`}))

	key := "0123456789abcdef0123456789abcdef-session"
	keyFile := filepath.Join(t.TempDir(), "session-key")
	require.NoError(t, os.WriteFile(keyFile, []byte(key), 0o600))
	cfg := DefaultConfig()
	cfg.DevInsecureKeys = true
	cfg.ListenAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MySQL.DSN, cfg.Chat.BaseURL, cfg.Feedback.URL = dsn, chat, feedback.URL
	cfg.RedisAddr = stacktest.Get(t, "CHATGUARD_REDIS_ADDR")
	cfg.Live.KeyPrefix = stacktest.Unique("live") + ":"
	cfg.LLM.Primary.BaseURL, cfg.LLM.Primary.Model = primary.URL, "sim-p"
	cfg.LLM.Fallback.BaseURL, cfg.LLM.Fallback.Model = fallback.URL, "sim-f"
	cfg.Images.Hosts = []string{"img.example-market.test"}
	cfg.QuoteDigestKey = "test-digest-key-of-at-least-thirty-two-bytes"
	cfg.DevLogin, cfg.SessionKeyFile = true, keyFile

	ready := make(chan string, 1)
	m := &Main{Config: cfg, Log: slog.New(slog.DiscardHandler), OnReady: func(addr, _ string) { ready <- addr }}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})
	var base string
	select {
	case addr := <-ready:
		base = "http://" + addr
	case err := <-done:
		t.Fatalf("the console did not start: %v", err)
	}

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 2 * time.Minute}
	resp, err := hc.PostForm(base+"/login", url.Values{"email": {"alice@example.com"}, "next": {"/queue"}})
	require.NoError(t, err)
	resp.Body.Close()
	req, _ := http.NewRequest("POST", base+"/v1/reviews",
		strings.NewReader(`{"room_id":"`+room+`","window_start":"2026-11-30T10:00:00Z","window_end":"2026-11-30T11:00:00Z"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", pageCSRF(t, hc, base+"/queue"))
	resp, err = hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	types := eventTypes(t, resp.Body)
	require.NotEmpty(t, types)
	require.Equal(t, "verdict", types[len(types)-1], "the review ended with a verdict: %v", types)

	primaryTexts, fallbackTexts := primary.texts(t), fallback.texts(t)
	require.NotEmpty(t, fallbackTexts, "the stages went to the fallback")
	sawAllowed := false
	for _, s := range append(primaryTexts, fallbackTexts...) {
		require.NotContains(t, s, "169.254.169.254", "the metadata URL reached a model server")
		sawAllowed = sawAllowed || strings.Contains(s, "img.example-market.test/rooms/r1/receipt.jpg")
	}
	require.True(t, sawAllowed, "the allowed CDN image reached the vision stage")
	for _, s := range fallbackTexts {
		require.NotContains(t, digitsAndLetters(s), digitsAndLetters(phone), "the phone number reached the third-party fallback unmasked")
	}
}

// pageCSRF is the CSRF token a page gives its signed-in moderator, read
// as the browser reads it.
func pageCSRF(t *testing.T, hc *http.Client, page string) string {
	t.Helper()
	resp, err := hc.Get(page)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(body)
	require.NotNil(t, m, "no CSRF token on %s: %s", page, body)
	return html.UnescapeString(string(m[1]))
}

// eventTypes reads an SSE stream up to its final event (verdict, error,
// stopped) and returns the event types in order.
func eventTypes(t *testing.T, body io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		typ, ok := strings.CutPrefix(sc.Text(), "event: ")
		if !ok {
			continue
		}
		out = append(out, typ)
		if pipeline.LiveEventType(typ).Final() {
			break
		}
	}
	return out
}
