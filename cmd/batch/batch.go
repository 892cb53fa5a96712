package main

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/athena"
	"github.com/chatguard/chatguard/storage/batchruns"
	"github.com/chatguard/chatguard/storage/sqs"

	_ "github.com/go-sql-driver/mysql" // the batch_runs record
)

// RunStore records the attempts of a run; *batchruns.Store is the real one.
type RunStore interface {
	Begin(ctx context.Context, runID string, start, end time.Time) (batchruns.Run, error)
	Finish(ctx context.Context, r batchruns.Run) error
}

var _ RunStore = (*batchruns.Store)(nil)

// Main is one batch run. The API and store fields are seams for tests: nil
// ones are built from Config (AWS from the SDK's default chain).
type Main struct {
	Config Config
	Log    *slog.Logger
	// Stdout gets the one-line JSON summary; Stderr the progress lines.
	Stdout, Stderr io.Writer

	Athena athena.API
	SQS    sqs.SendAPI
	Runs   RunStore
	Now    func() time.Time
}

// Summary is the JSON line printed on stdout when a run ends.
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
}

// errMaxEvents is the cause with which the source is cut short once
// --max-events rooms have been read; it is not a failure.
var errMaxEvents = errors.New("max events reached")

// finishTimeout bounds recording the outcome, which runs on a context of
// its own so that a run cancelled by SIGTERM is still recorded as failed.
const finishTimeout = 10 * time.Second

// Run performs the run: record the attempt, query Athena, publish one
// review event per room, record the outcome, and print the summary. It
// returns an error when the run failed for any reason, including ctx ending
// (SIGTERM), in which case a running query is stopped and the attempt is
// still recorded as failed.
func (m *Main) Run(ctx context.Context) (err error) {
	cfg := m.Config
	now := m.Now
	if now == nil {
		now = func() time.Time { return time.Now().UTC() }
	}
	if m.Log == nil {
		m.Log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	began := now()
	sum := Summary{WindowStart: cfg.WindowStart, WindowEnd: cfg.WindowEnd, RunID: cfg.RunID, DryRun: cfg.DryRun}
	var (
		rec       batchruns.Run
		store     RunStore
		closeDeps = func() {}
		rows      atomic.Int64
		pub       *sqs.ReviewPublisher
		qid       atomic.Value // string
	)
	defer func() {
		sum.Rows = rows.Load()
		if pub != nil {
			st := pub.Stats()
			sum.Published, sum.Failed, sum.Calls, sum.MessagesPerCall = st.Published, st.Failed, st.Calls, st.MessagesPerCall()
		}
		if id, ok := qid.Load().(string); ok {
			sum.QueryExecutionID = id
		}
		sum.Status = string(batchruns.StatusSucceeded)
		if err != nil {
			sum.Status, sum.Error = string(batchruns.StatusFailed), err.Error()
		}
		if store != nil && rec.ID != 0 {
			rec.Status, rec.Error = batchruns.Status(sum.Status), sum.Error
			rec.QueryExecutionID, rec.Rows, rec.Published, rec.Failed = sum.QueryExecutionID, sum.Rows, sum.Published, sum.Failed
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
			if ferr := store.Finish(fctx, rec); ferr != nil {
				err = errors.Join(err, ferr)
				sum.Status, sum.Error = string(batchruns.StatusFailed), err.Error()
			}
			cancel()
		}
		closeDeps() // after Finish, which needs the database
		sum.DurationSeconds = now().Sub(began).Seconds()
		m.report(sum)
	}()

	athenaAPI, sqsAPI, store, closeDeps, err := m.deps(ctx)
	if err != nil {
		return err
	}
	src, err := athena.New(athenaAPI, cfg.athenaConfig())
	if err != nil {
		return err
	}
	if !cfg.DryRun {
		if pub, err = sqs.NewReviewPublisher(sqsAPI, cfg.publisherConfig()); err != nil {
			return err
		}
		if rec, err = store.Begin(ctx, cfg.RunID, cfg.WindowStart, cfg.WindowEnd); err != nil {
			return err
		}
		sum.Attempt = rec.Attempt
	}
	m.Log.Info("batch run started", "run_id", cfg.RunID, "attempt", rec.Attempt, "window_start", cfg.WindowStart, "window_end", cfg.WindowEnd, "dry_run", cfg.DryRun)

	stopProgress := m.progress(cfg.ProgressInterval, began, now, &rows, pub)
	defer stopProgress()

	g, gctx := errgroup.WithContext(ctx)
	srcCtx, cutSource := context.WithCancelCause(gctx)
	defer cutSource(nil)
	rooms := make(chan athena.Room, cfg.athenaConfig().PageSize)
	events := make(chan pipeline.ReviewEvent, sqs.MaxBatch*cfg.PublishConcurrency)
	// Each part keeps its own error: when one fails the others fail in
	// consequence, and the source's error (which names the query and
	// whether it was stopped) is the one worth reporting first.
	var srcErr, convErr, pubErr error
	g.Go(func() error {
		defer close(rooms)
		srcErr = m.source(srcCtx, gctx, src, &qid, rooms)
		return srcErr
	})
	g.Go(func() error {
		defer close(events)
		convErr = convert(gctx, cfg, rooms, events, &rows, cutSource)
		return convErr
	})
	if pub != nil { // a dry run sends nothing on events
		g.Go(func() error { pubErr = pub.Run(gctx, events); return pubErr })
	}
	_ = g.Wait()
	if err := cmp.Or(srcErr, convErr, pubErr); err != nil {
		// A signal is the root cause of whatever the parts reported.
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		m.Log.Error("batch run failed", "run_id", cfg.RunID, "attempt", rec.Attempt, "error", err)
		return fmt.Errorf("batch: %w", err)
	}
	m.Log.Info("batch run succeeded", "run_id", cfg.RunID, "attempt", rec.Attempt, "rows", rows.Load())
	return nil
}

// source runs the query into rooms. Being cut short by --max-events is not
// an error.
func (m *Main) source(srcCtx, gctx context.Context, src *athena.Source, qid *atomic.Value, rooms chan<- athena.Room) error {
	cfg := m.Config
	_, err := src.Rooms(srcCtx, cfg.WindowStart, cfg.WindowEnd, func(id string) {
		qid.Store(id)
		m.Log.Info("athena query started", "run_id", cfg.RunID, "query_execution_id", id)
	}, rooms)
	if err != nil && errors.Is(context.Cause(srcCtx), errMaxEvents) && gctx.Err() == nil {
		return nil
	}
	return err
}

// convert turns rooms into review events of the run, counting rows and
// cutting the source short once --max-events rooms have been read. In a dry
// run it only counts.
func convert(ctx context.Context, cfg Config, rooms <-chan athena.Room, events chan<- pipeline.ReviewEvent, rows *atomic.Int64, cutSource context.CancelCauseFunc) error {
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

// deps builds the clients that were not injected. The returned close
// function releases what deps opened.
func (m *Main) deps(ctx context.Context) (athena.API, sqs.SendAPI, RunStore, func(), error) {
	a, s, r := m.Athena, m.SQS, m.Runs
	closers := []func(){}
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	if a == nil || (s == nil && !m.Config.DryRun) {
		cfg, err := awsclient.Load(ctx, awsclient.Options{})
		if err != nil {
			return nil, nil, nil, closeAll, err
		}
		if a == nil {
			a = awsclient.Athena(cfg)
		}
		if s == nil {
			s = awsclient.SQS(cfg)
		}
	}
	if r == nil && !m.Config.DryRun {
		db, err := sql.Open("mysql", m.Config.MySQLDSN)
		if err != nil {
			return nil, nil, nil, closeAll, fmt.Errorf("batch: mysql: %w", err)
		}
		closers = append(closers, func() { _ = db.Close() })
		db.SetMaxOpenConns(2)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := db.PingContext(pctx); err != nil {
			return nil, nil, nil, closeAll, fmt.Errorf("batch: mysql: %w", err)
		}
		r = batchruns.New(db)
	}
	return a, s, r, closeAll, nil
}

// progress prints a human progress line on Stderr every interval until the
// returned stop function is called; stop waits for the printer to exit.
func (m *Main) progress(every time.Duration, began time.Time, now func() time.Time, rows *atomic.Int64, pub *sqs.ReviewPublisher) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var st sqs.ReviewStats
			if pub != nil {
				st = pub.Stats()
			}
			el := now().Sub(began)
			rate := 0.0
			if el > 0 {
				rate = float64(st.Published) / el.Seconds()
			}
			fmt.Fprintf(m.Stderr, "batch: %s rows read %d, published %d, failed %d, %.1f msg/s\n",
				el.Truncate(time.Second), rows.Load(), st.Published, st.Failed, rate)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

func (m *Main) report(s Summary) {
	b, err := json.Marshal(s)
	if err != nil { // a Summary always marshals; keep the contract of one line anyway
		b = []byte(`{"status":"failed","error":"summary: ` + err.Error() + `"}`)
	}
	fmt.Fprintf(m.Stdout, "%s\n", b)
}
