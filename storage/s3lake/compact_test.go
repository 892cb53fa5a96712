package s3lake_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

func TestCompactStoreConformance(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		s3laketest.RunCompactStore(t, s3laketest.NewMemStore(), "suite/")
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		store := s3lake.NewStore(stacktest.S3(t), stacktest.NewBucket(t, "compact"), 0)
		s3laketest.RunCompactStore(t, store, stacktest.Unique("suite")+"/")
	})
}

func TestPlanCompaction(t *testing.T) {
	t.Parallel()
	const dir = "events/event_type=verdict/dt=2025-03-14/hour=09/"
	o := func(name string, size int64) s3lake.ObjectInfo { return s3lake.ObjectInfo{Key: dir + name, Size: size} }
	keys := func(groups [][]s3lake.ObjectInfo) [][]string {
		var out [][]string
		for _, g := range groups {
			var ks []string
			for _, x := range g {
				ks = append(ks, strings.TrimPrefix(x.Key, dir))
			}
			out = append(out, ks)
		}
		return out
	}
	tests := []struct {
		name string
		objs []s3lake.ObjectInfo
		want [][]string
	}{
		{"nothing", nil, nil},
		{"one small object is left alone", []s3lake.ObjectInfo{o("part-a.parquet", 10)}, nil},
		{"small objects become one, in key order",
			[]s3lake.ObjectInfo{o("part-c.parquet", 10), o("part-a.parquet", 10), o("part-b.parquet", 10)},
			[][]string{{"part-a.parquet", "part-b.parquet", "part-c.parquet"}}},
		{"groups stop at the target",
			[]s3lake.ObjectInfo{o("part-a.parquet", 60), o("part-b.parquet", 30), o("part-c.parquet", 30), o("part-d.parquet", 50), o("part-e.parquet", 50)},
			[][]string{{"part-a.parquet", "part-b.parquet"}, {"part-c.parquet", "part-d.parquet"}}},
		{"a finished output is left alone; a small one merges with late parts",
			[]s3lake.ObjectInfo{o("compact-big.parquet", 50), o("compact-small.parquet", 20), o("part-late.parquet", 1)},
			[][]string{{"compact-small.parquet", "part-late.parquet"}}},
		{"other files are ignored",
			[]s3lake.ObjectInfo{o("part-a.parquet", 1), o("_SUCCESS", 0), o("part-b.parquet.tmp", 1)},
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, keys(s3lake.PlanCompaction(tc.objs, 100)))
		})
	}
}

func TestClosedHours(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 14, 12, 30, 0, 0, time.UTC)
	hours := s3lake.ClosedHours(now, time.Hour, 4*time.Hour)
	// 11:00-12:00 ended 30 minutes ago: still in its grace period.
	require.Equal(t, []time.Time{
		time.Date(2025, 3, 14, 8, 0, 0, 0, time.UTC),
		time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC),
		time.Date(2025, 3, 14, 10, 0, 0, 0, time.UTC),
	}, hours)
	require.Empty(t, s3lake.ClosedHours(now, 0, time.Hour)[1:], "a lookback of an hour covers the one just closed")
}

// smallLake writes evs as the consumer would over time: each partition's
// events in parts objects, every event received at base plus its index in
// seconds. It returns the events by id with their received times.
func smallLake(t *testing.T, store s3lake.Putter, evs []pipeline.LakeEvent, parts int, base time.Time) map[string]pipeline.LakeRecord {
	t.Helper()
	lake, err := s3lake.NewLake(store, s3lake.DefaultEventsPrefix, s3lake.DefaultErrorsPrefix)
	require.NoError(t, err)
	byPart := map[pipeline.LakePartition][]pipeline.LakeRecord{}
	all := map[string]pipeline.LakeRecord{}
	for i, ev := range evs {
		rec := pipeline.LakeRecord{LakeEvent: ev, ReceivedAt: base.Add(time.Duration(i) * time.Second)}
		p := pipeline.LakePartition{Type: ev.EventType, Hour: pipeline.LakeHour(ev.OccurredAt)}
		byPart[p] = append(byPart[p], rec)
		all[ev.EventID] = rec
	}
	for p, recs := range byPart {
		for chunk := range slices.Chunk(recs, max(1, (len(recs)+parts-1)/parts)) {
			ids := make([]string, len(chunk))
			for i, r := range chunk {
				ids[i] = r.EventID + r.ReceivedAt.String()
			}
			obj, err := lake.EncodeEvents(p, ids, chunk)
			require.NoError(t, err)
			require.NoError(t, lake.Put(t.Context(), obj))
		}
	}
	return all
}

func compactor(t *testing.T, store s3lake.CompactStore, now time.Time, edit func(*s3lake.CompactConfig)) *s3lake.Compactor {
	t.Helper()
	cfg := s3lake.DefaultCompactConfig()
	cfg.Lookback = 24 * time.Hour
	cfg.TargetBytes = 8 << 20
	cfg.Retry = retry.Policy{Initial: time.Millisecond, Max: time.Millisecond, Attempts: 2}
	cfg.Logger = slog.New(slog.DiscardHandler)
	if edit != nil {
		edit(&cfg)
	}
	c, err := s3lake.NewCompactor(store, cfg, s3lake.CompactClock(noWaits{clock.NewFake(now)}))
	require.NoError(t, err)
	return c
}

// noWaits is a clock whose timers, the waits between retries of an S3
// call, end at once.
type noWaits struct{ *clock.Fake }

func (c noWaits) NewTimer(time.Duration) clock.Timer { return c.Fake.NewTimer(0) }

// lakeState checks that every event of want is in the lake, each exactly
// once when once is set, and returns the objects per partition directory.
// It is safe to call from any goroutine.
func lakeState(ctx context.Context, store *s3laketest.MemStore, want map[string]pipeline.LakeRecord, once bool) (map[string]int, error) {
	c, err := s3laketest.ReadLake(ctx, store, s3lake.DefaultEventsPrefix, "")
	if err != nil {
		return nil, err
	}
	_, copies := c.ByID()
	for id := range want {
		switch {
		case copies[id] == 0:
			return nil, fmt.Errorf("event %s is missing", id)
		case once && copies[id] != 1:
			return nil, fmt.Errorf("event %s is there %d times", id, copies[id])
		}
	}
	if len(copies) != len(want) {
		return nil, fmt.Errorf("%d events in the lake, want %d", len(copies), len(want))
	}
	perDir := map[string]int{}
	keys, err := store.List(ctx, s3lake.DefaultEventsPrefix)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		perDir[k[:strings.LastIndexByte(k, '/')+1]]++
	}
	return perDir, nil
}

func requireLake(t *testing.T, store *s3laketest.MemStore, want map[string]pipeline.LakeRecord, once bool) map[string]int {
	t.Helper()
	perDir, err := lakeState(t.Context(), store, want, once)
	require.NoError(t, err)
	return perDir
}

var compactStart = time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)

func TestCompactMergesClosedHoursOnceAndIdempotently(t *testing.T) {
	t.Parallel()
	store := s3laketest.NewMemStore()
	evs := s3laketest.Events(480, 7, compactStart, 4)
	want := smallLake(t, store, evs, 4, compactStart.Add(time.Minute))
	// Copies of 100 events received later, in objects of their own: a
	// consumer that wrote and crashed before deleting.
	later := smallLake(t, store, evs[:100], 1, compactStart.Add(30*time.Minute))
	require.Len(t, later, 100)

	before := requireLake(t, store, want, false)
	require.Len(t, before, 12, "3 types x 4 hours")
	for dir, n := range before {
		require.GreaterOrEqual(t, n, 4, dir)
	}

	// 04:30 with a grace of 1h: hours 00..02 are closed, 03 is not.
	now := compactStart.Add(4*time.Hour + 30*time.Minute)
	var (
		logged []string
		seen   []error
	)
	report, err := compactor(t, store, now, func(c *s3lake.CompactConfig) {
		// One partition at a time, so that reading the whole lake does not
		// race with another partition's deletes.
		c.Concurrency = 1
		c.AfterWrite = func(ctx context.Context, p pipeline.LakePartition, written []string) {
			// Readers in this moment still find every event (twice).
			_, err := lakeState(ctx, store, want, false)
			seen = append(seen, err)
			logged = append(logged, written...)
		}
	}).Run(t.Context())
	require.NoError(t, err)
	require.NoError(t, errors.Join(seen...))
	open := compactStart.Add(3 * time.Hour)
	closed := len(evs) - len(filterHour(evs, open))
	require.Equal(t, 9, report.Compacted)
	require.Equal(t, closed+100-len(filterHour(evs[:100], open)), report.RowsIn)
	require.Equal(t, closed, report.RowsOut, "duplicates are dropped")
	require.Len(t, logged, 9)

	after := requireLake(t, store, want, false)
	for dir, n := range after {
		if strings.Contains(dir, "hour=03/") {
			require.Equal(t, before[dir], n, "the open hour %s is left alone", dir)
			continue
		}
		require.Equal(t, 1, n, dir)
	}
	// The compacted objects hold each event once, its earliest copy.
	for _, key := range logged {
		data, err := store.Get(t.Context(), key)
		require.NoError(t, err)
		typ := pipeline.EventType(strings.TrimPrefix(strings.Split(key, "/")[1], "event_type="))
		recs, err := s3lake.ReadRecords(typ, data)
		require.NoError(t, err)
		for _, r := range recs {
			require.Equal(t, want[r.EventID].ReceivedAt, r.ReceivedAt, "the earliest received copy is kept")
		}
	}

	// A second run changes nothing.
	snapshot := func() map[string]string {
		out := map[string]string{}
		keys, err := store.List(t.Context(), "")
		require.NoError(t, err)
		for _, k := range keys {
			b, err := store.Get(t.Context(), k)
			require.NoError(t, err)
			out[k] = string(b)
		}
		return out
	}
	s1 := snapshot()
	report, err = compactor(t, store, now, nil).Run(t.Context())
	require.NoError(t, err)
	require.Zero(t, report.Compacted)
	require.Equal(t, report.ObjectsBefore, report.ObjectsAfter)
	require.Equal(t, s1, snapshot())
}

func filterHour(evs []pipeline.LakeEvent, hour time.Time) []pipeline.LakeEvent {
	var out []pipeline.LakeEvent
	for _, ev := range evs {
		if pipeline.LakeHour(ev.OccurredAt).Equal(hour) {
			out = append(out, ev)
		}
	}
	return out
}

func TestCompactTwoRunsWithDifferentListingsLoseNothingAndConverge(t *testing.T) {
	t.Parallel()
	store := s3laketest.NewMemStore()
	evs := s3laketest.Events(450, 11, compactStart, 1)
	want := smallLake(t, store, evs, 5, compactStart.Add(time.Minute))
	now := compactStart.Add(3 * time.Hour)
	late := s3laketest.Events(30, 12, compactStart, 1)

	// Run B starts after run A wrote its outputs and before A deletes its
	// inputs; a late event lands in between, so B sees A's outputs, A's
	// inputs and the late object.
	lateRecs := smallLake(t, s3laketest.NewMemStore(), late, 1, compactStart.Add(2*time.Hour))
	lateLake, err := s3lake.NewLake(store, s3lake.DefaultEventsPrefix, s3lake.DefaultErrorsPrefix)
	require.NoError(t, err)
	b := compactor(t, store, now, nil)
	var (
		once sync.Once
		bErr error
	)
	a := compactor(t, store, now, func(c *s3lake.CompactConfig) {
		c.Concurrency = 1
		c.AfterWrite = func(ctx context.Context, p pipeline.LakePartition, written []string) {
			once.Do(func() {
				for id, r := range lateRecs {
					want[id] = r
					obj, err := lateLake.EncodeEvents(pipeline.LakePartition{Type: r.EventType, Hour: pipeline.LakeHour(r.OccurredAt)}, []string{id}, []pipeline.LakeRecord{r})
					bErr = errors.Join(bErr, err, lateLake.Put(ctx, obj))
				}
				_, err := b.Run(ctx)
				bErr = errors.Join(bErr, err)
			})
		}
	})
	_, err = a.Run(t.Context())
	require.NoError(t, err)
	require.NoError(t, bErr)
	requireLake(t, store, want, false)

	// A third run merges what the two left behind.
	_, err = compactor(t, store, now, nil).Run(t.Context())
	require.NoError(t, err)
	for dir, n := range requireLake(t, store, want, true) {
		require.Equal(t, 1, n, dir)
	}
}

func TestCompactConcurrentRunsRace(t *testing.T) {
	t.Parallel()
	store := s3laketest.NewMemStore()
	want := smallLake(t, store, s3laketest.Events(600, 13, compactStart, 2), 4, compactStart.Add(time.Minute))
	now := compactStart.Add(4 * time.Hour)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = compactor(t, store, now, nil).Run(context.Background())
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	requireLake(t, store, want, false)
	_, err := compactor(t, store, now, nil).Run(t.Context())
	require.NoError(t, err)
	for dir, n := range requireLake(t, store, want, true) {
		require.Equal(t, 1, n, dir)
	}
}

func TestCompactFailuresLoseNothing(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"list", "get", "put", "delete"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			store := s3laketest.NewMemStore()
			want := smallLake(t, store, s3laketest.Events(300, 17, compactStart, 1), 3, compactStart.Add(time.Minute))
			now := compactStart.Add(3 * time.Hour)
			boom := errors.New("injected " + op + " failure")
			store.SetFail(func(o, key string) error {
				if o == op && strings.Contains(key, "event_type=verdict") {
					return pipeline.Retryable(boom, 0)
				}
				return nil
			})
			report, err := compactor(t, store, now, nil).Run(t.Context())
			require.ErrorIs(t, err, boom)
			if op != "list" {
				require.Equal(t, 1, report.Failed, "only the verdict partition fails")
			}
			store.SetFail(nil)
			requireLake(t, store, want, false)

			_, err = compactor(t, store, now, nil).Run(t.Context())
			require.NoError(t, err)
			for dir, n := range requireLake(t, store, want, true) {
				require.Equal(t, 1, n, dir)
			}
		})
	}
}

func TestCompactDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	store := s3laketest.NewMemStore()
	smallLake(t, store, s3laketest.Events(300, 19, compactStart, 1), 3, compactStart.Add(time.Minute))
	before, err := store.List(t.Context(), "")
	require.NoError(t, err)
	report, err := compactor(t, store, compactStart.Add(3*time.Hour), func(c *s3lake.CompactConfig) { c.DryRun = true }).Run(t.Context())
	require.NoError(t, err)
	require.Equal(t, 3, report.Compacted)
	require.Equal(t, 3, report.ObjectsAfter, fmt.Sprint(report))
	after, err := store.List(t.Context(), "")
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func TestCompactConfigValidate(t *testing.T) {
	t.Parallel()
	cfg := s3lake.DefaultCompactConfig()
	require.NoError(t, cfg.Validate())
	cfg.TargetBytes, cfg.Grace, cfg.Lookback, cfg.Concurrency = 10, -time.Second, time.Minute, 0
	err := cfg.Validate()
	require.Error(t, err)
	for _, flag := range []string{"--compact-target-bytes", "--compact-grace", "--compact-lookback", "--compact-concurrency"} {
		require.ErrorContains(t, err, flag)
	}
}

// A review rerun after a crash re-emits its events with the same ids an
// hour later; the views cannot see across hours, so compacting the later
// hour drops the copies the earlier hour holds.
func TestCompactDropsCopiesOfEventsThePreviousHourHolds(t *testing.T) {
	t.Parallel()
	store := s3laketest.NewMemStore()
	evs := filterHour(s3laketest.Events(300, 29, compactStart, 1), compactStart)
	want := smallLake(t, store, evs, 3, compactStart.Add(time.Minute))
	var rerun []pipeline.LakeEvent
	for _, ev := range evs[:20] {
		ev.OccurredAt = ev.OccurredAt.Add(time.Hour)
		rerun = append(rerun, ev)
	}
	// The rerun's copies, and some events of the later hour of its own.
	later := s3laketest.Events(60, 31, compactStart.Add(time.Hour), 1)
	for id, r := range smallLake(t, store, append(rerun, later...), 2, compactStart.Add(65*time.Minute)) {
		if _, ok := want[id]; !ok {
			want[id] = r
		}
	}
	_, err := compactor(t, store, compactStart.Add(4*time.Hour), nil).Run(t.Context())
	require.NoError(t, err)
	c, err := s3laketest.ReadLake(t.Context(), store, s3lake.DefaultEventsPrefix, "")
	require.NoError(t, err)
	byID, copies := c.ByID()
	require.Len(t, copies, len(want))
	for id := range want {
		require.Equal(t, 1, copies[id], "event %s once across the two hours", id)
	}
	for _, ev := range evs[:20] {
		require.Equal(t, ev.OccurredAt, byID[ev.EventID].OccurredAt, "the earlier copy is kept")
	}
}
