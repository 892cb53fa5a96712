package mysql

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.CoverageSource = (*Store)(nil)

// MaxCoverageRooms bounds the rooms of one Covered call: the IN list of its
// one statement.
const MaxCoverageRooms = 1000

// coverageSQL reads the done verdicts of some rooms whose windows overlap
// [start, end). It is a range scan of uq_review (room_id, window_start,
// window_end, pipeline_version) per room: window_start is bounded below by
// the longest window a worker accepts, so the range is one day of a room's
// verdicts, and window_end is filtered on the index entries (index
// condition pushdown), as revision_slot = 0 is (the current revision only:
// a re-reviewed window is one window), before any row is read for its
// status.
const coverageSQL = `SELECT room_id, window_start, window_end, pipeline_version
FROM verdicts
WHERE room_id IN (%s)
  AND window_start >= ? AND window_start < ?
  AND window_end > ?
  AND revision_slot = 0
  AND status = 'done'`

// coverageQuery returns the statement and its arguments for rooms over
// [start, end).
func coverageQuery(rooms []string, start, end time.Time) (string, []any) {
	args := make([]any, 0, len(rooms)+3)
	for _, r := range rooms {
		args = append(args, r)
	}
	args = append(args, dbTime(start.Add(-pipeline.DefaultMaxWindow)), dbTime(end), dbTime(start))
	return fmt.Sprintf(coverageSQL, "?"+strings.Repeat(", ?", len(rooms)-1)), args
}

// Covered implements pipeline.CoverageSource with one statement for up to
// MaxCoverageRooms rooms; more is a caller's error. A verdict counts once
// its transaction committed with status done: a running, failed, expired
// or stopped review covers nothing, nor does a window whose review event
// was dead-lettered (it has no row, or a failed one).
func (s *Store) Covered(ctx context.Context, rooms []string, start, end time.Time) ([]pipeline.CoveredWindow, error) {
	if len(rooms) == 0 {
		return nil, nil
	}
	if len(rooms) > MaxCoverageRooms {
		return nil, fmt.Errorf("mysql: coverage: %d rooms in one call, at most %d", len(rooms), MaxCoverageRooms)
	}
	q, args := coverageQuery(rooms, start, end)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("mysql: coverage: %w", err)
	}
	defer rows.Close()
	var out []pipeline.CoveredWindow
	for rows.Next() {
		var w pipeline.CoveredWindow
		if err := rows.Scan(&w.RoomID, &w.Start, &w.End, &w.PipelineVersion); err != nil {
			return nil, fmt.Errorf("mysql: coverage: %w", err)
		}
		w.Start, w.End = w.Start.UTC(), w.End.UTC()
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: coverage: %w", err)
	}
	return out, nil
}
