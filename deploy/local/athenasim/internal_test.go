package athenasim

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/stretchr/testify/require"
)

func TestParseLiteral(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		kind    literalKind
		value   any
		wantErr string
	}{
		{in: "'abc'", kind: litString, value: "abc"},
		{in: "''", kind: litString, value: ""},
		{in: "'a''b'", kind: litString, value: "a'b"},
		{in: "  '공일공'  ", kind: litString, value: "공일공"},
		{in: "42", kind: litInteger, value: int64(42)},
		{in: "-7", kind: litInteger, value: int64(-7)},
		{in: "1.25", kind: litDouble, value: 1.25},
		{in: ".5", kind: litDouble, value: 0.5},
		{in: "1E-2", kind: litDouble, value: 0.01},
		{in: "TRUE", kind: litBoolean, value: true},
		{in: "false", kind: litBoolean, value: false},
		{in: "null", kind: litNull},
		{in: "DATE '2026-11-01'", kind: litDate, value: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{in: "timestamp   '2026-11-01 23:59:59.999'", kind: litTimestamp, value: time.Date(2026, 11, 1, 23, 59, 59, 999_000_000, time.UTC)},
		{in: "TIMESTAMP '2026-11-01'", kind: litTimestamp, value: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{in: "", wantErr: "empty value"},
		{in: "abc", wantErr: "not a SQL literal"},
		{in: "'a' || 'b'", wantErr: "text after the closing quote"},
		{in: "'a'b'", wantErr: "text after the closing quote"},
		{in: "1e", wantErr: "not a SQL literal"},
		{in: "1.2.3", wantErr: "not a SQL literal"},
		{in: "0x10", wantErr: "not a SQL literal"},
		{in: "1e999", wantErr: "out of range"},
		{in: "DATE '2026-02-30'", wantErr: "not a YYYY-MM-DD date"},
		{in: "DATE'2026-11-01'", wantErr: "must be followed by a quoted value"},
		{in: "DATE '2026-11-01' + 1", wantErr: "text after the closing quote"},
		{in: "TIMESTAMP '2026-11-01T00:00:00Z'", wantErr: "time zones are not supported"},
		{in: "-", wantErr: "not a SQL literal"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			lit, err := parseLiteral(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.kind, lit.kind)
			require.Equal(t, tc.value, lit.value)
		})
	}
}

func TestScanSQL(t *testing.T) {
	t.Parallel()
	q := `SELECT "a?b", 'it''s ?', ? /* ? */ FROM "Chat_Messages" -- ?
WHERE x = ? ;  `
	sc, err := scanSQL(q)
	require.NoError(t, err)
	require.Len(t, sc.placeholders, 2)
	for _, p := range sc.placeholders {
		require.Equal(t, byte('?'), q[p])
	}
	require.Equal(t, "SELECT", sc.firstWord)
	require.Contains(t, sc.idents, "chat_messages")
	require.Contains(t, sc.idents, "a?b")
	require.False(t, sc.multiple)
	require.Equal(t, strings.LastIndex(q, ";"), sc.end)

	for _, bad := range []string{"SELECT 'x", `SELECT "x`, "SELECT /* x"} {
		_, err := scanSQL(bad)
		require.Error(t, err, bad)
	}
	sc, err = scanSQL("SELECT 1; SELECT 2")
	require.NoError(t, err)
	require.True(t, sc.multiple)
	sc, err = scanSQL("SELECT 1; -- done\n")
	require.NoError(t, err)
	require.False(t, sc.multiple)
}

func TestBindQueryNeverSplicesValues(t *testing.T) {
	t.Parallel()
	q := "SELECT * FROM t WHERE a = ? AND b < ? AND c = ?"
	sc, err := scanSQL(q)
	require.NoError(t, err)
	out, args, err := bindQuery(q, sc, []string{"'x'' OR 1=1 --'", "TIMESTAMP '2026-11-01 00:00:00'", "NULL"})
	require.NoError(t, err)
	require.Equal(t, "SELECT * FROM t WHERE a = CAST(? AS VARCHAR) AND b < CAST(? AS TIMESTAMP) AND c = NULL", out)
	require.Equal(t, []any{"x' OR 1=1 --", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}, args)
}

func TestFormatting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v    any
		duck string
		want string
	}{
		{1.5, "DOUBLE", "1.5"},
		{2.0, "DOUBLE", "2.0"},
		{0.0, "DOUBLE", "0.0"},
		{1e10, "DOUBLE", "1.0E10"},
		{1.25e-5, "DOUBLE", "1.25E-5"},
		{duckdb.Decimal{Scale: 2, Value: big.NewInt(-5)}, "DECIMAL(10,2)", "-0.05"},
		{duckdb.Decimal{Scale: 3, Value: big.NewInt(123456)}, "DECIMAL(10,3)", "123.456"},
		{time.Date(2026, 11, 1, 2, 3, 4, 5_000_000, time.UTC), "TIMESTAMP", "2026-11-01 02:03:04.005"},
		{time.Date(2026, 11, 1, 11, 3, 4, 0, time.FixedZone("KST", 9*3600)), "TIMESTAMP WITH TIME ZONE", "2026-11-01 02:03:04.000"},
		{time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), "DATE", "2026-11-01"},
		{[]byte{0xca, 0xfe}, "BLOB", "ca fe"},
		{[]any{int64(1), nil, "a"}, "BIGINT[]", "[1, null, a]"},
		{true, "BOOLEAN", "true"},
	}
	for _, tc := range tests {
		got, ok := formatValue(tc.v, tc.duck)
		require.True(t, ok)
		require.Equal(t, tc.want, got, "%#v", tc.v)
	}
	_, ok := formatValue(nil, "VARCHAR")
	require.False(t, ok)
}

func FuzzParseLiteral(f *testing.F) {
	for _, s := range []string{"'a''b'", "42", "-1.5e3", "DATE '2026-11-01'", "TIMESTAMP '2026-11-01 00:00:00.123'", "NULL", "x", "'a' OR 1=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lit, err := parseLiteral(s)
		if err != nil {
			return
		}
		if lit.kind == litString {
			// A string literal re-quoted parses back to the same value.
			v := lit.value.(string)
			back, err := parseLiteral("'" + strings.ReplaceAll(v, "'", "''") + "'")
			if err != nil || back.value != v {
				t.Fatalf("round trip of %q: %v %v", v, back.value, err)
			}
		}
	})
}

func FuzzScanSQL(f *testing.F) {
	f.Add("SELECT ? FROM t WHERE a = '?' -- ?\n AND b = ?")
	f.Add(`SELECT "x""y" /* c */ ; SELECT 2`)
	f.Fuzz(func(t *testing.T, q string) {
		sc, err := scanSQL(q)
		if err != nil {
			return
		}
		for _, p := range sc.placeholders {
			if q[p] != '?' {
				t.Fatalf("placeholder at %d is %q", p, q[p])
			}
		}
		if sc.end > len(q) {
			t.Fatalf("end %d beyond %d", sc.end, len(q))
		}
	})
}
