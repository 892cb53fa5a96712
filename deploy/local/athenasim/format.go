package athenasim

import (
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2"
)

// columnInfo is one entry of ResultSetMetadata.ColumnInfo on the wire.
type columnInfo struct {
	CatalogName   string `json:"CatalogName"`
	SchemaName    string `json:"SchemaName"`
	TableName     string `json:"TableName"`
	Name          string `json:"Name"`
	Label         string `json:"Label"`
	Type          string `json:"Type"`
	Precision     int32  `json:"Precision"`
	Scale         int32  `json:"Scale"`
	Nullable      string `json:"Nullable"`
	CaseSensitive bool   `json:"CaseSensitive"`
	// duck is DuckDB's type name, used to format values.
	duck string
}

// athenaType maps a DuckDB column type to the type name, precision and
// scale Athena (Trino) reports for it. Timestamps of either kind are
// Athena's timestamp(3): the lake's Parquet timestamps are UTC instants and
// Athena reads them as plain timestamps.
func athenaType(ct *sql.ColumnType) columnInfo {
	duck := strings.ToUpper(ct.DatabaseTypeName())
	ci := columnInfo{CatalogName: "hive", Name: ct.Name(), Label: ct.Name(), Nullable: "UNKNOWN", duck: duck}
	base, _, _ := strings.Cut(duck, "(")
	switch {
	case base == "VARCHAR" || base == "UUID" || base == "ENUM":
		ci.Type, ci.Precision, ci.CaseSensitive = "varchar", math.MaxInt32, true
	case base == "BOOLEAN":
		ci.Type = "boolean"
	case base == "TINYINT" || base == "UTINYINT":
		ci.Type, ci.Precision = "tinyint", 3
	case base == "SMALLINT" || base == "USMALLINT":
		ci.Type, ci.Precision = "smallint", 5
	case base == "INTEGER" || base == "UINTEGER":
		ci.Type, ci.Precision = "integer", 10
	case base == "BIGINT" || base == "UBIGINT":
		ci.Type, ci.Precision = "bigint", 19
	case base == "HUGEINT" || base == "UHUGEINT":
		ci.Type, ci.Precision = "decimal", 38
	case base == "FLOAT":
		ci.Type, ci.Precision = "float", 17
	case base == "DOUBLE":
		ci.Type, ci.Precision = "double", 17
	case base == "DECIMAL":
		ci.Type = "decimal"
		if p, s, ok := ct.DecimalSize(); ok {
			ci.Precision, ci.Scale = int32(p), int32(s)
		}
	case base == "DATE":
		ci.Type = "date"
	case strings.HasPrefix(base, "TIMESTAMP"):
		ci.Type, ci.Precision = "timestamp", 3
	case base == "TIME":
		ci.Type, ci.Precision = "time", 3
	case base == "BLOB":
		ci.Type, ci.Precision = "varbinary", math.MaxInt32
	case base == "INTERVAL":
		ci.Type = "interval day to second"
	case base == "JSON":
		ci.Type, ci.Precision = "json", math.MaxInt32
	case strings.HasSuffix(duck, "[]") || base == "LIST" || base == "ARRAY":
		ci.Type = "array"
	case base == "MAP":
		ci.Type = "map"
	case base == "STRUCT":
		ci.Type = "row"
	default:
		ci.Type = strings.ToLower(duck)
	}
	return ci
}

// formatValue renders one value as Athena's VarCharValue; ok is false for
// NULL, which Athena sends as a Datum without VarCharValue.
func formatValue(v any, duck string) (string, bool) {
	if v == nil {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint:
		return fmt.Sprint(x), true
	case float32:
		return formatFloat(float64(x), 32), true
	case float64:
		return formatFloat(x, 64), true
	case *big.Int:
		return x.String(), true
	case duckdb.Decimal:
		return formatDecimal(x), true
	case time.Time:
		x = x.UTC()
		switch {
		case duck == "DATE":
			return x.Format(time.DateOnly), true
		case strings.HasPrefix(duck, "TIME") && !strings.HasPrefix(duck, "TIMESTAMP"):
			return x.Format("15:04:05.000"), true
		default:
			return x.Format("2006-01-02 15:04:05.000"), true
		}
	case []byte:
		return spacedHex(x), true
	case duckdb.UUID:
		return x.String(), true
	case duckdb.Interval:
		return fmt.Sprintf("%d months %d days %d micros", x.Months, x.Days, x.Micros), true
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = nested(e)
		}
		return "[" + strings.Join(parts, ", ") + "]", true
	case duckdb.Map:
		parts := make([]string, 0, len(x))
		for k, e := range x {
			parts = append(parts, nested(k)+"="+nested(e))
		}
		slices.Sort(parts)
		return "{" + strings.Join(parts, ", ") + "}", true
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + nested(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}", true
	default:
		return fmt.Sprint(x), true
	}
}

func nested(v any) string {
	s, ok := formatValue(v, "")
	if !ok {
		return "null"
	}
	return s
}

// formatFloat follows Java's Double.toString, as Trino does: plain digits
// with at least one decimal between 1e-3 and 1e7, scientific otherwise.
func formatFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	abs := math.Abs(f)
	if f == 0 || (abs >= 1e-3 && abs < 1e7) {
		s := strconv.FormatFloat(f, 'f', -1, bits)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'E', -1, bits)
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	n, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(n)
}

func formatDecimal(d duckdb.Decimal) string {
	if d.Value == nil {
		return "0"
	}
	s := new(big.Int).Abs(d.Value).String()
	sign := ""
	if d.Value.Sign() < 0 {
		sign = "-"
	}
	scale := int(d.Scale)
	if scale == 0 {
		return sign + s
	}
	if len(s) <= scale {
		s = strings.Repeat("0", scale-len(s)+1) + s
	}
	return sign + s[:len(s)-scale] + "." + s[len(s)-scale:]
}

func spacedHex(b []byte) string {
	h := hex.EncodeToString(b)
	var out strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			out.WriteByte(' ')
		}
		out.WriteString(h[i : i+2])
	}
	return out.String()
}
