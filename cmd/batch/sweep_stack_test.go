package main

// The sweep on the local stack: the Athena stand-in over a lake written
// here, fauxqs, and verdicts saved in the stack's MariaDB as the workers
// would have saved real time's.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/batchrun"
	"github.com/chatguard/chatguard/stages"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

// writeLake writes msgs into their dt/hour partitions of a fresh lake and
// returns the lake directory.
func writeLake(t testing.TB, msgs []messageRow) string {
	t.Helper()
	dir := t.TempDir()
	parts := map[string][]messageRow{}
	for _, m := range msgs {
		p := filepath.Join(dir, "chat", "messages", "dt="+m.SentAt.UTC().Format(time.DateOnly), "hour="+m.SentAt.UTC().Format("15"))
		parts[p] = append(parts[p], m)
	}
	for p, rows := range parts {
		require.NoError(t, os.MkdirAll(p, 0o755))
		f, err := os.Create(filepath.Join(p, "part-00000.parquet"))
		require.NoError(t, err)
		w := parquet.NewGenericWriter[messageRow](f)
		_, err = w.Write(rows)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		require.NoError(t, f.Close())
	}
	return dir
}

// sweepHour is the hour the sweep tests sweep; flushHour the one after,
// whose real-time state was lost to a Redis flush.
var (
	sweepHour = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	flushHour = sweepHour.Add(time.Hour)
)

// hm is minute m, second s of the sweep hour.
func hm(m, s int) time.Time {
	return sweepHour.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
}

// sweepRoom is one room of the sweep test: its messages, the verdicts real
// time left, and the gaps the sweep must publish.
type sweepRoom struct {
	id       string
	messages []time.Time
	verdicts []sweepVerdict
	want     []string // "mm:ss-mm:ss", in order
}

type sweepVerdict struct {
	start, end time.Time
	models     string // the primary model whose pipeline version it was saved under
	status     pipeline.Status
}

const sweepModel = "judge-a"

func done(start, end time.Time) sweepVerdict {
	return sweepVerdict{start, end, sweepModel, pipeline.StatusDone}
}

var sweepRooms = []sweepRoom{
	{id: "steady", messages: []time.Time{hm(1, 0), hm(1, 30), hm(20, 0), hm(59, 30)},
		verdicts: []sweepVerdict{done(hm(0, 0), hm(2, 30)), done(hm(19, 0), hm(21, 0)), done(hm(58, 30), hm(60, 30))}},
	{id: "steady-batch", messages: []time.Time{hm(7, 0)}, verdicts: []sweepVerdict{done(hm(0, 0), hm(60, 0))}},
	{id: "failed", messages: []time.Time{hm(5, 0), hm(30, 0)},
		verdicts: []sweepVerdict{done(hm(4, 0), hm(6, 0)), {hm(29, 0), hm(31, 0), sweepModel, pipeline.StatusFailed}},
		want:     []string{"06:00-60:00"}},
	{id: "expired", messages: []time.Time{hm(12, 0)},
		verdicts: []sweepVerdict{{hm(11, 0), hm(13, 0), sweepModel, pipeline.StatusExpired}},
		want:     []string{"00:00-60:00"}},
	// A dead-lettered review event leaves no verdict at all for its window.
	{id: "dead-lettered", messages: []time.Time{hm(15, 0), hm(45, 0)},
		verdicts: []sweepVerdict{done(hm(14, 0), hm(16, 0))},
		want:     []string{"16:00-60:00"}},
	// A rollout in the hour: reviewed under the older version before it and
	// this one after; either is coverage, so the hour is not paid twice.
	{id: "rollout", messages: []time.Time{hm(3, 0), hm(40, 0)},
		verdicts: []sweepVerdict{{hm(0, 0), hm(30, 0), "judge-old", pipeline.StatusDone}, done(hm(30, 0), hm(60, 0))}},
	{id: "partial", messages: []time.Time{hm(10, 0), hm(25, 0), hm(40, 0), hm(50, 0)},
		verdicts: []sweepVerdict{done(hm(9, 0), hm(11, 0)), done(hm(49, 0), hm(51, 0)), done(hm(30, 0), hm(35, 0))},
		want:     []string{"11:00-30:00", "35:00-49:00"}},
	{id: "no-real-time", messages: []time.Time{hm(33, 0)}, want: []string{"00:00-60:00"}},
}

// flushRooms are the rooms of the flushed hour: messages, no verdicts.
const flushRooms = 40

func sweepLake(t *testing.T) (string, map[string][]time.Time) {
	var msgs []messageRow
	flushed := map[string][]time.Time{}
	add := func(room string, at time.Time) {
		msgs = append(msgs, messageRow{RoomID: room, MessageID: fmt.Sprintf("%s-%d", room, len(msgs)), SenderID: "u1",
			SenderRole: "buyer", SentAt: at, Kind: "text", Text: "hello"})
	}
	for _, r := range sweepRooms {
		for _, at := range r.messages {
			add(r.id, at)
		}
	}
	for i := range flushRooms {
		room := fmt.Sprintf("flushed-%02d", i)
		for j := range 1 + i%3 {
			at := flushHour.Add(time.Duration(i*83+j*1201) * time.Second % time.Hour)
			flushed[room] = append(flushed[room], at)
			add(room, at)
		}
	}
	return writeLake(t, msgs), flushed
}

// saveVerdict saves a verdict as a worker would have.
func saveVerdict(t *testing.T, s *mysql.Store, room string, v sweepVerdict) {
	t.Helper()
	sv := storetest.SampleVerdict(room)
	sv.Key.WindowStart, sv.Key.WindowEnd, sv.Status = v.start, v.end, v.status
	sv.Key.PipelineVersion = stages.Fingerprint(v.models, "")
	sv.RunID = pipeline.RealtimeRunID(v.end)
	if v.status != pipeline.StatusDone {
		sv.Label, sv.Category, sv.Severity, sv.Action, sv.Error = "", "", 0, "", "review "+string(v.status)
	}
	storetest.MustSave(t, context.Background(), s, sv)
}

func span(ev pipeline.ReviewEvent) string {
	f := func(t time.Time) string {
		d := t.Sub(ev.WindowStart.Truncate(time.Hour))
		return fmt.Sprintf("%02d:%02d", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	return f(ev.WindowStart) + "-" + f(ev.WindowEnd)
}

// TestSweepPublishesWhatRealTimeDidNotCover runs the whole command in sweep
// mode over an hour whose rooms real time covered in every way it can
// (entirely, also across a pipeline rollout; with a failed, expired or
// dead-lettered window; partly; not at all), then over the next hour, whose
// real-time state a Redis flush lost, then over the first again once the
// workers reviewed the gaps: the steady state publishes nothing.
func TestSweepPublishesWhatRealTimeDidNotCover(t *testing.T) {
	lake, flushed := sweepLake(t)
	e := setupStack(t, lake)
	e.vars["CHATGUARD_SWEEP"] = "true"
	e.vars["CHATGUARD_PRIMARY_MODEL"] = sweepModel
	store := mysql.New(e.db)
	for _, r := range sweepRooms {
		for _, v := range r.verdicts {
			saveVerdict(t, store, r.id, v)
		}
	}
	args := []string{"--window-start", sweepHour.Format(time.RFC3339)}

	o := e.run(t, context.Background(), args...)
	require.Equal(t, 0, o.code, o.stderr)
	want := map[string][]string{}
	nWant := 0
	for _, r := range sweepRooms {
		if r.want != nil {
			want[r.id], nWant = r.want, nWant+len(r.want)
		}
	}
	evs := drain(t, e.queue.URL, nWant)
	got := map[string][]string{}
	for _, ev := range evs {
		require.Equal(t, pipeline.SourceSweep, ev.Source)
		require.Equal(t, RunIDFor(sweepHour, sweepHour.Add(time.Hour)), ev.RunID, "the batch's run id")
		got[ev.RoomID] = append(got[ev.RoomID], span(ev))
	}
	for _, g := range got {
		slices.Sort(g)
	}
	require.Equal(t, want, got)
	require.Equal(t, int64(len(sweepRooms)), o.summary.Rows)
	require.Equal(t, int64(nWant), o.summary.Published)
	require.Equal(t, &batchrun.SweepSummary{PipelineVersion: stages.Fingerprint(sweepModel, ""), RoomsCovered: 3, Gaps: int64(nWant), OtherVersionVerdicts: 1}, o.summary.Sweep)

	// The workers review the gaps; the same sweep again finds everything
	// covered and publishes nothing: the steady state.
	for _, ev := range evs {
		saveVerdict(t, store, ev.RoomID, done(ev.WindowStart, ev.WindowEnd))
	}
	o = e.run(t, context.Background(), args...)
	require.Equal(t, 0, o.code, o.stderr)
	require.Zero(t, o.summary.Published)
	require.Equal(t, int64(len(sweepRooms)), o.summary.Sweep.RoomsCovered)
	require.Equal(t, 2, o.summary.Attempt, "a rerun of the window is a new attempt of its run")

	// The flushed hour: no real-time verdict at all. Every message of the
	// hour is covered by a sweep event of its room.
	o = e.run(t, context.Background(), "--window-start", flushHour.Format(time.RFC3339))
	require.Equal(t, 0, o.code, o.stderr)
	require.Equal(t, int64(flushRooms), o.summary.Published)
	evs = drain(t, e.queue.URL, flushRooms)
	require.Len(t, evs, flushRooms)
	for _, ev := range evs {
		for _, at := range flushed[ev.RoomID] {
			require.True(t, !at.Before(ev.WindowStart) && at.Before(ev.WindowEnd), "%s's message at %s is in [%s, %s)", ev.RoomID, at, ev.WindowStart, ev.WindowEnd)
		}
		delete(flushed, ev.RoomID)
	}
	require.Empty(t, flushed, "every room of the flushed hour was swept")
}

// TestSweepRefusesToRunBeforeTheGrace runs a sweep one instant before its
// window's end plus the grace less --sweep-wait, on an injected clock: it
// fails without starting anything (no Athena, SQS or MySQL is configured),
// with a summary and an error that says when to rerun, and Airflow's retry
// exit code.
func TestSweepRefusesToRunBeforeTheGrace(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.Sweep, cfg.PrimaryModel, cfg.SweepGrace = true, sweepModel, 20*time.Minute
	cfg.WindowStart = sweepHour
	cfg = cfg.WithDefaultWindow(sweepHour)
	due := sweepHour.Add(time.Hour + 20*time.Minute)
	var out, errb bytes.Buffer
	m := &Main{Config: cfg, Stdout: &out, Stderr: &errb, Clock: clock.NewFake(due.Add(-cfg.SweepWait - time.Nanosecond))}
	err := m.Run(context.Background())
	require.ErrorIs(t, err, ErrSweepTooEarly)
	require.ErrorContains(t, err, "before 2026-11-01T01:20:00Z (window end + --sweep-grace 20m0s)")
	require.Contains(t, out.String(), `"status":"failed"`)
	require.Contains(t, out.String(), "too early to sweep")

	p := &parts{m: &Main{}, cfg: cfg, began: due}
	require.NoError(t, p.sweepDue(context.Background(), clock.NewFake(due)), "at the due time the sweep runs")
	p.cfg.Sweep = false
	p.began = sweepHour
	require.NoError(t, p.sweepDue(context.Background(), clock.NewFake(sweepHour)), "without --sweep there is no grace")

	// Through the command: a window that has not even begun, further off
	// than --sweep-wait, exits 1, the failed-run status Airflow retries.
	start := time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
	var out2, errb2 bytes.Buffer
	code := run(context.Background(), []string{"--sweep", "--window-start", start.Format(time.RFC3339)},
		func(k string) string {
			return map[string]string{"CHATGUARD_PRIMARY_MODEL": sweepModel, "CHATGUARD_MYSQL_DSN": "u@tcp(127.0.0.1:1)/none",
				"CHATGUARD_REVIEW_QUEUE_URL": "http://127.0.0.1:1/q"}[k]
		}, &out2, &errb2)
	require.Equal(t, 1, code, errb2.String())
	require.True(t, strings.Contains(errb2.String(), "too early to sweep the window"), errb2.String())
}

// TestSweepStartedAtTheHourWaitsForItsGrace is the pod Airflow starts at
// the hour when the overlay's values set sweep mode (no DAG sensor): it
// waits on the clock until window end + grace, then runs; cancelled while
// waiting, it returns the cancellation.
func TestSweepStartedAtTheHourWaitsForItsGrace(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	hourEnd := sweepHour.Add(time.Hour)
	cfg.Sweep, cfg.PrimaryModel, cfg.WindowStart, cfg.WindowEnd = true, sweepModel, sweepHour, hourEnd
	// A bound on each wait for the goroutine to reach its timer, so that a
	// sweep that does not wait fails the test instead of hanging it.
	bounded, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	clk := clock.NewFake(hourEnd)
	p := &parts{m: &Main{}, cfg: cfg, began: hourEnd, now: clk.Now}
	done := make(chan error, 1)
	go func() { done <- p.sweepDue(context.Background(), clk) }()
	require.NoError(t, clk.BlockUntilContext(bounded, 1), "the sweep waits on the clock")
	clk.Advance(DefaultSweepGrace - time.Second)
	select {
	case err := <-done:
		t.Fatalf("the sweep ran %s before its grace: %v", time.Second, err)
	default:
	}
	clk.Advance(time.Second)
	require.NoError(t, <-done)
	require.Equal(t, hourEnd.Add(DefaultSweepGrace), p.began, "the run's start is when it stopped waiting")

	ctx, cancel := context.WithCancel(context.Background())
	p = &parts{m: &Main{}, cfg: cfg, began: hourEnd, now: clk.Now}
	clk2 := clock.NewFake(hourEnd)
	go func() { done <- p.sweepDue(ctx, clk2) }()
	require.NoError(t, clk2.BlockUntilContext(bounded, 1))
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}
