package pseudonym

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const secretA = "key-a-of-at-least-thirty-two-bytes-long"

func keysOf(t *testing.T, secret string) *Keys {
	t.Helper()
	k, err := New([]byte(secret))
	require.NoError(t, err)
	return k
}

// TestPurposesNeverCollide: the same fields give unrelated values under
// each purpose, and no field list can spell another's (the length
// prefixes), so a quote can never digest to a pseudonym.
func TestPurposesNeverCollide(t *testing.T) {
	t.Parallel()
	k := keysOf(t, secretA)
	seen := map[string]Purpose{}
	for _, p := range Purposes {
		v := k.Sum(p, "seller-8812")
		require.NotContains(t, seen, v, "%s equals %s", p, seen[v])
		seen[v] = p
		require.True(t, IsKeyed(v), v)
		require.True(t, strings.HasPrefix(v, "hmac2:"), v)
	}
	require.NotEqual(t, k.Sum(Campaign, "ab", "c"), k.Sum(Campaign, "a", "bc"), "fields are length-prefixed")
	require.NotEqual(t, k.Sum(Quote, "subject\x00seller-8812"), k.Sum(Subject, "seller-8812"))
	require.NotEqual(t, k.keys[Quote], k.keys[Subject], "a key per purpose")
	require.Equal(t, k.Sum(Subject, "x"), keysOf(t, secretA).Sum(Subject, "x"), "stable")
	require.NotEqual(t, k.Sum(Subject, "x"), keysOf(t, strings.Repeat("b", 32)).Sum(Subject, "x"), "keyed")
}

// TestLegacyFormsAreTheStoredOnes: the legacy forms are what the release
// before per-purpose keys stored, byte for byte: an HMAC under the secret
// itself of the quote, of "subject\x00"+id, of
// "campaign-"+domain+"\x00"+value, and the unkeyed moderator id.
func TestLegacyFormsAreTheStoredOnes(t *testing.T) {
	t.Parallel()
	before := func(secret, in string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(in))
		return hex.EncodeToString(m.Sum(nil)[:12])
	}
	k := keysOf(t, secretA)
	require.Equal(t, "hmac:"+before(secretA, "010-1234-5678"), k.Legacy(Quote, "010-1234-5678"))
	require.Equal(t, "hmac:"+before(secretA, "subject\x00seller-8812"), k.Legacy(Subject, "seller-8812"))
	require.Equal(t, "hmac:"+before(secretA, "campaign-room\x00r-1"), k.Legacy(Campaign, "room", "r-1"))
	require.Equal(t, "hmac-dev:"+before(DevSecret, "subject\x00seller-8812"), Dev().Legacy(Subject, "seller-8812"))
	// The console's moderator id before: sha256 of the trimmed,
	// lower-cased e-mail, 8 bytes in hex (a value pinned from that code).
	sum := sha256.Sum256([]byte("kim@example.com"))
	require.Equal(t, "mod-"+hex.EncodeToString(sum[:8]), LegacyModeratorID(" Kim@Example.com "))
	require.True(t, IsLegacy(k.Legacy(Subject, "x")))
	require.False(t, IsLegacy(k.Sum(Subject, "x")))
}

// TestModeratorIDsAreKeyed: a staff list no longer gives the ids: the id
// depends on the secret, is stable per person however the e-mail is
// spelled, and is never the legacy id.
func TestModeratorIDsAreKeyed(t *testing.T) {
	t.Parallel()
	a, b := keysOf(t, secretA), keysOf(t, strings.Repeat("b", 32))
	id := a.ModeratorID("kim@example.com")
	require.True(t, strings.HasPrefix(id, "mod2-"), id)
	require.Len(t, id, len("mod2-")+24)
	require.Equal(t, id, a.ModeratorID(" KIM@example.com"))
	require.NotEqual(t, id, b.ModeratorID("kim@example.com"))
	require.NotEqual(t, id, LegacyModeratorID("kim@example.com"))
	require.True(t, strings.HasPrefix(Dev().ModeratorID("kim@example.com"), "mod2-dev-"))
}

// TestResolveRefusesAnEmptySecret: no secret is an error unless the
// development switch says so, and then every value is labelled dev; a
// short secret is refused.
func TestResolveRefusesAnEmptySecret(t *testing.T) {
	t.Parallel()
	_, err := Resolve("", false)
	require.ErrorIs(t, err, ErrNoSecret)
	dev, err := Resolve("", true)
	require.NoError(t, err)
	require.True(t, dev.IsDev())
	require.True(t, strings.HasPrefix(dev.Sum(Quote, "q"), "hmac2-dev:"))
	_, err = Resolve("short", false)
	require.Error(t, err)
	k, err := Resolve(secretA, true)
	require.NoError(t, err)
	require.False(t, k.IsDev(), "a secret given is used")
	require.Equal(t, keysOf(t, secretA).Sum(Subject, "x"), k.Sum(Subject, "x"))
}

func TestIsKeyed(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"hmac2:" + strings.Repeat("a", 24): true, "hmac2-dev:" + strings.Repeat("0", 24): true,
		"hmac:" + strings.Repeat("f", 24): true, "hmac-dev:" + strings.Repeat("1", 24): true,
		"hmac3:" + strings.Repeat("a", 24): false, "hmac2:" + strings.Repeat("A", 24): false,
		"hmac2:" + strings.Repeat("a", 23): false, "seller-8812": false, "": false,
	} {
		require.Equal(t, want, IsKeyed(s), s)
	}
}
