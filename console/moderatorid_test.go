package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

// moderatorID is the id the console gives email under the dev keys,
// which every test's App uses.
func moderatorID(email string) string { return pseudonym.Dev().ModeratorID(email) }

// TestModeratorIDsAreKeyedAndRekeyedOnSignIn: a moderator's id is keyed
// (never the unkeyed hash a staff list reverses); the first request a
// process sees from them moves their legacy id's rows to it, once, before
// the handler acts; a failed move is tried again on the next request.
func TestModeratorIDsAreKeyedAndRekeyedOnSignIn(t *testing.T) {
	t.Parallel()
	keys, err := pseudonym.New([]byte("key-a-of-at-least-thirty-two-bytes-long"))
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		calls [][2]string
		fail  = true
	)
	rekey := func(_ context.Context, legacy, current string, _ time.Time) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, [2]string{legacy, current})
		if fail {
			fail = false
			return 0, context.DeadlineExceeded
		}
		return 3, nil
	}
	cfg := DefaultConfig()
	cfg.TrustedProxies = "127.0.0.1/32"
	a := newAuth(cfg, []byte("0123456789abcdef0123456789abcdef"), nil, &moderatorIDs{keys: keys, rekey: rekey})
	var seen []string
	h := a.require(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		who, _ := whoFrom(r.Context())
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, calls, "re-keyed before the handler acts")
		seen = append(seen, who.ID)
	}))
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), proxyRequest(map[string][]string{"X-Forwarded-Email": {"Kim@Example.com"}}))
	}
	want := keys.ModeratorID("kim@example.com")
	require.True(t, strings.HasPrefix(want, "mod2-"))
	require.NotEqual(t, pseudonym.LegacyModeratorID("kim@example.com"), want)
	require.Equal(t, []string{want, want, want}, seen)
	legacy := pseudonym.LegacyModeratorID("kim@example.com")
	require.Equal(t, [][2]string{{legacy, want}, {legacy, want}}, calls, "a failed move is tried again, a done one never")
}
