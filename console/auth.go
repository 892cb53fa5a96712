package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/mail"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

// Who is the signed-in moderator.
type Who struct {
	// Email is the identity the proxy or the dev login gave; it is shown
	// to the moderator and never stored.
	Email string
	// ID is the pseudonymous moderator id stored with decisions, lake
	// events and on-demand verdicts: the same person always gets the same
	// id, and the id alone names nobody.
	ID string
}

// moderatorIDs derives Who.ID from an e-mail, keyed (pseudonym.Moderator),
// and while the legacy forms are on (rekey set) moves what MySQL holds
// under the moderator's legacy unkeyed id to it, once per moderator and
// process: signing in is the only moment both ids are known.
type moderatorIDs struct {
	keys  *pseudonym.Keys
	rekey func(ctx context.Context, legacy, current string, at time.Time) (int64, error)
	log   *slog.Logger
	clock clock.Clock
	done  sync.Map
}

// of is email's moderator id; a nil m (or one without keys) uses the dev
// keys.
func (m *moderatorIDs) of(email string) string {
	if m == nil {
		return pseudonym.Dev().ModeratorID(email)
	}
	return pseudonym.OrDev(m.keys).ModeratorID(email)
}

// signedIn re-keys who's legacy rows the first time this process sees
// them; a failure is logged and tried again on their next request.
func (m *moderatorIDs) signedIn(ctx context.Context, who Who) {
	if m == nil || m.rekey == nil || who.Email == "" {
		return
	}
	if _, ok := m.done.Load(who.ID); ok {
		return
	}
	moved, err := m.rekey(ctx, pseudonym.LegacyModeratorID(who.Email), who.ID, m.clock.Now())
	if err != nil {
		m.log.Warn("console: re-keying a moderator's legacy id failed; trying again on their next request", "moderator", who.ID, "err", err)
		return
	}
	m.done.Store(who.ID, true)
	if moved > 0 {
		m.log.Info("console: moderator's legacy id re-keyed", "moderator", who.ID, "rows", moved)
	}
}

type whoKey struct{}

func whoFrom(ctx context.Context) (Who, bool) {
	w, ok := ctx.Value(whoKey{}).(Who)
	return w, ok
}

// auth decides who a request comes from: the auth proxy's identity header,
// trusted only when the connection comes from one of the proxy's
// addresses (anyone else could send the header), or a development session
// cookie when --dev-login is on. It also issues and checks CSRF tokens.
type auth struct {
	proxies []netip.Prefix
	// header is the one identity header (--identity-header). Exactly one
	// is read, never a list: a proxy passes through the headers it does
	// not set itself (oauth2-proxy in reverse-proxy mode sets
	// X-Forwarded-Email and forwards a client's X-Auth-Request-Email), so
	// any second header would be the client's to forge.
	header   string
	devLogin bool
	key      []byte
	// clock dates sessions and CSRF tokens.
	clock clock.Clock
	// ids derives moderator ids.
	ids *moderatorIDs
}

// newAuth returns c's authenticator; Validate has checked the proxies'
// CIDRs.
func newAuth(c Config, key []byte, clk clock.Clock, ids *moderatorIDs) *auth {
	proxies, _ := c.proxies()
	if ids == nil {
		ids = &moderatorIDs{}
	}
	ids.keys, ids.clock = pseudonym.OrDev(ids.keys), clock.Or(clk)
	if ids.log == nil {
		ids.log = slog.New(slog.DiscardHandler)
	}
	return &auth{proxies: proxies, header: c.IdentityHeader, devLogin: c.DevLogin, key: key, clock: clock.Or(clk), ids: ids}
}

const (
	sessionCookie = "chatguard_session"
	sessionTTL    = 12 * time.Hour
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "csrf"
)

// loadKey reads the signing key from path, or makes a random one.
func loadKey(path string) ([]byte, error) {
	if path == "" {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		return k, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) < 32 {
		return nil, errors.New("session key: the file holds fewer than 32 bytes")
	}
	return b, nil
}

func (a *auth) fromProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range a.proxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// identify returns who sent r, if anyone.
func (a *auth) identify(r *http.Request) (Who, bool) {
	if a.fromProxy(r) && a.header != "" {
		// Values: a repeated header is ambiguous (which one did the proxy
		// set?), so only a single value signs anyone in.
		if vs := r.Header.Values(a.header); len(vs) == 1 {
			if v := strings.TrimSpace(vs[0]); v != "" && validEmail(v) {
				return Who{Email: v, ID: a.ids.of(v)}, true
			}
		}
	}
	if a.devLogin {
		if c, err := r.Cookie(sessionCookie); err == nil {
			if email, ok := a.verifySession(c.Value); ok {
				return Who{Email: email, ID: a.ids.of(email)}, true
			}
		}
	}
	return Who{}, false
}

// validHeaderName says whether s is an HTTP header field name (RFC 9110
// token characters).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func validEmail(s string) bool {
	if len(s) > 254 {
		return false
	}
	addr, err := mail.ParseAddress(s)
	return err == nil && addr.Address == s
}

func (a *auth) sign(parts ...string) string {
	m := hmac.New(sha256.New, a.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// session returns a signed cookie value for email, valid sessionTTL.
func (a *auth) session(email string) string {
	exp := strconv.FormatInt(a.clock.Now().Add(sessionTTL).Unix(), 10)
	e := base64.RawURLEncoding.EncodeToString([]byte(email))
	return e + "." + exp + "." + a.sign("session", e, exp)
}

func (a *auth) verifySession(v string) (string, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return "", false
	}
	if subtle.ConstantTimeCompare([]byte(parts[2]), []byte(a.sign("session", parts[0], parts[1]))) != 1 {
		return "", false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || a.clock.Now().Unix() > exp {
		return "", false
	}
	email, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return "", false
	}
	return string(email), true
}

// csrfToken is the token a page embeds for who's POSTs: bound to the
// moderator and the UTC day, so it cannot be replayed for another user and
// expires within two days.
func (a *auth) csrfToken(who Who, day time.Time) string {
	return a.sign("csrf", who.ID, day.UTC().Format("2006-01-02"))
}

func (a *auth) checkCSRF(r *http.Request, who Who) bool {
	// A cross-site form post carries a foreign Origin: refuse it outright.
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
		return false
	}
	tok := r.Header.Get(csrfHeader)
	if tok == "" {
		tok = r.PostFormValue(csrfField)
	}
	now := a.clock.Now()
	for _, d := range []time.Time{now, now.Add(-24 * time.Hour)} {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(a.csrfToken(who, d))) == 1 {
			return true
		}
	}
	return false
}

func sameOrigin(origin string, r *http.Request) bool {
	host := r.Host
	if fh := r.Header.Get("X-Forwarded-Host"); fh != "" {
		host = fh
	}
	_, rest, ok := strings.Cut(origin, "://")
	return ok && rest == host
}

// require wraps h: unauthenticated requests go to /login (pages) or get
// 401 (the API); POSTs need a valid CSRF token.
func (a *auth) require(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := a.identify(r)
		if !ok {
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/v1/") && a.devLogin {
				http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "sign in through the auth proxy", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !a.checkCSRF(r, who) {
			http.Error(w, "missing or bad CSRF token; reload the page", http.StatusForbidden)
			return
		}
		a.ids.signedIn(r.Context(), who)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, who)))
	})
}
