package mysql

import (
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// analystQueries are the MySQL queries of docs/analysts.md, verbatim: the
// EXPLAIN test and `make bench-mysql` run exactly what the guide shows, and
// a test keeps the guide in step.
var analystQueries = []struct{ name, sql string }{
	{"top 100 abusive rooms (1 day)", `SELECT room_id, window_start, label, category, severity, confidence, action, rationale
FROM verdicts
WHERE status = 'done' AND label IN ('abusive', 'suspicious')
  AND window_start >= UTC_TIMESTAMP() - INTERVAL 1 DAY AND revision_slot = 0
ORDER BY severity DESC, confidence DESC
LIMIT 100;`},
	{"stage latency (1 hour)", `SELECT s.stage, COUNT(*) AS calls, AVG(s.pool = 'fallback') AS fallback_share,
       AVG(s.ttft_ms) AS avg_ttft_ms, AVG(s.latency_ms) AS avg_latency_ms
FROM verdicts v JOIN verdict_stages s ON s.verdict_id = v.id
WHERE v.finished_at >= UTC_TIMESTAMP() - INTERVAL 1 HOUR
GROUP BY s.stage;`},
	{"top accounts by abusive rooms (7 days)", `SELECT sender_id,
       COUNT(DISTINCT CASE WHEN overturned = 0 THEN room_id END) AS abusive_rooms,
       COUNT(DISTINCT CASE WHEN overturned = 1 THEN room_id END) AS overturned_rooms
FROM (SELECT s.sender_id, s.room_id,
             COALESCE((SELECT d.decision = 'overturn' FROM moderator_decisions d FORCE INDEX (ix_moderator_decisions_verdict)
                       WHERE d.verdict_id = s.verdict_id ORDER BY d.decided_at DESC, d.id DESC LIMIT 1), 0) AS overturned
      FROM verdicts v FORCE INDEX (ix_verdicts_finished) STRAIGHT_JOIN verdict_subjects s ON s.verdict_id = v.id
      WHERE v.finished_at >= UTC_TIMESTAMP() - INTERVAL 7 DAY AND v.revision_slot = 0 AND s.label = 'abusive') AS a
GROUP BY sender_id
ORDER BY abusive_rooms DESC, sender_id
LIMIT 100;`},
	{"campaigns by size and category (7 days)", `SELECT COALESCE(m.campaign, c.mark) AS campaign, c.category, COUNT(DISTINCT c.room_id) AS rooms,
       COUNT(DISTINCT c.mark) AS marks, MAX(c.rooms) AS fleet_rooms, MAX(c.senders) AS fleet_senders
FROM verdicts v FORCE INDEX (ix_verdicts_finished) STRAIGHT_JOIN verdict_campaigns c ON c.verdict_id = v.id
LEFT JOIN campaign_members m ON m.mark = c.mark
WHERE v.finished_at >= UTC_TIMESTAMP() - INTERVAL 7 DAY AND v.revision_slot = 0 AND c.class IN ('campaign', 'linked')
GROUP BY COALESCE(m.campaign, c.mark), c.category
ORDER BY rooms DESC, campaign, c.category
LIMIT 100;`},
	{"moderator agreement, campaign verdicts or not (30 days)", `SELECT campaign, category, COUNT(*) AS decided, AVG(decision = 'confirm') AS agreement
FROM (SELECT v.category,
             EXISTS (SELECT 1 FROM verdict_campaigns c WHERE c.verdict_id = v.id AND c.class IN ('campaign', 'linked')) AS campaign,
             (SELECT d.decision FROM moderator_decisions d FORCE INDEX (ix_moderator_decisions_verdict)
              WHERE d.verdict_id = v.id ORDER BY d.decided_at DESC, d.id DESC LIMIT 1) AS decision
      FROM verdicts v FORCE INDEX (ix_verdicts_finished)
      WHERE v.finished_at >= UTC_TIMESTAMP() - INTERVAL 30 DAY AND v.status = 'done' AND v.label IN ('abusive', 'suspicious')) AS x
WHERE decision IS NOT NULL
GROUP BY campaign, category
ORDER BY campaign DESC, category;`},
}

// queueCase is one review-queue read the tests EXPLAIN and the benchmark
// times: a filter and whether to start deep in the queue (from the cursor
// after the first deepPages pages).
type queueCase struct {
	name string
	f    moderation.QueueFilter
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
		{name: "queue: first page", f: moderation.QueueFilter{}, keys: []string{"ix_verdicts_queue"}, sorted: true},
		{name: "queue: page 20", f: moderation.QueueFilter{}, deep: 20, keys: []string{"ix_verdicts_queue"}, sorted: true},
		{name: "queue: category", f: moderation.QueueFilter{Category: pipeline.CategoryPhishingLink}, keys: []string{"ix_verdicts_queue_category"}, sorted: true},
		{name: "queue: category, page 3", f: moderation.QueueFilter{Category: pipeline.CategoryPhishingLink}, deep: 3, keys: []string{"ix_verdicts_queue_category"}, sorted: true},
		{name: "queue: severity >= 4", f: moderation.QueueFilter{MinSeverity: 4}, keys: []string{"ix_verdicts_queue"}, sorted: true},
		{name: "queue: last 24 h", f: moderation.QueueFilter{From: end.Add(-24 * time.Hour)}, keys: []string{"ix_verdicts_label_window", "ix_verdicts_queue"}},
		{name: "queue: one run", f: moderation.QueueFilter{RunID: run}, keys: []string{"ix_verdicts_run_queue"}, sorted: true},
		{name: "queue: failed", f: moderation.QueueFilter{Status: pipeline.StatusFailed}, keys: []string{"ix_verdicts_queue"}, sorted: true},
		{name: "queue: decided too", f: moderation.QueueFilter{IncludeDecided: true}, keys: []string{"ix_verdicts_queue"}, sorted: true},
		{name: "queue: category+severity+7 days", f: moderation.QueueFilter{Category: pipeline.CategoryExternalPayment, MinSeverity: 3, From: end.Add(-7 * 24 * time.Hour)},
			keys: []string{"ix_verdicts_queue_category", "ix_verdicts_label_window"}},
	}
}
