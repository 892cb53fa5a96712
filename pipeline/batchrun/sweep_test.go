package batchrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// at is minute m (and s seconds) of the test window.
func at(m, s int) time.Time {
	return winStart.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
}

// secondsOf lists the active seconds of messages sent at the given times.
func secondsOf(ts ...time.Time) []int32 {
	var out []int32
	for _, t := range ts {
		s := int32(t.Sub(winStart) / time.Second)
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

func render(ss []span) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "[%s,%s)", s.start.Format("04:05"), s.end.Format("04:05"))
	}
	return b.String()
}

func TestGapsAreTheUncoveredPartsThatHoldMessages(t *testing.T) {
	t.Parallel()
	msgs := []time.Time{at(1, 0), at(3, 10), at(20, 0), at(20, 30), at(59, 59)}
	room := pipeline.ActiveRoom{RoomID: "r", FirstMessageAt: msgs[0], LastMessageAt: msgs[len(msgs)-1], ActiveSeconds: secondsOf(msgs...)}
	tests := []struct {
		name    string
		covered []span
		want    string
	}{
		{"nothing covered: the whole window", nil, "[00:00,00:00)"},
		{"covered whole", []span{{at(-5, 0), at(61, 0)}}, ""},
		{"real time in steady state: quiet gaps hold no message",
			[]span{{at(0, 0), at(4, 10)}, {at(19, 0), at(21, 30)}, {at(58, 59), at(61, 0)}}, ""},
		{"a window expired: its part comes back",
			[]span{{at(0, 0), at(4, 10)}, {at(58, 59), at(61, 0)}}, "[04:10,58:59)"},
		{"overlapping and out of order windows merge",
			[]span{{at(19, 0), at(21, 30)}, {at(2, 0), at(19, 30)}, {at(0, 0), at(1, 30)}}, "[21:30,00:00)"},
		{"a message in the second a window starts is not a gap",
			[]span{{at(0, 0), at(20, 0)}, {at(20, 0).Add(500 * time.Millisecond), at(61, 0)}}, "[20:00,20:00)"},
		{"first message uncovered", []span{{at(2, 0), at(61, 0)}}, "[00:00,02:00)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := render(gaps(winStart, winEnd, room, tc.covered, pipeline.DefaultMaxWindow))
			require.Equal(t, tc.want, got)
		})
	}

	// Without active seconds a room is active from its first message to its
	// last: time outside that span is never a gap.
	coarse := room
	coarse.ActiveSeconds = nil
	require.Equal(t, "[04:10,19:00)", render(gaps(winStart, winEnd, coarse, []span{{at(0, 0), at(4, 10)}, {at(19, 0), at(61, 0)}}, pipeline.DefaultMaxWindow)))
	require.Empty(t, gaps(winStart, winEnd, coarse, []span{{at(0, 0), at(0, 59)}, {at(1, 0), at(61, 0)}}, pipeline.DefaultMaxWindow))

	// A gap longer than the worker's longest window is cut.
	require.Equal(t, "[00:00,25:00)[25:00,50:00)[50:00,00:00)", render(gaps(winStart, winEnd, room, nil, 25*time.Minute)))
}

// listSource serves the given rooms.
type listSource struct{ rooms []pipeline.ActiveRoom }

func (s *listSource) Rooms(ctx context.Context, start, end time.Time, onStart func(string), out chan<- pipeline.ActiveRoom) (pipeline.RoomQuery, error) {
	onStart("q-sweep")
	for _, r := range s.rooms {
		select {
		case out <- r:
		case <-ctx.Done():
			return pipeline.RoomQuery{}, context.Cause(ctx)
		}
	}
	return pipeline.RoomQuery{QueryExecutionID: "q-sweep", Rows: int64(len(s.rooms))}, nil
}

// fakeCoverage serves windows by room and records each call's size.
type fakeCoverage struct {
	windows map[string][]pipeline.CoveredWindow
	err     error

	mu    sync.Mutex
	calls []int
}

func (c *fakeCoverage) Covered(_ context.Context, rooms []string, start, end time.Time) ([]pipeline.CoveredWindow, error) {
	c.mu.Lock()
	c.calls = append(c.calls, len(rooms))
	c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	var out []pipeline.CoveredWindow
	for _, r := range rooms {
		out = append(out, c.windows[r]...)
	}
	return out, nil
}

func TestSweepPublishesOnlyTheGapsInChunks(t *testing.T) {
	t.Parallel()
	const rooms = 2*SweepChunk + 7
	src := &listSource{}
	cov := &fakeCoverage{windows: map[string][]pipeline.CoveredWindow{}}
	for i := range rooms {
		id := fmt.Sprintf("room-%05d", i)
		msgs := []time.Time{at(5, 0), at(40, 0)}
		src.rooms = append(src.rooms, pipeline.ActiveRoom{RoomID: id, FirstMessageAt: msgs[0], LastMessageAt: msgs[1], MessageCount: 2, ActiveSeconds: secondsOf(msgs...)})
		switch i % 4 {
		case 0: // real time covered both messages
			cov.windows[id] = []pipeline.CoveredWindow{{RoomID: id, Start: at(4, 0), End: at(6, 0), PipelineVersion: "v2"}, {RoomID: id, Start: at(39, 0), End: at(41, 0), PipelineVersion: "v2"}}
		case 1: // only the first
			cov.windows[id] = []pipeline.CoveredWindow{{RoomID: id, Start: at(4, 0), End: at(6, 0), PipelineVersion: "v2"}}
		case 2: // under an older pipeline version: coverage all the same
			cov.windows[id] = []pipeline.CoveredWindow{{RoomID: id, Start: winStart, End: winEnd, PipelineVersion: "v1"}}
		}
	}
	pub, store := &fakePublisher{}, &fakeStore{}
	var logs syncBuffer
	r := &Runner{Config: Config{WindowStart: winStart, WindowEnd: winEnd, RunID: "run-s", ProgressInterval: time.Hour, Sweep: true, PipelineVersion: "v2", RoomBuffer: 10, EventBuffer: 10},
		Source: src, Publisher: pub, Store: store, Coverage: cov, Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	sum, err := r.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, []int{SweepChunk, SweepChunk, 7}, cov.calls, "one coverage read per chunk")

	got := map[string]string{}
	for _, ev := range pub.events {
		require.Equal(t, pipeline.SourceSweep, ev.Source)
		require.Equal(t, "run-s", ev.RunID)
		got[ev.RoomID] += render([]span{{ev.WindowStart, ev.WindowEnd}})
	}
	var nOld, nNone int
	for i := range rooms {
		id := fmt.Sprintf("room-%05d", i)
		switch i % 4 {
		case 0:
			require.NotContains(t, got, id)
		case 1:
			require.Equal(t, "[06:00,00:00)", got[id])
		case 2:
			nOld++
			require.NotContains(t, got, id)
		case 3:
			nNone++
			require.Equal(t, "[00:00,00:00)", got[id])
		}
	}
	covered := int64(rooms - len(got))
	require.Equal(t, &SweepSummary{PipelineVersion: "v2", RoomsCovered: covered, Gaps: int64(len(pub.events)), OtherVersionVerdicts: int64(nOld)}, sum.Sweep)
	require.Equal(t, int64(rooms), sum.Rows)
	require.Equal(t, int64(len(pub.events)), sum.Published)
	require.NotContains(t, logs.String(), "are --primary-model", "verdicts under the version exist: no warning")

	// A dry run reads the coverage and counts the gaps, publishing nothing.
	pub2 := &fakePublisher{}
	r.Publisher, r.Config.DryRun = pub2, true
	dry, err := r.Run(context.Background())
	require.NoError(t, err)
	require.Empty(t, pub2.events)
	require.Equal(t, sum.Sweep, dry.Sweep)
}

// rolloutRooms are an hour that spans a pipeline rollout: a room reviewed
// under v1 before it and v2 after, and one reviewed only under v1.
func rolloutRooms() (*listSource, *fakeCoverage) {
	msgs := []time.Time{at(10, 0), at(40, 0)}
	room := func(id string) pipeline.ActiveRoom {
		return pipeline.ActiveRoom{RoomID: id, FirstMessageAt: msgs[0], LastMessageAt: msgs[1], MessageCount: 2, ActiveSeconds: secondsOf(msgs...)}
	}
	src := &listSource{rooms: []pipeline.ActiveRoom{room("spans"), room("old-only")}}
	cov := &fakeCoverage{windows: map[string][]pipeline.CoveredWindow{
		"spans": {{RoomID: "spans", Start: winStart, End: at(30, 0), PipelineVersion: "v1"},
			{RoomID: "spans", Start: at(30, 0), End: winEnd, PipelineVersion: "v2"}},
		"old-only": {{RoomID: "old-only", Start: winStart, End: winEnd, PipelineVersion: "v1"}},
	}}
	return src, cov
}

// TestSweepCountsAnyDoneVerdictAsCoverage: an hour that spans a model or
// prompt rollout is covered by the done verdicts of either version; the
// sweep publishes nothing and does not warn about the version.
func TestSweepCountsAnyDoneVerdictAsCoverage(t *testing.T) {
	t.Parallel()
	src, cov := rolloutRooms()
	pub := &fakePublisher{}
	var logs syncBuffer
	r := &Runner{Config: Config{WindowStart: winStart, WindowEnd: winEnd, RunID: "run-r", ProgressInterval: time.Hour, Sweep: true, PipelineVersion: "v2"},
		Source: src, Publisher: pub, Store: &fakeStore{}, Coverage: cov, Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	sum, err := r.Run(context.Background())
	require.NoError(t, err)
	require.Empty(t, pub.events, "a rollout's hour is not paid for twice")
	require.Equal(t, &SweepSummary{PipelineVersion: "v2", RoomsCovered: 2, OtherVersionVerdicts: 2}, sum.Sweep)
	require.NotContains(t, logs.String(), "are --primary-model")
}

// TestSweepRereviewsOtherVersionsOnlyWhenAsked: asked to, the sweep
// counts only its own version's verdicts and publishes the time that
// only another version's cover, counting those events.
func TestSweepRereviewsOtherVersionsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	src, cov := rolloutRooms()
	pub := &fakePublisher{}
	r := &Runner{Config: Config{WindowStart: winStart, WindowEnd: winEnd, RunID: "run-r", ProgressInterval: time.Hour, Sweep: true, PipelineVersion: "v2",
		RereviewOtherVersions: true}, Source: src, Publisher: pub, Store: &fakeStore{}, Coverage: cov}
	sum, err := r.Run(context.Background())
	require.NoError(t, err)
	got := map[string]string{}
	for _, ev := range pub.events {
		got[ev.RoomID] += render([]span{{ev.WindowStart, ev.WindowEnd}})
	}
	require.Equal(t, map[string]string{"spans": "[00:00,30:00)", "old-only": "[00:00,00:00)"}, got)
	require.Equal(t, &SweepSummary{PipelineVersion: "v2", Gaps: 2, OtherVersionVerdicts: 2, OtherVersionRereviews: 2}, sum.Sweep)
}

func TestSweepWarnsWhenNoVerdictIsUnderItsVersion(t *testing.T) {
	t.Parallel()
	room := pipeline.ActiveRoom{RoomID: "a", FirstMessageAt: at(1, 0), LastMessageAt: at(1, 0), ActiveSeconds: []int32{60}}
	cov := &fakeCoverage{windows: map[string][]pipeline.CoveredWindow{"a": {{RoomID: "a", Start: winStart, End: winEnd, PipelineVersion: "other"}}}}
	var logs syncBuffer
	pub := &fakePublisher{}
	r := &Runner{Config: Config{WindowStart: winStart, WindowEnd: winEnd, RunID: "run-w", ProgressInterval: time.Hour, Sweep: true, PipelineVersion: "mine",
		RereviewOtherVersions: true},
		Source: &listSource{rooms: []pipeline.ActiveRoom{room}}, Publisher: pub, Store: &fakeStore{}, Coverage: cov, Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	sum, err := r.Run(context.Background())
	require.NoError(t, err)
	require.Len(t, pub.events, 1)
	require.Equal(t, int64(1), sum.Sweep.OtherVersionVerdicts)
	require.Contains(t, logs.String(), "are --primary-model and --fallback-model the workers'?")
}

func TestSweepCoverageFailureFailsTheRun(t *testing.T) {
	t.Parallel()
	room := pipeline.ActiveRoom{RoomID: "a", FirstMessageAt: at(1, 0), LastMessageAt: at(1, 0)}
	store := &fakeStore{}
	r := &Runner{Config: Config{WindowStart: winStart, WindowEnd: winEnd, RunID: "run-f", ProgressInterval: time.Hour, Sweep: true, PipelineVersion: "v"},
		Source: &listSource{rooms: []pipeline.ActiveRoom{room}}, Publisher: &fakePublisher{}, Store: store, Coverage: &fakeCoverage{err: errors.New("mysql: coverage: gone")}}
	sum, err := r.Run(context.Background())
	require.ErrorContains(t, err, "sweep: mysql: coverage: gone")
	require.Equal(t, "failed", sum.Status)
	require.Equal(t, pipeline.BatchRunFailed, store.all()[0].Status)

	// Without a coverage source or a version the sweep does not start.
	r.Coverage, r.Config.PipelineVersion = nil, ""
	_, err = r.Run(context.Background())
	require.ErrorContains(t, err, "no coverage source")
	require.ErrorContains(t, err, "pipeline version")
}
