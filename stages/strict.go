package stages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// errKeys is the cause of an answer whose object keys are ambiguous: a key
// given twice, or a name that differs from the schema's only by case.
var errKeys = errors.New("ambiguous object keys")

// keyProblem is a key that makes an answer ambiguous or unknown; its text
// is ours (the key itself only through shown).
type keyProblem struct{ text string }

func (e *keyProblem) Error() string { return e.text }
func (e *keyProblem) Unwrap() error { return errKeys }

// checkKeys reads the one JSON value in b and checks every object in it
// against the Go type it will be decoded into: no key may appear twice, and
// every key of a struct must be one of its JSON field names exactly.
//
// encoding/json alone reads the same bytes differently from any other
// reader: the last of two equal keys wins and names match case-
// insensitively, so a redactor that walked the raw answer would mask
// "quote" and miss "QUOTE", or keep the first of two "message_id" values
// while validation checked the second. Rejecting such answers leaves one
// reading, the decoded value, for validation and redaction alike.
//
// It returns the top-level keys (for the required-field check). A syntax
// error is returned as the decoder reports it; a key problem as
// *keyProblem; trailing data after the value is an error too.
func checkKeys(b []byte, t reflect.Type) (map[string]bool, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("the answer is not an object")
	}
	top, err := walkObject(dec, t)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("trailing data after the object")
		}
		return nil, err
	}
	return top, nil
}

// walkValue checks the value whose first token is next in dec; t is the
// type it decodes into (nil where unknown: keys are then only checked for
// duplicates, and the decoder reports any type mismatch later).
func walkValue(dec *json.Decoder, t reflect.Type) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	t = deref(t)
	if d == '{' {
		_, err := walkObject(dec, t)
		return err
	}
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	for dec.More() {
		if err := walkValue(dec, elem); err != nil {
			return err
		}
	}
	_, err = dec.Token() // ']'
	return err
}

// walkObject checks an object whose '{' was read, up to its '}'.
func walkObject(dec *json.Decoder, t reflect.Type) (map[string]bool, error) {
	t = deref(t)
	var fields map[string]reflect.Type
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = jsonFields(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, &keyProblem{"field " + shown(key) + " appears more than once"}
		}
		seen[key] = true
		vt := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				return nil, unknownKey(key, fields)
			}
			vt = ft
		}
		if err := walkValue(dec, vt); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	return seen, nil
}

// unknownKey describes a key that is not a field name: a near miss by case
// names the field (ours) it resembles.
func unknownKey(key string, fields map[string]reflect.Type) error {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return &keyProblem{fmt.Sprintf("field %s differs from %q only by case; names are case-sensitive", shown(key), name)}
		}
	}
	return &keyProblem{"unknown field " + shown(key)}
}

// jsonFields maps the JSON names of a struct's exported fields to their
// types, as encoding/json names them (tag name, else the field name).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
