// Package pseudonym derives every keyed pseudonym chatguard stores from one
// secret: evidence-quote digests, verdict subjects, campaign marks (and the
// rooms and senders counted with them) and moderator ids. Each purpose has
// its own key, derived from the secret with HKDF-SHA256 under a distinct
// info string, and each HMAC input is the purpose's name followed by
// length-prefixed fields, so no value of one purpose can equal a value of
// another (a quoted text can never digest to an account's pseudonym) and a
// derived key that leaks exposes one purpose only.
//
// Values are labelled by form: "hmac2:" (or "hmac2-dev:" under the public
// development secret) and 24 lower-case hex digits (96 bits). The forms
// made before per-purpose keys ("hmac:"/"hmac-dev:", and the unkeyed
// "mod-" moderator ids) are the Legacy ones; they are computed only so
// that values already stored keep matching during the transition
// (docs/privacy.md, "Pseudonym keys").
package pseudonym

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Purpose names what a pseudonym is of; each has its own derived key.
type Purpose string

// The purposes.
const (
	// Quote is an evidence quote's digest (stage outputs, the lake).
	Quote Purpose = "quote-digest"
	// Subject is a verdict subject's pseudonym (the lake's subjects).
	Subject Purpose = "subject"
	// Campaign is a campaign mark, and the room and sender pseudonyms the
	// campaign counter counts (Redis, MySQL, the lake).
	Campaign Purpose = "campaign-mark"
	// Moderator is a moderator's id (MySQL, the lake, logs).
	Moderator Purpose = "moderator-id"
)

// Purposes lists every purpose, in a fixed order.
var Purposes = []Purpose{Quote, Subject, Campaign, Moderator}

// Labels of the current and the legacy forms.
const (
	Label          = "hmac2"
	DevLabel       = "hmac2-dev"
	LegacyLabel    = "hmac"
	LegacyDevLabel = "hmac-dev"
	// ModeratorPrefix starts a current moderator id; LegacyModeratorPrefix
	// the unkeyed ids made before.
	ModeratorPrefix       = "mod2-"
	DevModeratorPrefix    = "mod2-dev-"
	LegacyModeratorPrefix = "mod-"
)

// MinSecret is the shortest secret New accepts.
const MinSecret = 32

// DevSecret is the public secret of the local stack, tests and offline
// evaluation; every value made under it is labelled "-dev" so that a row
// made with it is recognisable. Production binaries refuse to start
// without a secret unless --dev-insecure-keys says this is a development
// stack.
const DevSecret = "chatguard-dev-only-digest-key-not-for-production"

// info is the HKDF info string of a purpose's key: a version, so that a
// future derivation can never return the same key.
func info(p Purpose) string { return "chatguard pseudonym v2 " + string(p) }

// Keys are the per-purpose keys derived from one secret. A *Keys is
// immutable and safe for concurrent use.
type Keys struct {
	dev    bool
	secret []byte
	keys   map[Purpose][]byte
}

// New derives the keys of secret, which must be at least MinSecret bytes
// (from a Secret, never from code).
func New(secret []byte) (*Keys, error) {
	if len(secret) < MinSecret {
		return nil, fmt.Errorf("pseudonym: a secret of %d bytes is below %d", len(secret), MinSecret)
	}
	return derive(secret, false)
}

// Dev returns the keys of DevSecret, labelled "-dev".
func Dev() *Keys { return devKeys() }

var devKeys = sync.OnceValue(func() *Keys {
	k, err := derive([]byte(DevSecret), true)
	if err != nil {
		panic(err) // HKDF-SHA256 fails only for over-long outputs
	}
	return k
})

// OrDev is k, or Dev() when k is nil: what a library's zero configuration
// uses (tests, offline evaluation); the binaries never pass nil.
func OrDev(k *Keys) *Keys {
	if k == nil {
		return Dev()
	}
	return k
}

func derive(secret []byte, dev bool) (*Keys, error) {
	k := &Keys{dev: dev, secret: append([]byte(nil), secret...), keys: make(map[Purpose][]byte, len(Purposes))}
	for _, p := range Purposes {
		dk, err := hkdf.Key(sha256.New, k.secret, nil, info(p), 32)
		if err != nil {
			return nil, fmt.Errorf("pseudonym: derive %s: %w", p, err)
		}
		k.keys[p] = dk
	}
	return k, nil
}

// IsDev reports whether these are the public development keys.
func (k *Keys) IsDev() bool { return k.dev }

// Sum is the current form of fields under purpose p: "hmac2:<24 hex>"
// ("hmac2-dev:" under the dev keys). The HMAC input is p's name and each
// field, every one prefixed by its length, so that no two different field
// lists (or purposes) give the same input.
func (k *Keys) Sum(p Purpose, fields ...string) string {
	key, ok := k.keys[p]
	if !ok {
		panic("pseudonym: unknown purpose " + string(p))
	}
	m := hmac.New(sha256.New, key)
	writeField(m, string(p))
	for _, f := range fields {
		writeField(m, f)
	}
	label := Label
	if k.dev {
		label = DevLabel
	}
	return label + ":" + hex.EncodeToString(m.Sum(nil)[:12])
}

// writeField writes f with a 4-byte big-endian length before it.
func writeField(w interface{ Write([]byte) (int, error) }, f string) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(f)))
	_, _ = w.Write(n[:])
	_, _ = w.Write([]byte(f))
}

// Legacy is the form that purpose p's value had before per-purpose keys:
// an HMAC-SHA256 under the secret itself, "hmac:<24 hex>" ("hmac-dev:"
// under the dev secret). Quote takes one field (the quote), Subject one
// (the sender id), Campaign two (the domain, the value); Moderator has no
// keyed legacy form (LegacyModeratorID).
func (k *Keys) Legacy(p Purpose, fields ...string) string {
	var in string
	switch {
	case p == Quote && len(fields) == 1:
		in = fields[0]
	case p == Subject && len(fields) == 1:
		in = "subject\x00" + fields[0]
	case p == Campaign && len(fields) == 2:
		in = "campaign-" + fields[0] + "\x00" + fields[1]
	default:
		panic(fmt.Sprintf("pseudonym: no legacy form of %s with %d fields", p, len(fields)))
	}
	m := hmac.New(sha256.New, k.secret)
	m.Write([]byte(in))
	label := LegacyLabel
	if k.dev {
		label = LegacyDevLabel
	}
	return label + ":" + hex.EncodeToString(m.Sum(nil)[:12])
}

// ModeratorID is a moderator's id from their sign-in e-mail (trimmed,
// lower-cased): "mod2-<24 hex>" under the moderator key ("mod2-dev-" under
// the dev keys). Without the secret a staff list cannot be turned into
// ids.
func (k *Keys) ModeratorID(email string) string {
	s := k.Sum(Moderator, normEmail(email))
	_, hexPart, _ := strings.Cut(s, ":")
	if k.dev {
		return DevModeratorPrefix + hexPart
	}
	return ModeratorPrefix + hexPart
}

// LegacyModeratorID is the unkeyed id moderators had before: "mod-" and
// the first 8 bytes of SHA-256 of the e-mail in hex. Anyone holding a staff
// list can compute it, which is why it is replaced.
func LegacyModeratorID(email string) string {
	sum := sha256.Sum256([]byte(normEmail(email)))
	return LegacyModeratorPrefix + hex.EncodeToString(sum[:8])
}

func normEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// IsKeyed reports the shape of a keyed pseudonym of either form: "hmac2:",
// "hmac2-dev:", "hmac:" or "hmac-dev:" and 24 lower-case hex digits.
func IsKeyed(s string) bool {
	label, rest, ok := strings.Cut(s, ":")
	if !ok || len(rest) != 24 {
		return false
	}
	switch label {
	case Label, DevLabel, LegacyLabel, LegacyDevLabel:
	default:
		return false
	}
	for _, c := range rest {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// IsLegacy reports whether s is a keyed pseudonym of the legacy form.
func IsLegacy(s string) bool {
	return IsKeyed(s) && (strings.HasPrefix(s, LegacyLabel+":") || strings.HasPrefix(s, LegacyDevLabel+":"))
}

// ErrNoSecret is Resolve's refusal of an empty secret without the
// development switch.
var ErrNoSecret = errors.New("pseudonym: no secret: set one from a Secret, or say this is a development stack")

// Resolve is a binary's keys: New(secret), or the dev keys when secret is
// empty and dev (the binary's --dev-insecure-keys) says this is a
// development stack; an empty secret without dev is ErrNoSecret. A secret,
// when given, is used whatever dev says.
func Resolve(secret string, dev bool) (*Keys, error) {
	switch {
	case secret == "" && dev:
		return Dev(), nil
	case secret == "":
		return nil, ErrNoSecret
	}
	return New([]byte(secret))
}
