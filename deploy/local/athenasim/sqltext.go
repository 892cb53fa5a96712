package athenasim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// scanned is what the stand-in needs to know about a query's text without
// parsing SQL: where the positional parameters are, which identifiers it
// names, and whether it holds more than one statement.
type scanned struct {
	placeholders []int    // byte offsets of each '?' outside strings and comments
	idents       []string // identifiers, lower-cased, quoted ones unquoted
	firstWord    string   // first keyword, upper-cased
	multiple     bool     // a second statement follows a ';'
	end          int      // length of the statement without a trailing ';'
}

// scanSQL tokenizes just enough SQL to find placeholders and identifiers:
// single-quoted strings (a doubled quote escapes one), double-quoted identifiers, line
// and block comments. An unterminated string or comment is an error.
func scanSQL(q string) (scanned, error) {
	var s scanned
	s.end = len(q)
	semicolon := -1
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '\'':
			j, err := skipQuoted(q, i, '\'')
			if err != nil {
				return s, errors.New("unterminated string literal")
			}
			if semicolon >= 0 {
				s.multiple = true
			}
			i = j
		case c == '"':
			j, err := skipQuoted(q, i, '"')
			if err != nil {
				return s, errors.New("unterminated quoted identifier")
			}
			if semicolon >= 0 {
				s.multiple = true
			}
			s.idents = append(s.idents, strings.ToLower(strings.ReplaceAll(q[i+1:j-1], `""`, `"`)))
			i = j
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				i = len(q)
			} else {
				i += j + 1
			}
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			j := strings.Index(q[i+2:], "*/")
			if j < 0 {
				return s, errors.New("unterminated comment")
			}
			i += j + 4
		case c == '?':
			if semicolon >= 0 {
				s.multiple = true
			}
			s.placeholders = append(s.placeholders, i)
			i++
		case c == ';':
			if semicolon < 0 {
				semicolon = i
				s.end = i
			}
			i++
		case c == '_' || c < 0x80 && unicode.IsLetter(rune(c)):
			j := i + 1
			for j < len(q) && (q[j] == '_' || q[j] < 0x80 && (unicode.IsLetter(rune(q[j])) || unicode.IsDigit(rune(q[j])))) {
				j++
			}
			if semicolon >= 0 {
				s.multiple = true
			}
			w := q[i:j]
			if s.firstWord == "" {
				s.firstWord = strings.ToUpper(w)
			}
			s.idents = append(s.idents, strings.ToLower(w))
			i = j
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		default:
			if semicolon >= 0 {
				s.multiple = true
			}
			i++
		}
	}
	return s, nil
}

// skipQuoted returns the index just past the quoted token starting at i,
// treating a doubled quote as an escaped one.
func skipQuoted(q string, i int, quote byte) (int, error) {
	for j := i + 1; j < len(q); j++ {
		if q[j] != quote {
			continue
		}
		if j+1 < len(q) && q[j+1] == quote {
			j++
			continue
		}
		return j + 1, nil
	}
	return 0, errors.New("unterminated")
}

// literalKind is the SQL type of an execution parameter.
type literalKind int

const (
	litNull literalKind = iota
	litString
	litInteger
	litDouble
	litBoolean
	litDate
	litTimestamp
)

// literal is one parsed execution parameter, ready to bind.
type literal struct {
	kind  literalKind
	value any // nil, string, int64, float64, bool or time.Time (UTC)
}

// cast wraps the placeholder so that DuckDB types the parameter as the
// literal did in Athena, whatever the surrounding expression would infer.
func (l literal) cast() string {
	switch l.kind {
	case litString:
		return "CAST(? AS VARCHAR)"
	case litInteger:
		return "CAST(? AS BIGINT)"
	case litDouble:
		return "CAST(? AS DOUBLE)"
	case litBoolean:
		return "CAST(? AS BOOLEAN)"
	case litDate:
		return "CAST(? AS DATE)"
	case litTimestamp:
		return "CAST(? AS TIMESTAMP)"
	default:
		// NULL has no value to bind; the keyword is our text, not the caller's.
		return "NULL"
	}
}

var timestampLayouts = []string{
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04",
	"2006-01-02",
}

// parseLiteral parses one Athena execution parameter: a SQL literal written
// as a string ('text', a doubled quote for a quote, 42, -1.5, 1e3, true, false,
// NULL, DATE 'YYYY-MM-DD', TIMESTAMP 'YYYY-MM-DD HH:MM:SS[.fff]'). Anything
// else, including a literal followed by more SQL, is an error: parameters
// are values, never SQL text.
func parseLiteral(p string) (literal, error) {
	s := strings.TrimSpace(p)
	if s == "" {
		return literal{}, errors.New("empty value")
	}
	upper := strings.ToUpper(s)
	switch {
	case s[0] == '\'':
		v, err := unquote(s)
		if err != nil {
			return literal{}, err
		}
		return literal{kind: litString, value: v}, nil
	case upper == "NULL":
		return literal{kind: litNull}, nil
	case upper == "TRUE" || upper == "FALSE":
		return literal{kind: litBoolean, value: upper == "TRUE"}, nil
	case strings.HasPrefix(upper, "DATE"):
		v, err := typedString(s, "DATE")
		if err != nil {
			return literal{}, err
		}
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return literal{}, fmt.Errorf("DATE %s is not a YYYY-MM-DD date", strconv.Quote(v))
		}
		return literal{kind: litDate, value: t}, nil
	case strings.HasPrefix(upper, "TIMESTAMP"):
		v, err := typedString(s, "TIMESTAMP")
		if err != nil {
			return literal{}, err
		}
		for _, layout := range timestampLayouts {
			if t, err := time.Parse(layout, v); err == nil {
				return literal{kind: litTimestamp, value: t}, nil
			}
		}
		return literal{}, fmt.Errorf("TIMESTAMP %s is not a 'YYYY-MM-DD HH:MM:SS[.fff]' timestamp (time zones are not supported)", strconv.Quote(v))
	case isInteger(s):
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return literal{}, fmt.Errorf("integer %s is out of range", s)
		}
		return literal{kind: litInteger, value: n}, nil
	case isNumber(s):
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return literal{}, fmt.Errorf("number %s is out of range", s)
		}
		return literal{kind: litDouble, value: f}, nil
	}
	return literal{}, errors.New("not a SQL literal (want 'string', a number, true, false, NULL, DATE '...' or TIMESTAMP '...')")
}

// typedString parses KEYWORD 'value' where the keyword is followed by
// whitespace and exactly one string literal.
func typedString(s, keyword string) (string, error) {
	rest := s[len(keyword):]
	trimmed := strings.TrimLeft(rest, " \t\r\n")
	if len(trimmed) == len(rest) || trimmed == "" || trimmed[0] != '\'' {
		return "", fmt.Errorf("%s must be followed by a quoted value", keyword)
	}
	v, err := unquote(trimmed)
	if err != nil {
		return "", fmt.Errorf("%s value: %w", keyword, err)
	}
	return v, nil
}

// unquote parses a whole single-quoted SQL string; text after the closing
// quote is an error.
func unquote(s string) (string, error) {
	if len(s) < 2 || s[0] != '\'' {
		return "", errors.New("not a quoted string")
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '\'' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '\'' {
			b.WriteByte('\'')
			i++
			continue
		}
		if i != len(s)-1 {
			return "", errors.New("text after the closing quote")
		}
		return b.String(), nil
	}
	return "", errors.New("unterminated string")
}

func isInteger(s string) bool {
	if s[0] == '-' || s[0] == '+' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isNumber accepts decimal and exponent forms: 1.5, -.5, 2., 1e3, 1.2E-4.
func isNumber(s string) bool {
	if s[0] == '-' || s[0] == '+' {
		s = s[1:]
	}
	digits, i := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		exp := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, exp = i+1, exp+1
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

// bindQuery checks the parameters against the placeholders and returns the
// SQL with each placeholder wrapped in its literal's cast, plus the values to
// bind. Values are never spliced into the SQL text.
func bindQuery(q string, sc scanned, params []string) (string, []any, error) {
	if len(params) != len(sc.placeholders) {
		return "", nil, fmt.Errorf("the query has %d parameter placeholders but %d execution parameters were given", len(sc.placeholders), len(params))
	}
	var b strings.Builder
	args := make([]any, 0, len(params))
	prev := 0
	for i, p := range params {
		lit, err := parseLiteral(p)
		if err != nil {
			return "", nil, fmt.Errorf("execution parameter %d: %w", i+1, err)
		}
		pos := sc.placeholders[i]
		b.WriteString(q[prev:pos])
		b.WriteString(lit.cast())
		prev = pos + 1
		if lit.kind != litNull {
			args = append(args, lit.value)
		}
	}
	b.WriteString(q[prev:sc.end])
	return b.String(), args, nil
}
