package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// The moderators' review queue: verdicts that need a human look, the most
// urgent first, read page by page with keyset pagination (each page starts
// after the last row of the previous one, so a page costs the same at the
// top of the queue and ten thousand rows down, and rows saved meanwhile
// neither repeat nor shift a page).
//
// Order: label in the filter's order (abusive, then suspicious, by default),
// then severity descending, then the newest window first, then id
// descending (a total order, so the cursor is exact). Each label is read by
// its own query with equality on (status, label), which lets one index
// (ix_verdicts_queue, or ix_verdicts_queue_category / ix_verdicts_run_queue
// when a category or a run is given) deliver the rows already in order: no
// sort, and LIMIT stops the scan after a page. A single query with
// label IN (…) would have to sort every matching row instead.
//
// The statements, for a console or a DBA (? are the filter's values; the
// bracketed parts only when the filter or cursor sets them):
//
//	SELECT v.id, v.room_id, …, v.finished_at, (the extract stage's first
//	       quote: a primary-key lookup), t.moderator, t.active_at
//	FROM verdicts v LEFT JOIN queue_takes t ON t.verdict_id = v.id
//	  [LEFT JOIN moderator_decisions d ON d.verdict_id = v.id AND d.reversed_at IS NULL AND d.decision <> 'undo']
//	WHERE v.status = ? AND v.label = ? AND v.revision_slot = 0
//	  [AND v.category = ?] [AND v.run_id = ?] [AND t.moderator = ?] [AND v.severity >= ?]
//	  [AND v.window_start >= ?] [AND v.window_start < ?]
//	  [AND d.verdict_id IS NULL]
//	  [AND (v.severity < ? OR (v.severity = ? AND (v.window_start < ?
//	        OR (v.window_start = ? AND v.id < ?))))]
//	ORDER BY v.severity DESC, v.window_start DESC, v.id DESC
//	LIMIT ?

// queueCursor is the position after the last row of a page. Filter is a
// fingerprint of the filter the page was read with, so that a cursor is
// not replayed against another filter (it would silently skip rows).
type queueCursor struct {
	Label    pipeline.Label `json:"l"`
	Severity int            `json:"s"`
	Window   time.Time      `json:"w"`
	ID       uint64         `json:"i"`
	Filter   string         `json:"f"`
}

// ListQueue returns one page of the review queue under f, starting after
// cursor ("" for the first page; otherwise a moderation.QueuePage.Next read with the
// same filter). It returns an error naming every problem when f is invalid
// or the cursor is malformed or belongs to another filter, and an error
// wrapping ctx's when ctx ends. It only reads.
func (s *Store) ListQueue(ctx context.Context, f moderation.QueueFilter, cursor string) (moderation.QueuePage, error) {
	f, err := f.Normalize()
	if err != nil {
		return moderation.QueuePage{}, fmt.Errorf("mysql: list queue: %w", err)
	}
	var cur *queueCursor
	if cursor != "" {
		c, err := decodeCursor(cursor, f)
		if err != nil {
			return moderation.QueuePage{}, fmt.Errorf("mysql: list queue: %w", err)
		}
		cur = &c
	}
	// One row more than the page tells whether a next page exists.
	want := f.Limit + 1
	var items []moderation.QueueItem
	for i, label := range f.Labels {
		if cur != nil {
			at := slices.Index(f.Labels, cur.Label)
			if i < at {
				continue
			}
			if i > at {
				cur = nil
			}
		}
		q, args := queueQuery(f, label, cur, want-len(items))
		got, err := s.queueRows(ctx, q, args)
		if err != nil {
			return moderation.QueuePage{}, fmt.Errorf("mysql: list queue: %w", err)
		}
		items = append(items, got...)
		if len(items) >= want {
			break
		}
	}
	page := moderation.QueuePage{Items: items}
	if len(items) > f.Limit {
		page.Items = items[:f.Limit]
		last := page.Items[f.Limit-1]
		page.Next = encodeCursor(queueCursor{Label: last.Label, Severity: last.Severity, Window: last.Key.WindowStart, ID: last.ID, Filter: fingerprint(f)})
	}
	return page, nil
}

// queueCols are the columns a queue row reads, in moderation.QueueItem's scan order.
const queueCols = `v.id, v.room_id, v.window_start, v.window_end, v.pipeline_version, v.run_id, v.status,
	v.label, v.category, v.severity, v.confidence, v.action, COALESCE(v.rationale, ''), v.early_exit,
	v.injection_flagged, v.finished_at, v.newest_message_at,
	COALESCE((SELECT JSON_UNQUOTE(JSON_EXTRACT(s.output, '$.evidence[0].quote')) FROM verdict_stages s
	  WHERE s.verdict_id = v.id AND s.stage = 'extract'), '')`

// queueQuery is the statement reading up to limit rows of one label of the
// queue after cur (nil: from the top of the label).
func queueQuery(f moderation.QueueFilter, label pipeline.Label, cur *queueCursor, limit int) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 16)
	b.WriteString("SELECT ")
	b.WriteString(queueCols)
	if f.IncludeDecided {
		b.WriteString(", EXISTS (SELECT 1 FROM moderator_decisions d WHERE d.verdict_id = v.id AND d.reversed_at IS NULL AND d.decision <> 'undo')")
	} else {
		b.WriteString(", FALSE")
	}
	// The take: a primary-key lookup per row read, after the index has
	// ordered them.
	b.WriteString(", COALESCE(t.moderator, ''), t.active_at")
	b.WriteString("\nFROM verdicts v LEFT JOIN queue_takes t ON t.verdict_id = v.id")
	if !f.IncludeDecided {
		// The anti-join (a lookup per row on the decisions index; a NOT
		// EXISTS may be planned as a scan of every decision ever made).
		b.WriteString(" LEFT JOIN moderator_decisions d ON d.verdict_id = v.id AND d.reversed_at IS NULL AND d.decision <> 'undo'")
	}
	// Current revisions only (revision_slot 0): a superseded one is
	// history, filtered on the row read for the page (superseded rows are
	// few, so LIMIT still ends the scan after a page).
	b.WriteString("\nWHERE v.status = ? AND v.label = ? AND v.revision_slot = 0")
	args = append(args, string(f.Status), string(label))
	if f.Category != "" {
		b.WriteString(" AND v.category = ?")
		args = append(args, string(f.Category))
	}
	if f.RunID != "" {
		b.WriteString(" AND v.run_id = ?")
		args = append(args, f.RunID)
	}
	if f.TakenBy != "" {
		b.WriteString(" AND t.moderator = ?")
		args = append(args, f.TakenBy)
	}
	if f.MinSeverity > 0 {
		b.WriteString(" AND v.severity >= ?")
		args = append(args, f.MinSeverity)
	}
	if !f.From.IsZero() {
		b.WriteString(" AND v.window_start >= ?")
		args = append(args, dbTime(f.From))
	}
	if !f.To.IsZero() {
		b.WriteString(" AND v.window_start < ?")
		args = append(args, dbTime(f.To))
	}
	if !f.IncludeDecided {
		b.WriteString(" AND d.verdict_id IS NULL")
	}
	if cur != nil {
		// The row-value comparison (severity, window_start, id) < (…),
		// spelled out: the range optimizer of both MySQL and MariaDB turns
		// this form into index ranges.
		b.WriteString("\n  AND (v.severity < ? OR (v.severity = ? AND (v.window_start < ? OR (v.window_start = ? AND v.id < ?))))")
		w := dbTime(cur.Window)
		args = append(args, cur.Severity, cur.Severity, w, w, cur.ID)
	}
	b.WriteString("\nORDER BY v.severity DESC, v.window_start DESC, v.id DESC\nLIMIT ?")
	args = append(args, limit)
	return b.String(), args
}

func (s *Store) queueRows(ctx context.Context, q string, args []any) ([]moderation.QueueItem, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []moderation.QueueItem
	for rows.Next() {
		var (
			it                        moderation.QueueItem
			ws, we                    time.Time
			status, label, cat, act   string
			finished, newest          sql.NullTime
			room, version, run        string
			earlyExit, injected, decd bool
			takenAt                   sql.NullTime
		)
		if err := rows.Scan(&it.ID, &room, &ws, &we, &version, &run, &status, &label, &cat, &it.Severity,
			&it.Confidence, &act, &it.Rationale, &earlyExit, &injected, &finished, &newest, &it.Snippet, &decd, &it.TakenBy, &takenAt); err != nil {
			return nil, err
		}
		it.Key = pipeline.ReviewKey{RoomID: room, WindowStart: ws.UTC(), WindowEnd: we.UTC(), PipelineVersion: version}
		it.RunID = run
		it.Status, it.Label, it.Category, it.Action = pipeline.Status(status), pipeline.Label(label), pipeline.Category(cat), pipeline.Action(act)
		it.EarlyExit, it.InjectionFlagged, it.Decided = earlyExit, injected, decd
		if finished.Valid {
			it.FinishedAt = finished.Time.UTC()
		}
		it.NewestMessageAt = fromNullTime(newest)
		if takenAt.Valid {
			it.TakenActiveAt = takenAt.Time.UTC()
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// fingerprint identifies the rows and order a normalized filter selects
// (not its page size, which may change between pages).
func fingerprint(f moderation.QueueFilter) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s|%q|%s|%d|%s|%s|%q|%t", f.Status, f.Labels, f.Category, f.MinSeverity,
		dbTime(f.From).Format(time.RFC3339Nano), dbTime(f.To).Format(time.RFC3339Nano), f.RunID, f.IncludeDecided)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:9])
}

func encodeCursor(c queueCursor) string {
	c.Window = dbTime(c.Window)
	b, _ := json.Marshal(c) // plain fields: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string, f moderation.QueueFilter) (queueCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return queueCursor{}, fmt.Errorf("%w: %v", moderation.ErrBadCursor, err)
	}
	var c queueCursor
	if err := json.Unmarshal(b, &c); err != nil {
		return queueCursor{}, fmt.Errorf("%w: %v", moderation.ErrBadCursor, err)
	}
	if c.Filter != fingerprint(f) {
		return queueCursor{}, fmt.Errorf("%w: it was read with another filter; start from the first page", moderation.ErrBadCursor)
	}
	if !slices.Contains(f.Labels, c.Label) || c.ID == 0 || c.Window.IsZero() {
		return queueCursor{}, fmt.Errorf("%w: it names no row of this queue", moderation.ErrBadCursor)
	}
	return c, nil
}

// countQueueSQL reads the open queue's counts from the covering index
// ix_verdicts_queue_counts alone (migrations 00017, 00022: revision_slot
// keeps the count to current revisions): every column it needs
// is in the index, so no verdicts row is read; the anti-join probes the
// decisions index. FORCE INDEX because the optimiser would otherwise take
// ix_verdicts_queue_category (same prefix, already grouped by category),
// which is not covering and costs a row lookup per open item.
const countQueueSQL = `SELECT v.category, SUM(v.finished_at >= ?), SUM(v.finished_at < ? AND v.finished_at >= ?), SUM(v.finished_at IS NULL OR v.finished_at < ?)
		FROM verdicts v FORCE INDEX (ix_verdicts_queue_counts) LEFT JOIN moderator_decisions d ON d.verdict_id = v.id AND d.reversed_at IS NULL AND d.decision <> 'undo'
		WHERE v.status = ? AND v.label IN (?, ?) AND v.revision_slot = 0 AND d.verdict_id IS NULL
		GROUP BY v.category`

// CountQueue returns the open queue's counts at now. One grouped read of
// the flagged, undecided rows by a covering index (countQueueSQL): it
// costs a scan of the open queue's index entries, not of every verdict
// nor of their rows.
func (s *Store) CountQueue(ctx context.Context, now time.Time) (moderation.QueueCounts, error) {
	hour, day := dbTime(now.Add(-time.Hour)), dbTime(now.Add(-24*time.Hour))
	rows, err := s.db.QueryContext(ctx, countQueueSQL, hour, hour, day, day, string(pipeline.StatusDone), string(pipeline.LabelAbusive), string(pipeline.LabelSuspicious))
	if err != nil {
		return moderation.QueueCounts{}, fmt.Errorf("mysql: count queue: %w", err)
	}
	defer rows.Close()
	c := moderation.QueueCounts{ByCategory: map[pipeline.Category]int{}}
	for rows.Next() {
		var (
			cat                string
			fresh, today, rest int
		)
		if err := rows.Scan(&cat, &fresh, &today, &rest); err != nil {
			return moderation.QueueCounts{}, fmt.Errorf("mysql: count queue: %w", err)
		}
		c.ByCategory[pipeline.Category(cat)] = fresh + today + rest
		c.Under1h, c.Under24h, c.Older = c.Under1h+fresh, c.Under24h+today, c.Older+rest
	}
	if err := rows.Err(); err != nil {
		return moderation.QueueCounts{}, fmt.Errorf("mysql: count queue: %w", err)
	}
	return c, nil
}
