// Package bearer authenticates HTTP requests by bearer token. Tokens come
// from files (a Kubernetes Secret mounted as a volume: each key is a file,
// the key is the token's name), and the name of the token that matched is
// the identity an audit trail records. The token itself is never kept in
// the clear after loading, never logged and never compared in variable
// time.
package bearer

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// MinTokenLen is the shortest token accepted: 32 characters, so a token
// cannot be guessed online (openssl rand -hex 32 gives 64).
const MinTokenLen = 32

// maxTokenLen bounds what is read from a token file and hashed per request.
const maxTokenLen = 4096

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

type token struct {
	name string
	sum  [sha256.Size]byte
}

// Set is the configured tokens. It is immutable and safe for concurrent use.
type Set struct {
	tokens []token
}

// LoadDir reads every token file in dir: the file's name is the token's
// name (the audited identity), its content (surrounding white space
// trimmed) the token. Names starting with "." are skipped (the ..data
// links of a mounted Secret). It fails when dir holds no token, a name is
// not [A-Za-z0-9_.-] (at most 64), a token is shorter than MinTokenLen, or
// two names share a token.
func LoadDir(dir string) (*Set, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bearer: tokens dir: %w", err)
	}
	var (
		s    Set
		errs []error
		seen = map[[sha256.Size]byte]string{}
	)
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path) // follows the Secret volume's symlinks
		if err != nil {
			errs = append(errs, fmt.Errorf("token %q: %w", name, err))
			continue
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		tok, err := ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !nameRe.MatchString(name) {
			errs = append(errs, fmt.Errorf("token name %q: use letters, digits, _ . - (at most 64)", name))
			continue
		}
		sum := sha256.Sum256([]byte(tok))
		if other, dup := seen[sum]; dup {
			errs = append(errs, fmt.Errorf("tokens %q and %q are the same: each identity needs its own", other, name))
			continue
		}
		seen[sum] = name
		s.tokens = append(s.tokens, token{name: name, sum: sum})
	}
	if len(s.tokens) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("no token file in %s", dir))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("bearer: %w", err)
	}
	sort.Slice(s.tokens, func(i, j int) bool { return s.tokens[i].name < s.tokens[j].name })
	return &s, nil
}

// ReadFile reads one token from path (white space around it trimmed) and
// checks its length. Clients such as `worker stop` use it, so the token
// never appears on a command line.
func ReadFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("bearer: token file: %w", err)
	}
	defer f.Close()
	b := make([]byte, maxTokenLen+1)
	n, _ := f.Read(b)
	tok := strings.TrimSpace(string(b[:n]))
	if err := Check(tok); err != nil {
		return "", fmt.Errorf("bearer: token file %s: %w", filepath.Base(path), err)
	}
	return tok, nil
}

// Check reports whether tok is acceptable as a token.
func Check(tok string) error {
	switch {
	case len(tok) < MinTokenLen:
		return fmt.Errorf("token shorter than %d characters", MinTokenLen)
	case len(tok) > maxTokenLen:
		return fmt.Errorf("token longer than %d bytes", maxTokenLen)
	case strings.ContainsAny(tok, " \t\r\n"):
		return errors.New("token contains white space")
	}
	return nil
}

// Names returns the configured token names, sorted (for the start-up log).
func (s *Set) Names() []string {
	out := make([]string, len(s.tokens))
	for i, t := range s.tokens {
		out[i] = t.name
	}
	return out
}

// Identify returns the name of the token that the request's
// "Authorization: Bearer <token>" header carries, and false when there is
// none or it matches no token. Every configured token is compared, in
// constant time, whatever matched: the time taken says nothing about
// which token, or how much of one, was right.
func (s *Set) Identify(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) || len(h) > len(prefix)+maxTokenLen {
		return "", false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(h[len(prefix):])))
	found := -1
	for i := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], s.tokens[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return s.tokens[found].name, true
}
