package mysql

import (
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// analystQueries are the MySQL queries of docs/analysts.md, verbatim: the
// EXPLAIN test and `make bench-mysql` run exactly what the guide shows, and
// a test keeps the guide in step.
var analystQueries = []struct{ name, sql string }{
	{"top 100 abusive rooms (1 day)", `SELECT room_id, window_start, label, category, severity, confidence, action, rationale
FROM verdicts
WHERE status = 'done' AND label IN ('abusive', 'suspicious')
  AND window_start >= UTC_TIMESTAMP() - INTERVAL 1 DAY
ORDER BY severity DESC, confidence DESC
LIMIT 100;`},
	{"stage latency (1 hour)", `SELECT s.stage, COUNT(*) AS calls, AVG(s.pool = 'fallback') AS fallback_share,
       AVG(s.ttft_ms) AS avg_ttft_ms, AVG(s.latency_ms) AS avg_latency_ms
FROM verdicts v JOIN verdict_stages s ON s.verdict_id = v.id
WHERE v.finished_at >= UTC_TIMESTAMP() - INTERVAL 1 HOUR
GROUP BY s.stage;`},
}

// queueCase is one review-queue read the tests EXPLAIN and the benchmark
// times: a filter and whether to start deep in the queue (from the cursor
// after the first deepPages pages).
type queueCase struct {
	name string
	f    QueueFilter
	// deep starts from the cursor after that many pages.
	deep int
	// keys are the indexes the plan may use on verdicts.
	keys []string
	// sorted: the index delivers the order (no filesort).
	sorted bool
}

// queueCases are the console's reads: the default queue and each filter,
// first pages and a page deep in the queue. end is the newest window; run
// is a run id with verdicts.
func queueCases(end time.Time, run string) []queueCase {
	return []queueCase{
		{name: "queue: first page", f: QueueFilter{}, keys: []string{"ix_verdicts_queue"}, sorted: true},
		{name: "queue: page 20", f: QueueFilter{}, deep: 20, keys: []string{"ix_verdicts_queue"}, sorted: true},
		{name: "queue: category", f: QueueFilter{Category: pipeline.CategoryPhishingLink}, keys: []string{"ix_verdicts_queue_category"}, sorted: true},
		{name: "queue: category, page 3", f: QueueFilter{Category: pipeline.CategoryPhishingLink}, deep: 3, keys: []string{"ix_verdicts_queue_category"}, sorted: true},
		{name: "queue: severity >= 4", f: QueueFilter{MinSeverity: 4}, keys: []string{"ix_verdicts_queue"}, sorted: true},
		{name: "queue: last 24 h", f: QueueFilter{From: end.Add(-24 * time.Hour)}, keys: []string{"ix_verdicts_label_window", "ix_verdicts_queue"}},
		{name: "queue: one run", f: QueueFilter{RunID: run}, keys: []string{"ix_verdicts_run_queue"}, sorted: true},
		{name: "queue: failed", f: QueueFilter{Status: pipeline.StatusFailed}, keys: []string{"ix_verdicts_queue"}, sorted: true},
		{name: "queue: decided too", f: QueueFilter{IncludeDecided: true}, keys: []string{"ix_verdicts_queue"}, sorted: true},
		{name: "queue: category+severity+7 days", f: QueueFilter{Category: pipeline.CategoryExternalPayment, MinSeverity: 3, From: end.Add(-7 * 24 * time.Hour)},
			keys: []string{"ix_verdicts_queue_category", "ix_verdicts_label_window"}},
	}
}
