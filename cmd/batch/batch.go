package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/batchrun"
	"github.com/chatguard/chatguard/storage/athena"
	"github.com/chatguard/chatguard/storage/batchruns"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Main is one batch run: it wires storage/athena, storage/sqs and
// storage/batchruns into a batchrun.Runner and prints the run's summary.
// The API and store fields are seams for tests: nil ones are built from
// Config (AWS from the SDK's default chain, the store from Config.MySQLDSN).
type Main struct {
	Config Config
	Log    *slog.Logger
	// Stdout gets the one-line JSON summary; Stderr the progress lines.
	Stdout, Stderr io.Writer

	Athena athena.API
	SQS    sqs.SendAPI
	Runs   pipeline.BatchRunStore
	Now    func() time.Time
}

// Summary is the JSON line printed on stdout when a run ends.
type Summary = batchrun.Summary

// Run performs the run (see batchrun.Runner.Run) and prints its summary on
// Stdout, on failure too. It returns an error when the run failed for any
// reason, including ctx ending (SIGTERM) and its collaborators failing to
// start (the database not answering).
func (m *Main) Run(ctx context.Context) error {
	now := m.Now
	if now == nil {
		now = func() time.Time { return time.Now().UTC() }
	}
	began := now()
	r, closeDeps, err := m.runner(ctx, now)
	if err != nil {
		m.report(batchrun.Failed(m.Config.runConfig(), err, now().Sub(began)))
		return err
	}
	sum, err := r.Run(ctx)
	closeDeps() // after the run, whose outcome is recorded in the database
	sum.DurationSeconds = now().Sub(began).Seconds()
	m.report(sum)
	return err
}

// runner builds the run's collaborators, those not injected from Config.
// The returned close function releases what runner opened.
func (m *Main) runner(ctx context.Context, now func() time.Time) (*batchrun.Runner, func(), error) {
	cfg := m.Config
	r := &batchrun.Runner{Config: cfg.runConfig(), Log: m.Log, Progress: m.Stderr, Store: m.Runs}
	closeDeps := func() {}
	a, s := m.Athena, m.SQS
	if a == nil || (s == nil && !cfg.DryRun) {
		awsCfg, err := awsclient.Load(ctx, awsclient.Options{})
		if err != nil {
			return nil, closeDeps, err
		}
		if a == nil {
			a = awsclient.Athena(awsCfg)
		}
		if s == nil {
			s = awsclient.SQS(awsCfg)
		}
	}
	src, err := athena.New(a, cfg.athenaConfig())
	if err != nil {
		return nil, closeDeps, err
	}
	r.Source = src
	if cfg.DryRun {
		return r, closeDeps, nil
	}
	if r.Publisher, err = sqs.NewReviewPublisher(s, cfg.publisherConfig()); err != nil {
		return nil, closeDeps, err
	}
	if r.Store == nil {
		store, err := batchruns.Open(ctx, cfg.MySQLDSN)
		if err != nil {
			return nil, closeDeps, fmt.Errorf("batch: %w", err)
		}
		r.Store = store
		closeDeps = func() {
			if err := store.Close(); err != nil && m.Log != nil {
				m.Log.Warn("batch: closing the run store", "error", err)
			}
		}
	}
	return r, closeDeps, nil
}

func (m *Main) report(s Summary) {
	b, err := json.Marshal(s)
	if err != nil { // a Summary always marshals; keep the contract of one line anyway
		b = []byte(`{"status":"failed","error":"summary: ` + err.Error() + `"}`)
	}
	fmt.Fprintf(m.Stdout, "%s\n", b)
}
