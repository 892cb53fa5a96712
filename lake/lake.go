// Package lake holds the lake's schema as Athena reads what cmd/consumer
// writes: the table DDL with partition projection (tables/), a view per
// table that returns each event once (views/), and the analysts' queries
// (queries/). It is part of the product, beside migrations/ (MySQL's
// schema), because production code reads it: cmd/worker runs the queries
// for its labelled and shadow sets. The SQL lives in .sql files, embedded
// here so that tests run it and tools can apply it; deploy/athena/README.md
// says how to apply it by hand. Queries run through storage/athena
// (Source.Rows), the one Athena query path.
package lake

import (
	"embed"
	"fmt"
	"path"
	"regexp"
	"strings"
)

//go:embed tables/*.sql views/*.sql queries/*.sql
var files embed.FS

// Tables lists the lake tables, one per event type.
var Tables = []string{"inference_log", "moderator_feedback", "verdict", "shadow_verdict", "protective_action"}

// Queries lists the analysts' queries by name (the file name without .sql).
var Queries = []string{"verdicts_by_label_category_day", "fallback_rate_latency_hour", "moderator_agreement", "cost_per_1000_reviews", "moderator_precision_category_week", "shadow_agreement_day", "shadow_pairs", "labelled_decisions", "top_accounts_abusive_rooms_week", "verdicts_by_account_history_day", "campaigns_by_size_category_week", "actions_by_rule_day"}

// LocationPlaceholder stands for the lake root in the table DDL.
const LocationPlaceholder = "{{lake_location}}"

func read(name string) (string, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("lake: %w", err)
	}
	return string(b), nil
}

// TableDDL returns the CREATE EXTERNAL TABLE statement of table with the
// lake root filled in; location is like "s3://chatguard-lake/events/" and
// must end in a slash.
func TableDDL(table, location string) (string, error) {
	if !strings.HasPrefix(location, "s3://") || !strings.HasSuffix(location, "/") {
		return "", fmt.Errorf("lake: location %q must be s3://bucket/prefix/", location)
	}
	s, err := read(path.Join("tables", table+".sql"))
	if err != nil {
		return "", err
	}
	return strings.ReplaceAll(s, LocationPlaceholder, location), nil
}

// View returns the CREATE OR REPLACE VIEW statement of table's dedup view,
// named <table>_dedup.
func View(table string) (string, error) {
	return read(path.Join("views", table+"_dedup.sql"))
}

// ViewSelect returns the SELECT that defines table's dedup view, for engines
// where the view cannot be created (the local stand-in runs reads only).
func ViewSelect(table string) (string, error) {
	s, err := View(table)
	if err != nil {
		return "", err
	}
	head := "CREATE OR REPLACE VIEW " + table + "_dedup AS\n"
	_, body, ok := strings.Cut(s, head)
	if !ok {
		return "", fmt.Errorf("lake: view of %s does not start with %q", table, head)
	}
	return strings.TrimSpace(body), nil
}

// Query returns the SQL of a named analyst query. Each takes two positional
// parameters, the first and last day ('YYYY-MM-DD' literals).
func Query(name string) (string, error) {
	return read(path.Join("queries", name+".sql"))
}

// WithDedupViews prefixes query with the dedup views it names as common
// table expressions, so that it runs where the views do not exist. Only the
// views it names: a view over a table with no objects yet (a new event type
// before its first event) fails the query on the stand-in.
func WithDedupViews(query string) (string, error) {
	ctes := make([]string, 0, len(Tables))
	for _, t := range Tables {
		if !dedupViewRef(t).MatchString(query) {
			continue
		}
		sel, err := ViewSelect(t)
		if err != nil {
			return "", err
		}
		ctes = append(ctes, t+"_dedup AS (\n"+sel+"\n)")
	}
	if len(ctes) == 0 {
		return stripComments(query), nil
	}
	return "WITH " + strings.Join(ctes, ",\n") + "\n" + stripComments(query), nil
}

// dedupViewRef matches a reference to table's dedup view as a whole word.
func dedupViewRef(table string) *regexp.Regexp {
	return regexp.MustCompile(`\b` + table + `_dedup\b`)
}

// ForDuckDB rewrites the Trino functions the queries use that DuckDB
// names differently, for the DuckDB-backed local stand-in: approximate
// percentiles, and reading a scalar at a JSON path (both take the same
// '$.a[0].b' paths).
func ForDuckDB(query string) string {
	return strings.NewReplacer("approx_percentile(", "approx_quantile(", "json_extract_scalar(", "json_extract_string(").Replace(query)
}

func stripComments(q string) string {
	var out []string
	for _, l := range strings.Split(q, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "--") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
