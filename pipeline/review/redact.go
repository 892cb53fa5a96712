package review

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/chatguard/chatguard/pipeline"
)

// DevDigestKey is the quote-digest key of the local stack and tests only.
// Digests made with it are labelled "hmac-dev:" so that a row digested
// with it is recognisable; production sets Config.DigestKey from a Secret.
const DevDigestKey = "chatguard-dev-only-digest-key-not-for-production"

// redactOutput turns a stage answer, as the stage's parser decoded it,
// into what may leave the process (inference logs, stored stage results).
// It works on the decoded value, never on the model's bytes: the parser
// refused repeated and case-variant keys, so the value validated is the
// value redacted, and it is re-encoded with the schema's own field names.
// String values only are rewritten: extract's quotes are chat text, so each
// becomes a keyed digest and a length; every other free text (reasons,
// rationales, descriptions) goes through mask. Numbers (a confidence with
// many decimals), booleans and id fields are copied as they are: ids were
// validated against the chat.
func (r *Reviewer) redactOutput(stage pipeline.StageName, v any, mask func(string) string) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Our own output types always encode; if one did not, nothing
		// leaves rather than something unmasked.
		return ""
	}
	out, err := rewriteStrings(b, func(key, s string) string {
		switch {
		case stage == pipeline.StageExtract && key == "quote":
			return r.quoteDigest(s)
		case isIDKey(key):
			return s
		}
		return mask(s)
	})
	if err != nil {
		return ""
	}
	return out
}

// isIDKey reports whether a JSON key names an identifier (message_id,
// evidence_ids): ids are ours, not chat text, and must stay joinable.
func isIDKey(key string) bool {
	return key == "id" || strings.HasSuffix(key, "_id") || strings.HasSuffix(key, "_ids")
}

// rewriteStrings re-encodes a JSON document (our own encoding of a decoded
// answer) compactly, in its key order, passing every string value (not the keys) through f with the
// name of the key it belongs to (the enclosing key for array elements).
func rewriteStrings(doc []byte, f func(key, s string) string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var b strings.Builder
	type frame struct {
		object  bool
		n       int
		wantKey bool
		key     string
	}
	var stack []frame
	enc := func(v any) {
		j, _ := json.Marshal(v)
		b.Write(j)
	}
	// value is called before every value or key is written: it writes
	// the separator and reports the key the value belongs to.
	before := func() (key string, isKey bool) {
		if len(stack) == 0 {
			return "", false
		}
		top := &stack[len(stack)-1]
		if top.object {
			if top.wantKey {
				if top.n > 0 {
					b.WriteByte(',')
				}
				top.n++
				top.wantKey = false
				return "", true
			}
			b.WriteByte(':')
			top.wantKey = true
			return top.key, false
		}
		if top.n > 0 {
			b.WriteByte(',')
		}
		top.n++
		return top.key, false
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				key, _ := before()
				stack = append(stack, frame{object: t == '{', wantKey: t == '{', key: key})
				b.WriteRune(rune(t))
			default:
				stack = stack[:len(stack)-1]
				b.WriteRune(rune(t))
			}
		case string:
			key, isKey := before()
			if isKey {
				stack[len(stack)-1].key = t
				enc(t)
				continue
			}
			enc(f(key, t))
		case json.Number:
			before()
			b.WriteString(t.String())
		default: // bool, nil
			before()
			enc(t)
		}
	}
	if len(stack) != 0 {
		return "", io.ErrUnexpectedEOF
	}
	return b.String(), nil
}

// quoteDigest identifies a quote without its text: analysts can join equal
// quotes across rooms (spam campaigns) without reading them. It is an
// HMAC-SHA256 under a secret key, so a short quote (a phone number) cannot
// be recovered by hashing every candidate.
func (r *Reviewer) quoteDigest(q string) string {
	m := hmac.New(sha256.New, r.digestKey)
	m.Write([]byte(q))
	label := "hmac"
	if r.devKey {
		label = "hmac-dev"
	}
	return fmt.Sprintf("%s:%s len:%d", label, hex.EncodeToString(m.Sum(nil)[:12]), utf8.RuneCountInString(q))
}
