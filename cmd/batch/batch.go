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
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/batchrun"
	"github.com/chatguard/chatguard/storage/athena"
	"github.com/chatguard/chatguard/storage/batchruns"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Main is one batch run: it wires storage/athena, storage/sqs and
// storage/batchruns into a batchrun.Runner and prints the run's summary.
// The API and store fields are seams for tests: nil ones are built from
// Config (AWS from the SDK's default chain, the store from Config.MySQL).
type Main struct {
	Config Config
	Log    *slog.Logger
	// Stdout gets the one-line JSON summary; Stderr the progress lines.
	Stdout, Stderr io.Writer

	Athena athena.API
	SQS    sqs.SendAPI
	Runs   pipeline.BatchRunStore
	// Coverage is a sweep's coverage reader (nil: storage/mysql over
	// Config.MySQL).
	Coverage pipeline.CoverageSource
	// Clock times the run and tells whether a sweep's grace has passed
	// (nil: the wall clock).
	Clock clock.Clock
}

// ErrSweepTooEarly is wrapped by the error of a sweep started more than
// --sweep-wait before its window's end plus --sweep-grace: real time's last
// windows of the hour may not have fired or been reviewed yet, and the
// sweep would publish them a second time. The run fails (exit 1) without
// starting, so that Airflow's retry runs it later.
var ErrSweepTooEarly = errors.New("too early to sweep the window")

// Summary is the JSON line printed on stdout when a run ends.
type Summary = batchrun.Summary

// Run performs the run (see batchrun.Runner.Run) and prints its summary on
// Stdout, on failure too. It returns an error when the run failed for any
// reason, including ctx ending (SIGTERM) and its collaborators failing to
// start (the database not answering), or when closing them failed.
func (m *Main) Run(ctx context.Context) error {
	clk := clock.Or(m.Clock)
	p := &parts{m: m, cfg: m.Config, now: func() time.Time { return clk.Now().UTC() }, result: make(chan error, 1)}
	p.began = p.now()
	if err := p.sweepDue(ctx, clk); err != nil {
		m.report(batchrun.Failed(p.cfg.runConfig(), err, 0))
		return err
	}
	p.r = &batchrun.Runner{Config: p.cfg.runConfig(), Log: m.Log, Progress: m.Stderr, Clock: clk, Store: m.Runs, Coverage: m.Coverage}
	g := lifecycle.New(m.Log, clk)
	g.Add(p.services()...)
	err := g.Run(ctx)
	select {
	case runErr := <-p.result:
		// A run cut short by the group's own stop (SIGTERM) is no failure
		// of the group's; it is the run's.
		if err == nil {
			err = runErr
		}
		return err
	default:
	}
	if !p.started {
		m.report(batchrun.Failed(p.cfg.runConfig(), err, p.now().Sub(p.began)))
	}
	return cmp.Or(err, errors.New("the run did not end"))
}

// sweepDue waits, on clk, for a sweep whose window's grace passes within
// --sweep-wait, and refuses one whose grace is further off. It returns
// ctx's error if ctx ends while waiting.
func (p *parts) sweepDue(ctx context.Context, clk clock.Clock) error {
	if !p.cfg.Sweep {
		return nil
	}
	due := p.cfg.WindowEnd.Add(p.cfg.SweepGrace)
	early := due.Sub(p.began)
	if early <= 0 {
		return nil
	}
	if early > p.cfg.SweepWait {
		return fmt.Errorf("%w [%s, %s) before %s (window end + --sweep-grace %s); it is %s, rerun then",
			ErrSweepTooEarly, p.cfg.WindowStart.Format(time.RFC3339), p.cfg.WindowEnd.Format(time.RFC3339),
			due.Format(time.RFC3339), p.cfg.SweepGrace, p.began.Format(time.RFC3339))
	}
	if p.m.Log != nil {
		p.m.Log.Info("batch: sweep waits for its window's grace", "due", due.Format(time.RFC3339), "wait", early.String())
	}
	if err := clock.Sleep(ctx, clk, early); err != nil {
		return fmt.Errorf("batch: wait for the sweep's grace: %w", err)
	}
	p.began = p.now()
	return nil
}

// parts is what the run's services build as they start: the runner's
// collaborators, those not injected from Main.
type parts struct {
	m     *Main
	cfg   Config
	now   func() time.Time
	began time.Time
	r     *batchrun.Runner
	aws   *aws.Config
	// started: the run began and reports its own summary; result gets
	// its error once it ended.
	started bool
	result  chan error
}

// services lists the run's collaborators in dependency order and the run
// last; the run's end ends the group, and the run store closes after it.
func (p *parts) services() []lifecycle.Service {
	svcs := []lifecycle.Service{{Name: "athena", Start: p.startSource}}
	if !p.cfg.DryRun {
		svcs = append(svcs, lifecycle.Service{Name: "review publisher", Start: p.startPublisher})
		if p.r.Store == nil {
			svcs = append(svcs, p.runStore())
		}
	}
	if p.cfg.Sweep && p.r.Coverage == nil {
		svcs = append(svcs, p.coverageStore())
	}
	return append(svcs, lifecycle.Service{Name: "run", Start: func(context.Context) error { p.started = true; return nil },
		Run: p.run, Drain: recordDrain})
}

// awsConfig loads the SDK's configuration once, for the clients not
// injected.
func (p *parts) awsConfig(ctx context.Context) (aws.Config, error) {
	if p.aws == nil {
		c, err := awsclient.Load(ctx, awsclient.Options{})
		if err != nil {
			return aws.Config{}, err
		}
		p.aws = &c
	}
	return *p.aws, nil
}

func (p *parts) startSource(ctx context.Context) error {
	a := p.m.Athena
	if a == nil {
		c, err := p.awsConfig(ctx)
		if err != nil {
			return err
		}
		a = awsclient.Athena(c)
	}
	src, err := athena.New(a, p.cfg.athenaConfig())
	if err != nil {
		return err
	}
	p.r.Source = src
	if p.cfg.Sweep {
		p.r.Source = src.WithActiveSeconds()
	}
	return nil
}

func (p *parts) startPublisher(ctx context.Context) error {
	s := p.m.SQS
	if s == nil {
		c, err := p.awsConfig(ctx)
		if err != nil {
			return err
		}
		s = awsclient.SQS(c)
	}
	pub, err := sqs.NewReviewPublisher(s, p.cfg.Publish)
	p.r.Publisher = pub
	return err
}

// runStore opens the batch_runs record's store from --mysql-dsn; it
// closes after the run, whose outcome it recorded.
func (p *parts) runStore() lifecycle.Service {
	var store *batchruns.Store
	return lifecycle.Service{
		Name: "run store",
		Start: func(ctx context.Context) (err error) {
			store, err = batchruns.Open(ctx, p.cfg.MySQL.DSN)
			p.r.Store = store
			return err
		},
		Stop: func(context.Context) error { return store.Close() },
	}
}

// coverageStore opens the verdicts' store a sweep reads coverage from, on
// --mysql-dsn, with one connection: the sweep reads one chunk at a time.
func (p *parts) coverageStore() lifecycle.Service {
	var db *sql.DB
	return lifecycle.Service{
		Name: "coverage store",
		Start: func(ctx context.Context) error {
			cfg := p.cfg.MySQL
			cfg.MaxOpenConns, cfg.MaxIdleConns = 1, 1
			var err error
			if db, err = mysql.OpenDB(cfg); err != nil {
				return err
			}
			s := mysql.New(db)
			p.r.Coverage = s
			pctx, cancel := context.WithTimeout(ctx, coveragePing)
			defer cancel()
			if err := s.Ping(pctx); err != nil {
				_ = db.Close()
				db = nil
				return err
			}
			return nil
		},
		Stop: func(context.Context) error {
			if db == nil {
				return nil
			}
			return db.Close()
		},
	}
}

// coveragePing bounds the coverage store's first contact.
const coveragePing = 10 * time.Second

// recordDrain bounds a run cut short by SIGTERM: it still records its
// failed outcome in batch_runs.
const recordDrain = 30 * time.Second

// run performs the run and prints its summary; its end ends the group.
func (p *parts) run(ctx context.Context) error {
	sum, err := p.r.Run(ctx)
	sum.DurationSeconds = p.now().Sub(p.began).Seconds()
	p.m.report(sum)
	p.result <- err
	return err
}

func (m *Main) report(s Summary) {
	b, err := json.Marshal(s)
	if err != nil { // a Summary always marshals; keep the contract of one line anyway
		b = []byte(`{"status":"failed","error":"summary: ` + err.Error() + `"}`)
	}
	fmt.Fprintf(m.Stdout, "%s\n", b)
}
