package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/deploy/local/chatreplay"
	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/storage/athena"
)

// The flush row: mid-replay the trigger's Redis keys are deleted (its
// rooms' activity, watermarks and due sets: what a flushed or failed-over
// Redis loses), the replay finishes, real time settles, and then the hourly
// batch runs as the sweeper over the replayed span. The replay moved the
// sample's messages onto wall time, and real time's windows are in wall
// time, so the sweep must read the same time base: the replayed messages
// are written, as the chat_messages table lays them out, into a lake of the
// run's own that an Athena stand-in of its own serves to the sweep (the
// shared stack's lake stays as seeded, and other runs never see them).

// flushSweepGrace is the --sweep-grace the flush row's sweep runs with, not
// the default 15 minutes: the replay compresses time and ends every
// conversation at once, after which every room fires within the trigger's
// --quiet (60 s, left at its default here); the watch also waits until the
// trigger holds no due room and the real-time queues are empty.
const flushSweepGrace = 75 * time.Second

// sweepWait bounds the sweep's run (Athena stand-in query and publish).
const sweepWait = 3 * time.Minute

// flushRun is the flush fault's state, advanced by the watch.
type flushRun struct {
	// at is when the keys are deleted; keys how many were.
	at      time.Time
	flushed bool
	keys    int
	// swept is set once the sweep ran; uncovered is how many released
	// messages no done verdict covered just before it.
	swept     bool
	uncovered int
	start     time.Time
	end       time.Time
	summary   sweepSummary
	// drainedAt is when the run's review queue, where the sweep
	// published, was first seen empty after it (zero while not).
	drainedAt time.Time
}

// sweepSummary is the part of a sweep's JSON summary the demo reads.
type sweepSummary struct {
	BatchSummary
	Sweep struct {
		RoomsCovered int64 `json:"rooms_covered"`
		Gaps         int64 `json:"gaps"`
	} `json:"sweep"`
}

func (f *flushRun) note() string {
	if !f.swept {
		return fmt.Sprintf("the trigger's Redis keys flushed mid-replay (%d keys); no sweep ran", f.keys)
	}
	return fmt.Sprintf("the trigger's Redis keys flushed mid-replay (%d keys), then the sweep: %d messages uncovered before it, %d gap windows published",
		f.keys, f.uncovered, f.summary.Sweep.Gaps)
}

// flushKeys deletes every key under prefix, and only those: the demo's
// trigger has a key prefix of its own (never FLUSHDB or FLUSHALL on the
// shared Redis). It returns how many it deleted.
func flushKeys(ctx context.Context, c *redis.Client, prefix string) (int, error) {
	if !strings.HasSuffix(prefix, ":") || strings.ContainsAny(prefix, `*?[]\`) || len(prefix) < len("chatguard:x:") {
		return 0, fmt.Errorf("redis: refusing to flush under %q: not a run's own key prefix", prefix)
	}
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		if k := iter.Val(); strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	if err := iter.Err(); err != nil {
		return 0, fmt.Errorf("redis: scan %s*: %w", prefix, err)
	}
	n := 0
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 500)]
		keys = keys[len(batch):]
		d, err := c.Unlink(ctx, batch...).Result()
		if err != nil {
			return n, fmt.Errorf("redis: unlink: %w", err)
		}
		n += int(d)
	}
	return n, nil
}

// dueRooms counts the rooms waiting to fire in every due set under prefix.
func dueRooms(ctx context.Context, c *redis.Client, prefix string) (int64, error) {
	iter := c.Scan(ctx, 0, prefix+"*:due", 1000).Iterator()
	var n int64
	for iter.Next(ctx) {
		m, err := c.ZCard(ctx, iter.Val()).Result()
		if err != nil {
			return 0, fmt.Errorf("redis: zcard: %w", err)
		}
		n += m
	}
	if err := iter.Err(); err != nil {
		return 0, fmt.Errorf("redis: scan due sets: %w", err)
	}
	return n, nil
}

// sweepWindow is the window the sweep reads: from the second of the first
// replayed message to just after the last (wall time, the time base of
// real time's windows), at most athena.MaxSweepWindow.
func sweepWindow(plan []chatreplay.Arrival) (time.Time, time.Time, error) {
	var lo, hi time.Time
	for _, a := range plan {
		if a.Repeat {
			continue
		}
		if at := a.Message.SentAt; lo.IsZero() || at.Before(lo) {
			lo = at
		}
		if at := a.Message.SentAt; at.After(hi) {
			hi = at
		}
	}
	if lo.IsZero() {
		return lo, hi, errors.New("sweep: the replay released no message")
	}
	start, end := lo.UTC().Truncate(time.Second), hi.UTC().Truncate(time.Second).Add(time.Second)
	if end.Sub(start) > athena.MaxSweepWindow {
		return start, end, fmt.Errorf("sweep: the replay spans %s, more than one sweep window (%s); raise --speedup", end.Sub(start), athena.MaxSweepWindow)
	}
	return start, end, nil
}

// lakeRows are the plan's messages as the lake holds them.
func lakeRows(plan []chatreplay.Arrival) []sampledata.MessageRow {
	var out []sampledata.MessageRow
	for _, a := range plan {
		if !a.Repeat {
			out = append(out, sampledata.MessageRowOf(a.RoomID, a.Message))
		}
	}
	return out
}

// flushStep injects the flush when due and, once real time has settled
// after it, runs the sweep; it reports whether the watch must go on
// waiting for the flush row (the sweep not run yet, or its review events
// not all reviewed).
func (r *runner) flushStep(ctx context.Context, rt *realtimeRun, settled bool, uncovered int) (bool, error) {
	f := rt.fault.flush
	if f == nil {
		return false, nil
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch {
	case !f.flushed:
		if time.Now().Before(f.at) {
			return true, nil
		}
		n, err := flushKeys(sctx, rt.redis, rt.keyPrefix)
		if err != nil {
			return true, err
		}
		f.flushed, f.keys = true, n
		r.step("fault: deleted the trigger's %d Redis keys (prefix %s) mid-replay", n, rt.keyPrefix)
		return true, nil
	case !f.swept:
		if !settled {
			return true, nil
		}
		start, end, err := sweepWindow(rt.plan)
		if err != nil || time.Now().Before(end.Add(flushSweepGrace)) {
			return true, err
		}
		due, err := dueRooms(sctx, rt.redis, rt.keyPrefix)
		if err != nil || due > 0 {
			return true, err
		}
		f.uncovered, f.start, f.end = uncovered, start, end
		return true, r.runSweep(ctx, rt, f)
	}
	d, err := depth(sctx, r.sqs, r.rep.Queues.Review)
	if err != nil || d.Total() > 0 {
		f.drainedAt = time.Time{}
		return true, err
	}
	if f.drainedAt.IsZero() {
		f.drainedAt = time.Now()
	}
	return false, nil
}

// sweepSettle is how long the watch still waits for coverage after the
// sweep's review events are all reviewed: a verdict commits before its
// message is deleted, so only a lagging read could still change the count.
const sweepSettle = 30 * time.Second

// gaveUp says the flush row's sweep was reviewed a while ago and the watch
// should end with what is covered: the row then fails instead of the run
// timing out.
func (f *faultRun) gaveUp() bool {
	return f != nil && f.flush != nil && !f.flush.drainedAt.IsZero() && time.Since(f.flush.drainedAt) > sweepSettle
}

// runSweep writes the replayed messages into the run's own lake, serves it
// with an Athena stand-in of the run's own, and runs `batch --sweep` over
// [f.start, f.end) against it, publishing to the run's review queue, which
// the workers poll after review-realtime.
func (r *runner) runSweep(ctx context.Context, rt *realtimeRun, f *flushRun) error {
	lakeDir := filepath.Join(r.cfg.LogDir, "sweep-lake")
	keys, err := sampledata.WriteMessages(lakeDir, "replay", lakeRows(rt.plan))
	if err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	sim, err := startProc("athenasim", r.bin("athenasim"), []string{"--addr", addr, "--lake-dir", lakeDir}, r.childEnv(nil), r.cfg.Root, r.cfg.LogDir, false)
	if err != nil {
		return err
	}
	r.procs = append(r.procs, sim)
	defer func() { _ = sim.stop(r.cfg.StopGrace) }()
	if err := waitListening(ctx, addr, 30*time.Second); err != nil {
		return fmt.Errorf("athenasim (log %s): %w", sim.Log, err)
	}
	r.step("wrote the %d replayed messages to %d chat_messages files under %s, served by athenasim (pid %d)", len(lakeRows(rt.plan)), len(keys), lakeDir, sim.PID)
	args := []string{"--sweep", "--sweep-grace", flushSweepGrace.String(), "--window-start", f.start.Format(time.RFC3339),
		"--window-end", f.end.Format(time.RFC3339), "--run-id", "sweep-" + unsafeName.ReplaceAllString(r.cfg.RunID, "-")}
	p, err := startProc("sweep", r.bin("batch"), args, r.childEnv(map[string]string{"AWS_ENDPOINT_URL_ATHENA": "http://" + addr,
		"CHATGUARD_PROGRESS_INTERVAL": "2s"}), r.cfg.Root, r.cfg.LogDir, true)
	if err != nil {
		return err
	}
	r.procs = append(r.procs, p)
	wait := time.NewTimer(sweepWait)
	defer wait.Stop()
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the sweep: %w", context.Cause(ctx))
	case <-wait.C:
		return fmt.Errorf("the sweep (pid %d) did not finish within %s; log %s", p.PID, sweepWait, p.Log)
	}
	if err := p.result(); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(lastLine(p.stdout.String())), &f.summary); err != nil {
		return fmt.Errorf("sweep summary %q: %w", p.stdout.String(), err)
	}
	if f.summary.Status != "succeeded" {
		return fmt.Errorf("sweep run %s: %s %s", f.summary.RunID, f.summary.Status, f.summary.Error)
	}
	f.swept = true
	r.step("sweep %s over %s to %s (--sweep-grace %s): %d rooms read, %d covered by real time already, %d gap windows published; %d messages were uncovered",
		f.summary.RunID, f.start.Format(time.RFC3339), f.end.Format(time.RFC3339), flushSweepGrace, f.summary.Rows, f.summary.Sweep.RoomsCovered,
		f.summary.Sweep.Gaps, f.uncovered)
	return nil
}

// waitListening waits, at most timeout, until addr accepts connections.
func waitListening(ctx context.Context, addr string, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var d net.Dialer
		c, err := d.DialContext(wctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("%s not listening within %s: %w", addr, timeout, err)
		case <-tick.C:
		}
	}
}
