package review

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

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
// answer) compactly, in its key order, passing every string value (not
// the keys) through f with the name of the key it belongs to (the
// enclosing key for array elements).
func rewriteStrings(doc []byte, f func(key, s string) string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	w := stringRewriter{f: f}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		w.write(tok)
	}
	if len(w.stack) != 0 {
		return "", io.ErrUnexpectedEOF
	}
	return w.b.String(), nil
}

// stringRewriter is rewriteStrings' state: the document written so far
// and the objects and arrays open at this point.
type stringRewriter struct {
	f     func(key, s string) string
	b     strings.Builder
	stack []jsonFrame
}

// jsonFrame is one open object or array: how many members it has so far,
// whether an object waits for a key, and the key its values belong to
// (for an array, the key of the array itself).
type jsonFrame struct {
	object  bool
	n       int
	wantKey bool
	key     string
}

// write writes one token of the document, string values through f.
func (w *stringRewriter) write(tok json.Token) {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{', '[':
			key, _ := w.before()
			w.stack = append(w.stack, jsonFrame{object: t == '{', wantKey: t == '{', key: key})
		default:
			w.stack = w.stack[:len(w.stack)-1]
		}
		w.b.WriteRune(rune(t))
	case string:
		key, isKey := w.before()
		if isKey {
			w.stack[len(w.stack)-1].key = t
			w.encode(t)
			return
		}
		w.encode(w.f(key, t))
	case json.Number:
		w.before()
		w.b.WriteString(t.String())
	default: // bool, nil
		w.before()
		w.encode(t)
	}
}

// encode writes v as JSON.
func (w *stringRewriter) encode(v any) {
	j, _ := json.Marshal(v)
	w.b.Write(j)
}

// before is called before every value or key is written: it writes the
// separator and reports the key the value belongs to, or that the string
// to come is a key.
func (w *stringRewriter) before() (key string, isKey bool) {
	if len(w.stack) == 0 {
		return "", false
	}
	top := &w.stack[len(w.stack)-1]
	if top.object {
		if top.wantKey {
			if top.n > 0 {
				w.b.WriteByte(',')
			}
			top.n++
			top.wantKey = false
			return "", true
		}
		w.b.WriteByte(':')
		top.wantKey = true
		return top.key, false
	}
	if top.n > 0 {
		w.b.WriteByte(',')
	}
	top.n++
	return top.key, false
}

// SubjectPseudonyms implements pipeline.SubjectPseudonymizer: each id's
// keyed pseudonym under the subject key (pseudonym.Subject), never equal
// to a quote digest or a campaign mark of any text. Rotating the secret
// gives every id a new pseudonym: counts across the rotation do not join
// (docs/privacy.md).
func (r *Reviewer) SubjectPseudonyms(senderIDs []string) []string {
	if len(senderIDs) == 0 {
		return nil
	}
	out := make([]string, 0, len(senderIDs))
	for _, id := range senderIDs {
		out = append(out, r.keys.Sum(pseudonym.Subject, id))
	}
	return out
}

var _ pipeline.SubjectPseudonymizer = (*Reviewer)(nil)

// quoteDigest identifies a quote without its text: analysts can join equal
// quotes across rooms (spam campaigns) without reading them. It is an
// HMAC-SHA256 under the quote key (pseudonym.Quote), so a short quote (a
// phone number) cannot be recovered by hashing every candidate.
func (r *Reviewer) quoteDigest(q string) string {
	return fmt.Sprintf("%s len:%d", r.keys.Sum(pseudonym.Quote, q), utf8.RuneCountInString(q))
}
