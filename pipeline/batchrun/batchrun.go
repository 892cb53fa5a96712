// Package batchrun is the batch's engine: one run over a time window that
// records the attempt (pipeline.BatchRunStore), lists the rooms with
// messages in the window (pipeline.RoomSource), publishes one review event
// per room (pipeline.ReviewPublisher), prints progress lines, records the
// outcome and returns a Summary. It knows its collaborators only by those
// interfaces; cmd/batch wires in storage/athena, storage/sqs and
// storage/batchruns, and tests wire in fakes.
package batchrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// Config is one run's window and limits.
type Config struct {
	// WindowStart and WindowEnd bound the window, end exclusive.
	WindowStart, WindowEnd time.Time
	// RunID is stamped on every event and names the run's record.
	RunID string
	// DryRun lists the rooms and counts them; it publishes nothing and
	// records no attempt.
	DryRun bool
	// MaxEvents stops the run, successfully, once this many rooms have
	// been read (0: no limit).
	MaxEvents int
	// ProgressInterval is how often a progress line is printed.
	ProgressInterval time.Duration
	// Sweep publishes, per room, only the parts of the window that hold
	// messages and that no done verdict covers, whatever its pipeline
	// version, with source sweep: the batch as real time's sweeper. Off,
	// every room gets one event for the whole window.
	Sweep bool
	// RereviewOtherVersions makes a sweep count as coverage only the done
	// verdicts under PipelineVersion, so that time reviewed under another
	// version (before a model or prompt rollout) is reviewed again; the
	// events that re-review such time are counted in the summary. Without
	// Sweep it changes nothing (like the model names, it is configuration
	// the batch ConfigMap holds in both modes).
	RereviewOtherVersions bool
	// PipelineVersion is the workers' pipeline version; required with
	// Sweep. The sweep counts the verdicts under other versions, and with
	// RereviewOtherVersions only its own are coverage.
	PipelineVersion string
	// RoomBuffer and EventBuffer size the channels between source,
	// conversion and publisher: a page of rooms, and a batch per send in
	// flight, so that neither side waits on the other's rhythm.
	RoomBuffer, EventBuffer int
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.WindowStart.IsZero() || c.WindowEnd.IsZero() || !c.WindowEnd.After(c.WindowStart) {
		errs = append(errs, fmt.Errorf("window [%s, %s) is empty", c.WindowStart.Format(time.RFC3339), c.WindowEnd.Format(time.RFC3339)))
	}
	if c.RunID == "" {
		errs = append(errs, errors.New("run id is required"))
	}
	if c.MaxEvents < 0 {
		errs = append(errs, fmt.Errorf("max events %d must not be negative", c.MaxEvents))
	}
	if c.ProgressInterval <= 0 {
		errs = append(errs, errors.New("progress interval must be positive"))
	}
	if c.Sweep && c.PipelineVersion == "" {
		errs = append(errs, errors.New("a sweep needs the workers' pipeline version"))
	}
	if c.RoomBuffer < 0 || c.EventBuffer < 0 {
		errs = append(errs, errors.New("buffers must not be negative"))
	}
	return errors.Join(errs...)
}

// Summary is the outcome of a run, printed by cmd/batch as one JSON line.
type Summary struct {
	WindowStart      time.Time `json:"window_start"`
	WindowEnd        time.Time `json:"window_end"`
	RunID            string    `json:"run_id"`
	Attempt          int       `json:"attempt,omitempty"`
	Status           string    `json:"status"`
	DryRun           bool      `json:"dry_run"`
	QueryExecutionID string    `json:"query_execution_id,omitempty"`
	Rows             int64     `json:"rows"`
	Published        int64     `json:"published"`
	Failed           int64     `json:"failed"`
	Calls            int64     `json:"calls"`
	MessagesPerCall  float64   `json:"messages_per_call"`
	DurationSeconds  float64   `json:"duration_s"`
	Error            string    `json:"error,omitempty"`
	// Sweep is what a sweep found; absent from other runs.
	Sweep *SweepSummary `json:"sweep,omitempty"`
}

// Failed is the summary of a run of cfg that failed with err before it
// could start (its collaborators could not be built).
func Failed(cfg Config, err error, took time.Duration) Summary {
	return Summary{WindowStart: cfg.WindowStart, WindowEnd: cfg.WindowEnd, RunID: cfg.RunID, DryRun: cfg.DryRun,
		Status: string(pipeline.BatchRunFailed), Error: err.Error(), DurationSeconds: took.Seconds()}
}

// Runner performs runs. Source is required; Publisher and Store are
// required unless Config.DryRun. Log, Progress and Clock default to
// discard, discard and the wall clock.
type Runner struct {
	Config    Config
	Source    pipeline.RoomSource
	Publisher pipeline.ReviewPublisher
	Store     pipeline.BatchRunStore
	// Coverage reads what done verdicts cover; required with Sweep.
	Coverage pipeline.CoverageSource
	Log      *slog.Logger
	// Progress gets the human progress lines; it must be safe to write
	// while Log writes, when both share a stream.
	Progress io.Writer
	// Clock times the run and its progress lines.
	Clock clock.Clock
}

// errMaxEvents is the cause with which the source is cut short once
// MaxEvents rooms have been read; it is not a failure.
var errMaxEvents = errors.New("max events reached")

// finishTimeout bounds recording the outcome, which runs on a context of
// its own so that a run cancelled by SIGTERM is still recorded as failed.
const finishTimeout = 10 * time.Second

// Run performs one run: record the attempt, list the rooms, publish one
// review event per room, record the outcome. It returns the run's Summary
// (always complete, on failure too) and an error when the run failed for
// any reason, including ctx ending (SIGTERM), in which case the source is
// stopped, ctx's cause heads the error, and the attempt is still recorded
// as failed. The error is logged here, once.
func (r *Runner) Run(ctx context.Context) (sum Summary, err error) {
	cfg := r.Config
	clk := clock.Or(r.Clock)
	log := cmp.Or(r.Log, slog.New(slog.DiscardHandler))
	began := clk.Now().UTC()
	sum = Summary{WindowStart: cfg.WindowStart, WindowEnd: cfg.WindowEnd, RunID: cfg.RunID, DryRun: cfg.DryRun}
	st := &runState{pub: r.Publisher}
	if cfg.DryRun {
		st.pub = nil // a dry run publishes nothing, whatever was wired in
	}
	defer func() {
		err = r.finish(ctx, &sum, st, err)
		sum.DurationSeconds = clk.Since(began).Seconds()
	}()

	if err := r.check(); err != nil {
		return sum, err
	}
	if !cfg.DryRun {
		if st.rec, err = r.Store.Begin(ctx, cfg.RunID, cfg.WindowStart, cfg.WindowEnd); err != nil {
			return sum, fmt.Errorf("batch: %w", err)
		}
		sum.Attempt = st.rec.Attempt
	}
	log.Info("batch run started", "run_id", cfg.RunID, "attempt", st.rec.Attempt, "window_start", cfg.WindowStart, "window_end", cfg.WindowEnd, "dry_run", cfg.DryRun, "sweep", cfg.Sweep)

	stopProgress := progress(cmp.Or(r.Progress, io.Discard), cfg.ProgressInterval, began, clk, &st.rows, st.pub)
	defer stopProgress()
	if err := r.pipe(ctx, log, st); err != nil {
		// A signal is the root cause of whatever the parts reported.
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		log.Error("batch run failed", "run_id", cfg.RunID, "attempt", st.rec.Attempt, "error", err)
		return sum, fmt.Errorf("batch: %w", err)
	}
	log.Info("batch run succeeded", "run_id", cfg.RunID, "attempt", st.rec.Attempt, "rows", st.rows.Load())
	return sum, nil
}

// runState is what one run's steps share: the recorded attempt, the rows
// read, the query id and the publisher (nil on a dry run).
type runState struct {
	rec  pipeline.BatchRun
	rows atomic.Int64
	qid  atomic.Value // string
	pub  pipeline.ReviewPublisher
	// sweep counts a sweep's findings.
	sweep sweepState
}

// pipe runs the source, the conversion and the publisher until the rooms
// run out or one of them fails, and returns the first failure worth
// reporting.
func (r *Runner) pipe(ctx context.Context, log *slog.Logger, st *runState) error {
	cfg := r.Config
	g, gctx := errgroup.WithContext(ctx)
	srcCtx, cutSource := context.WithCancelCause(gctx)
	defer cutSource(nil)
	rooms := make(chan pipeline.ActiveRoom, cfg.RoomBuffer)
	events := make(chan pipeline.ReviewEvent, cfg.EventBuffer)
	// Each part keeps its own error: when one fails the others fail in
	// consequence, and the source's error (which names the query and
	// whether it was stopped) is the one worth reporting first.
	var srcErr, convErr, pubErr error
	g.Go(func() error {
		defer close(rooms)
		srcErr = r.source(srcCtx, gctx, log, &st.qid, rooms)
		return srcErr
	})
	g.Go(func() error {
		defer close(events)
		if cfg.Sweep {
			convErr = r.sweep(gctx, log, st, rooms, events, cutSource)
		} else {
			convErr = convert(gctx, cfg, rooms, events, &st.rows, cutSource)
		}
		return convErr
	})
	if st.pub != nil { // a dry run sends nothing on events
		g.Go(func() error { pubErr = st.pub.Run(gctx, events); return pubErr })
	}
	_ = g.Wait()
	return cmp.Or(srcErr, convErr, pubErr)
}

// finish completes sum from st and records the attempt's outcome, on a
// context of its own so that a cancelled run is still recorded. It
// returns err joined with a failure to record.
func (r *Runner) finish(ctx context.Context, sum *Summary, st *runState, err error) error {
	sum.Rows = st.rows.Load()
	if st.pub != nil {
		ps := st.pub.Stats()
		sum.Published, sum.Failed, sum.Calls, sum.MessagesPerCall = ps.Published, ps.Failed, ps.Calls, ps.MessagesPerCall()
	}
	if id, ok := st.qid.Load().(string); ok {
		sum.QueryExecutionID = id
	}
	if r.Config.Sweep {
		sum.Sweep = st.sweep.summary(r.Config.PipelineVersion)
	}
	sum.Status = string(pipeline.BatchRunSucceeded)
	if err != nil {
		sum.Status, sum.Error = string(pipeline.BatchRunFailed), err.Error()
	}
	if st.rec.ID == 0 {
		return err
	}
	rec := st.rec
	rec.Status, rec.Error = pipeline.BatchRunStatus(sum.Status), sum.Error
	rec.QueryExecutionID, rec.Rows, rec.Published, rec.Failed = sum.QueryExecutionID, sum.Rows, sum.Published, sum.Failed
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if ferr := r.Store.Finish(fctx, rec); ferr != nil {
		err = errors.Join(err, ferr)
		sum.Status, sum.Error = string(pipeline.BatchRunFailed), err.Error()
	}
	return err
}

// check reports a Runner that cannot run: a bad config or a missing
// collaborator.
func (r *Runner) check() error {
	errs := []error{r.Config.Validate()}
	if r.Source == nil {
		errs = append(errs, errors.New("no room source"))
	}
	if !r.Config.DryRun && r.Publisher == nil {
		errs = append(errs, errors.New("no review publisher"))
	}
	if r.Config.Sweep && r.Coverage == nil {
		errs = append(errs, errors.New("no coverage source for the sweep"))
	}
	if !r.Config.DryRun && r.Store == nil {
		errs = append(errs, errors.New("no run store"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	return nil
}

// source runs the query into rooms. Being cut short by MaxEvents is not an
// error.
func (r *Runner) source(srcCtx, gctx context.Context, log *slog.Logger, qid *atomic.Value, rooms chan<- pipeline.ActiveRoom) error {
	cfg := r.Config
	_, err := r.Source.Rooms(srcCtx, cfg.WindowStart, cfg.WindowEnd, func(id string) {
		qid.Store(id)
		log.Info("athena query started", "run_id", cfg.RunID, "query_execution_id", id)
	}, rooms)
	if err != nil && errors.Is(context.Cause(srcCtx), errMaxEvents) && gctx.Err() == nil {
		return nil
	}
	return err
}

// convert turns rooms into review events of the run, counting rows and
// cutting the source short once MaxEvents rooms have been read. In a dry
// run it only counts.
func convert(ctx context.Context, cfg Config, rooms <-chan pipeline.ActiveRoom, events chan<- pipeline.ReviewEvent, rows *atomic.Int64, cutSource context.CancelCauseFunc) error {
	for r := range rooms {
		n := rows.Add(1)
		if !cfg.DryRun {
			ev := pipeline.ReviewEvent{RoomID: r.RoomID, WindowStart: cfg.WindowStart, WindowEnd: cfg.WindowEnd, RunID: cfg.RunID, SchemaVersion: pipeline.ReviewSchemaVersion}
			select {
			case events <- ev:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		if cfg.MaxEvents > 0 && n >= int64(cfg.MaxEvents) {
			cutSource(errMaxEvents)
			return nil
		}
	}
	return nil
}

// progress prints a human progress line on w every interval until the
// returned stop function is called; stop waits for the printer to exit.
func progress(w io.Writer, every time.Duration, began time.Time, clk clock.Clock, rows *atomic.Int64, pub pipeline.ReviewPublisher) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := clk.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.Chan():
			}
			var st pipeline.PublishStats
			if pub != nil {
				st = pub.Stats()
			}
			el := clk.Since(began)
			rate := 0.0
			if el > 0 {
				rate = float64(st.Published) / el.Seconds()
			}
			fmt.Fprintf(w, "batch: %s rows read %d, published %d, failed %d, %.1f msg/s\n",
				el.Truncate(time.Second), rows.Load(), st.Published, st.Failed, rate)
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}
