package demo

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// lakeStore is the part of s3lake.Store the reader needs.
type lakeStore interface {
	List(ctx context.Context, prefix string) ([]string, error)
	Get(ctx context.Context, key string) ([]byte, error)
}

// LakeView is what the lake holds for one run: its inference-log and
// verdict rows, each event once (the consumer writes at least once).
type LakeView struct {
	// Logs and Verdicts are keyed by event id.
	Logs     map[string]s3lake.InferenceLogRow
	Verdicts map[string]s3lake.VerdictRow
	// Objects are the keys holding this run's rows, sorted.
	Objects []string
	// Copies counts rows read beyond the first copy of an event.
	Copies int
}

// lakeReader reads a run's rows from the lake incrementally: an object is
// read once (the consumer rewrites a key only with the same batch), and
// only the hour partitions the run can have written are listed.
type lakeReader struct {
	store  lakeStore
	prefix string
	runID  string
	since  time.Time
	read   map[string]bool
	view   LakeView
}

func newLakeReader(store lakeStore, prefix, runID string, since time.Time) *lakeReader {
	return &lakeReader{store: store, prefix: prefix, runID: runID, since: since, read: map[string]bool{},
		view: LakeView{Logs: map[string]s3lake.InferenceLogRow{}, Verdicts: map[string]s3lake.VerdictRow{}}}
}

// refresh reads the objects written since the last call, in the partitions
// of every hour from since to now.
func (l *lakeReader) refresh(ctx context.Context, now time.Time) error {
	for h := pipeline.LakeHour(l.since); !h.After(now.UTC()); h = h.Add(time.Hour) {
		for _, t := range []pipeline.EventType{pipeline.EventInferenceLog, pipeline.EventVerdict} {
			keys, err := l.store.List(ctx, l.prefix+s3lake.PartitionPath(t, h))
			if err != nil {
				return fmt.Errorf("lake: %w", err)
			}
			for _, k := range keys {
				if l.read[k] {
					continue
				}
				if err := l.readObject(ctx, t, k); err != nil {
					return err
				}
				l.read[k] = true
			}
		}
	}
	return nil
}

func (l *lakeReader) readObject(ctx context.Context, t pipeline.EventType, key string) error {
	b, err := l.store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	mine := false
	switch t {
	case pipeline.EventInferenceLog:
		rows, err := s3lake.ReadRows[s3lake.InferenceLogRow](b)
		if err != nil {
			return fmt.Errorf("lake: %s: %w", key, err)
		}
		for _, r := range rows {
			if r.RunID != l.runID {
				continue
			}
			mine = true
			if _, dup := l.view.Logs[r.EventID]; dup {
				l.view.Copies++
			}
			l.view.Logs[r.EventID] = r
		}
	case pipeline.EventVerdict:
		rows, err := s3lake.ReadRows[s3lake.VerdictRow](b)
		if err != nil {
			return fmt.Errorf("lake: %s: %w", key, err)
		}
		for _, r := range rows {
			if r.RunID != l.runID {
				continue
			}
			mine = true
			if _, dup := l.view.Verdicts[r.EventID]; dup {
				l.view.Copies++
			}
			l.view.Verdicts[r.EventID] = r
		}
	}
	if mine {
		i, _ := slices.BinarySearch(l.view.Objects, key)
		l.view.Objects = slices.Insert(l.view.Objects, i, key)
	}
	return nil
}

// StageCall names one model call: the attempt-th call of a stage of a room.
type StageCall struct {
	RoomID  string
	Stage   string
	Attempt int
}

// MissingLogs returns the stage calls that have no inference-log row in
// view: the worker emits one row per attempt, numbered from 1, so a stage
// row with attempts = n expects rows 1..n.
func MissingLogs(stages []StageRow, view LakeView) []StageCall {
	have := map[StageCall]bool{}
	for _, r := range view.Logs {
		have[StageCall{RoomID: r.RoomID, Stage: r.Stage, Attempt: int(r.Attempt)}] = true
	}
	var missing []StageCall
	for _, s := range stages {
		for n := 1; n <= s.Attempts; n++ {
			c := StageCall{RoomID: s.RoomID, Stage: s.Stage, Attempt: n}
			if !have[c] {
				missing = append(missing, c)
			}
		}
	}
	return missing
}

// ExtraLogs returns the inference-log rows beyond one per recorded stage
// call: a second row for the same call, or a row of a call no stage row
// records. At-least-once processing makes them possible (a job retried
// after a failed save, or an event delivered twice, runs its stages again;
// the verdict upsert keeps one verdict), so they are reported, not failed
// on.
func ExtraLogs(stages []StageRow, view LakeView) []StageCall {
	want := map[StageCall]bool{}
	for _, s := range stages {
		for n := 1; n <= s.Attempts; n++ {
			want[StageCall{RoomID: s.RoomID, Stage: s.Stage, Attempt: n}] = true
		}
	}
	seen := map[StageCall]bool{}
	var extra []StageCall
	for _, r := range view.Logs {
		c := StageCall{RoomID: r.RoomID, Stage: r.Stage, Attempt: int(r.Attempt)}
		if !want[c] || seen[c] {
			extra = append(extra, c)
		}
		seen[c] = true
	}
	slices.SortFunc(extra, func(a, b StageCall) int {
		return cmp.Or(cmp.Compare(a.RoomID, b.RoomID), cmp.Compare(a.Stage, b.Stage), cmp.Compare(a.Attempt, b.Attempt))
	})
	return extra
}
