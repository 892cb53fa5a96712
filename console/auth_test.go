package console

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
)

// proxyRequest is a request that reached the console from the auth proxy
// (the prod overlay's sidecar on loopback) with the given headers.
func proxyRequest(headers map[string][]string) *http.Request {
	r := httptest.NewRequest("GET", "/queue", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	for k, vs := range headers {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	return r
}

// TestForgedAuthRequestEmailSignsNobodyIn: oauth2-proxy in reverse-proxy
// mode sets X-Forwarded-Email and passes a client's X-Auth-Request-Email
// through. With the default configuration, a forged X-Auth-Request-Email
// arriving from the trusted proxy address signs nobody in, alone or next to
// the proxy's own header; only the configured header names the moderator.
func TestForgedAuthRequestEmailSignsNobodyIn(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.TrustedProxies = "127.0.0.1/32"
	require.Equal(t, "X-Forwarded-Email", cfg.IdentityHeader)
	a := newAuth(cfg, []byte("0123456789abcdef0123456789abcdef"), nil, nil)

	_, ok := a.identify(proxyRequest(map[string][]string{"X-Auth-Request-Email": {"admin@example.com"}}))
	require.False(t, ok, "a forged X-Auth-Request-Email alone signs nobody in")

	who, ok := a.identify(proxyRequest(map[string][]string{
		"X-Auth-Request-Email": {"admin@example.com"}, "X-Forwarded-Email": {"mallory@example.com"}}))
	require.True(t, ok)
	require.Equal(t, "mallory@example.com", who.Email, "the proxy's header names the moderator, not the forged one")
	require.Equal(t, moderatorID("mallory@example.com"), who.ID)

	_, ok = a.identify(proxyRequest(map[string][]string{"X-Forwarded-Email": {"admin@example.com", "mallory@example.com"}}))
	require.False(t, ok, "a repeated identity header is ambiguous")

	// nginx auth_request set-ups name their header instead; then only it counts.
	cfg.IdentityHeader = "X-Auth-Request-Email"
	a = newAuth(cfg, []byte("0123456789abcdef0123456789abcdef"), nil, nil)
	who, ok = a.identify(proxyRequest(map[string][]string{"X-Auth-Request-Email": {"mod@example.com"}, "X-Forwarded-Email": {"admin@example.com"}}))
	require.True(t, ok)
	require.Equal(t, "mod@example.com", who.Email)
}

func TestIdentityHeaderMustBeAHeaderName(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	for _, bad := range []string{"", "X-Forwarded-Email,X-Auth-Request-Email", "X Email", "X-Email:"} {
		cfg.IdentityHeader = bad
		require.ErrorContains(t, cfg.Validate(), "--identity-header", bad)
	}
}

// Sessions and CSRF tokens are dated by the app's clock: a session ends
// sessionTTL after it was made, and a page's token is good for the next
// day too, not the one after.
func TestSessionsAndTokensExpireOnTheClock(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.DevLogin = true
	clk := clock.NewFake(time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC))
	a := newAuth(cfg, []byte("0123456789abcdef0123456789abcdef"), clk, nil)
	who := Who{ID: moderatorID("mod@example.com")}
	cookie := a.session("mod@example.com")
	token := a.csrfToken(who, clk.Now())
	post := func() *http.Request {
		r := httptest.NewRequest("POST", "/verdicts/7/decide", nil)
		r.Header.Set(csrfHeader, token)
		return r
	}

	clk.Advance(sessionTTL - time.Second)
	email, ok := a.verifySession(cookie)
	require.True(t, ok)
	require.Equal(t, "mod@example.com", email)
	require.True(t, a.checkCSRF(post(), who), "the next day's check takes the day before's token")

	clk.Advance(2 * time.Second)
	_, ok = a.verifySession(cookie)
	require.False(t, ok, "the session ended sessionTTL after it was made")
	clk.Advance(48 * time.Hour)
	require.False(t, a.checkCSRF(post(), who), "a token two days old is refused")
}
