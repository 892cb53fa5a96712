package batchrun

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// SweepChunk is how many rooms one coverage read asks about: one statement
// per chunk (storage/mysql takes up to 1,000).
const SweepChunk = 500

// SweepSummary is what a sweep found, in the run's Summary.
type SweepSummary struct {
	// PipelineVersion is the sweep's (the workers') pipeline version.
	PipelineVersion string `json:"pipeline_version"`
	// RoomsCovered counts rooms whose every message of the window a done
	// verdict already covers: nothing is published for them.
	RoomsCovered int64 `json:"rooms_covered"`
	// Gaps counts the review events of the uncovered parts (what a dry run
	// would have published).
	Gaps int64 `json:"gaps"`
	// OtherVersionVerdicts counts done verdicts overlapping the window
	// under another pipeline version (coverage unless the sweep re-reviews
	// other versions). Many, with none under PipelineVersion, means a
	// rollout, or that the batch's model names are not the workers'.
	OtherVersionVerdicts int64 `json:"other_version_verdicts"`
	// OtherVersionRereviews counts the gaps (events) that a done verdict
	// under another pipeline version covers at least in part: the time
	// reviewed again because the sweep was asked to (always 0 otherwise).
	OtherVersionRereviews int64 `json:"other_version_rereviews,omitempty"`
}

// sweepState counts a sweep as it goes.
type sweepState struct {
	covered, gaps, other, own, rereviews atomic.Int64
}

func (s *sweepState) summary(version string) *SweepSummary {
	return &SweepSummary{PipelineVersion: version, RoomsCovered: s.covered.Load(), Gaps: s.gaps.Load(), OtherVersionVerdicts: s.other.Load(),
		OtherVersionRereviews: s.rereviews.Load()}
}

// span is the half-open interval [start, end).
type span struct{ start, end time.Time }

// sweep is convert for a sweep: it reads rooms in chunks of SweepChunk,
// reads each chunk's coverage with one call, and turns every room's
// uncovered parts that hold messages into review events of the run, with
// source sweep. A room that done verdicts (real time's, an earlier run's)
// covered entirely publishes nothing.
func (r *Runner) sweep(ctx context.Context, log *slog.Logger, st *runState, rooms <-chan pipeline.ActiveRoom, events chan<- pipeline.ReviewEvent, cutSource context.CancelCauseFunc) error {
	cfg := r.Config
	chunk := make([]pipeline.ActiveRoom, 0, SweepChunk)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		err := r.sweepChunk(ctx, st, chunk, events)
		chunk = chunk[:0]
		return err
	}
	defer func() {
		// Only a sweep that re-reviews other versions is misled by the
		// wrong model names: it would sweep every room whole.
		if own, other := st.sweep.own.Load(), st.sweep.other.Load(); cfg.RereviewOtherVersions && own == 0 && other > 0 {
			log.Warn("sweep: no done verdict of the window is under this pipeline version, but some are under others; "+
				"are --primary-model and --fallback-model the workers'?", "run_id", cfg.RunID, "pipeline_version", cfg.PipelineVersion, "other_version_verdicts", other)
		}
	}()
	for room := range rooms {
		n := st.rows.Add(1)
		chunk = append(chunk, room)
		if cfg.MaxEvents > 0 && n >= int64(cfg.MaxEvents) {
			cutSource(errMaxEvents)
			return flush()
		}
		if len(chunk) == SweepChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// sweepChunk reads the coverage of chunk's rooms and sends the events of
// their gaps.
func (r *Runner) sweepChunk(ctx context.Context, st *runState, chunk []pipeline.ActiveRoom, events chan<- pipeline.ReviewEvent) error {
	cfg := r.Config
	ids := make([]string, len(chunk))
	for i, room := range chunk {
		ids[i] = room.RoomID
	}
	windows, err := r.Coverage.Covered(ctx, ids, cfg.WindowStart, cfg.WindowEnd)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	// Any done verdict is coverage, whatever version reviewed it: an hour
	// that spans a model or prompt rollout is not paid for twice. Asked
	// to re-review other versions, only this version's verdicts are, and
	// the others' are kept to count what is reviewed again.
	covered := make(map[string][]span, len(chunk))
	others := make(map[string][]span)
	for _, w := range windows {
		if w.PipelineVersion != cfg.PipelineVersion {
			st.sweep.other.Add(1)
			if cfg.RereviewOtherVersions {
				others[w.RoomID] = append(others[w.RoomID], span{w.Start, w.End})
				continue
			}
		} else {
			st.sweep.own.Add(1)
		}
		covered[w.RoomID] = append(covered[w.RoomID], span{w.Start, w.End})
	}
	for _, room := range chunk {
		gs := gaps(cfg.WindowStart, cfg.WindowEnd, room, covered[room.RoomID], pipeline.DefaultMaxWindow)
		if len(gs) == 0 {
			st.sweep.covered.Add(1)
		}
		for _, g := range gs {
			st.sweep.gaps.Add(1)
			if overlapsAny(g, others[room.RoomID]) {
				st.sweep.rereviews.Add(1)
			}
			if cfg.DryRun {
				continue
			}
			ev := pipeline.ReviewEvent{RoomID: room.RoomID, WindowStart: g.start, WindowEnd: g.end, RunID: cfg.RunID,
				SchemaVersion: pipeline.ReviewSchemaVersion, Source: pipeline.SourceSweep}
			select {
			case events <- ev:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
	}
	return nil
}

// overlapsAny reports whether g overlaps one of spans.
func overlapsAny(g span, spans []span) bool {
	return slices.ContainsFunc(spans, func(c span) bool { return c.start.Before(g.end) && g.start.Before(c.end) })
}

// gaps returns the parts of the window [start, end) that no covered span
// covers and in which room had messages, in order: the complement of the
// spans' union (so adjacent uncovered time is one gap), keeping only the
// gaps that hold a message, each cut into pieces of at most maxWindow (the
// longest window a worker reviews). covered is reordered.
func gaps(start, end time.Time, room pipeline.ActiveRoom, covered []span, maxWindow time.Duration) []span {
	slices.SortFunc(covered, func(a, b span) int { return a.start.Compare(b.start) })
	var out []span
	emit := func(a, b time.Time) {
		if !b.After(a) || !holdsMessages(start, room, a, b) {
			return
		}
		for ; b.Sub(a) > maxWindow; a = a.Add(maxWindow) {
			out = append(out, span{a, a.Add(maxWindow)})
		}
		out = append(out, span{a, b})
	}
	cur := start
	for _, c := range covered {
		if !cur.Before(end) {
			break
		}
		if !c.end.After(cur) {
			continue
		}
		if c.start.After(cur) {
			emit(cur, minTime(c.start, end))
		}
		cur = maxTime(cur, c.end)
	}
	if cur.Before(end) {
		emit(cur, end)
	}
	return out
}

// holdsMessages reports whether room had a message in [a, b): one of its
// active seconds (counted from the window start) overlaps it, or, when the
// seconds are unknown, its first-to-last message span does.
func holdsMessages(windowStart time.Time, room pipeline.ActiveRoom, a, b time.Time) bool {
	if room.ActiveSeconds == nil {
		return room.FirstMessageAt.Before(b) && !room.LastMessageAt.Before(a)
	}
	at := func(s int32) time.Time { return windowStart.Add(time.Duration(s) * time.Second) }
	// The first second that ends after a; it overlaps [a, b) if it starts
	// before b.
	i := sort.Search(len(room.ActiveSeconds), func(i int) bool { return at(room.ActiveSeconds[i] + 1).After(a) })
	return i < len(room.ActiveSeconds) && at(room.ActiveSeconds[i]).Before(b)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
