package main

import (
	"errors"
	"fmt"

	"strings"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/athenaflags"
	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/batchrun"
	"github.com/chatguard/chatguard/stages"
	"github.com/chatguard/chatguard/storage/athena"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Config is everything the batch command can be told, by flag or by the
// CHATGUARD_* variable of the same name.
type Config struct {
	// Config is the run's own: --window-start, --window-end, --dry-run,
	// --max-events, --run-id and --progress-interval (the channel buffers
	// are sized from the parts at start, see runConfig).
	batchrun.Config

	// Publish is the review publisher's configuration: --review-queue-url,
	// --publish-concurrency and --publish-max-attempts.
	Publish sqs.Config
	// Athena is the query's configuration: --athena-*.
	Athena athena.Config

	// MySQL is the batch_runs record's database: --mysql-dsn, checked by
	// the store's own Validate (the record's store sizes its own pool).
	// A sweep reads the verdicts' coverage from the same database.
	MySQL mysql.Config

	// SweepGrace is how long after the window's end a sweep may start:
	// long enough for real time's last windows of the hour to fire and be
	// reviewed (the trigger's --max-delay plus review time). Sweep and
	// PipelineVersion are in batchrun.Config.
	SweepGrace time.Duration
	// SweepWait is how long a sweep started before its due time (window
	// end + SweepGrace) waits for it rather than refusing: with the mode
	// set in the batch's ConfigMap (the overlay's values), the DAG starts
	// the pod at the hour and has no sensor of its own. 0 refuses at once.
	SweepWait time.Duration
	// PrimaryModel and FallbackModel are the workers' model names, which
	// with the prompts built into this binary make the workers' pipeline
	// version (the only coverage with --sweep-rereview).
	PrimaryModel, FallbackModel string

	LogLevel string
}

// DefaultSweepGrace is --sweep-grace's default: the trigger's default
// --max-delay (5 min) plus 10 minutes for the last windows' reviews. The
// batch cannot read the trigger's setting; raise this with it.
const DefaultSweepGrace = 15 * time.Minute

// DefaultSweepWait is --sweep-wait's default: a run Airflow starts at the
// hour waits out the default grace, with room to spare, and still ends well
// inside the DAG's 45-minute execution timeout.
const DefaultSweepWait = 30 * time.Minute

// maxSweepGrace bounds --sweep-grace: a sweep a day late covers nothing
// real time could still cover, and a mistyped unit would be silent.
const maxSweepGrace = 24 * time.Hour

// DefaultConfig returns the defaults; the window stays zero until
// WithDefaultWindow fills it in from the clock.
func DefaultConfig() Config {
	return Config{
		Config:     batchrun.Config{ProgressInterval: 2 * time.Second},
		Publish:    sqs.DefaultReviewConfig(),
		Athena:     athena.DefaultConfig(),
		MySQL:      mysql.DefaultConfig(),
		SweepGrace: DefaultSweepGrace,
		SweepWait:  DefaultSweepWait,
		LogLevel:   "info",
	}
}

func (c *Config) flags() *cli.FlagSet {
	fs := cli.NewFlagSet("batch", "Publish one review event per chat room that had messages in a time window:\n"+
		"Athena query -> SQS review queue. Airflow runs it hourly. Exit 0 on success, 1 on a failed run,\n"+
		"2 on bad usage; one JSON summary line on stdout, progress on stderr.")
	fs.TimeVar(&c.WindowStart, "window-start", "window start, RFC 3339 (default: start of the previous full UTC hour)")
	fs.TimeVar(&c.WindowEnd, "window-end", "window end, exclusive, RFC 3339 (default: end of the previous full UTC hour)")
	fs.BoolVar(&c.DryRun, "dry-run", "run the query and report, publish nothing and record no run")
	fs.IntVar(&c.MaxEvents, "max-events", "publish at most this many events (0: no limit)")
	fs.StringVar(&c.RunID, "run-id", "run id stamped on every event (default: derived from the window, so reruns share it)")
	fs.StringVar(&c.Publish.URL, "review-queue-url", "SQS review queue URL")
	fs.IntVar(&c.Publish.Concurrency, "publish-concurrency", "SendMessageBatch calls in flight")
	fs.IntVar(&c.Publish.Retry.Attempts, "publish-max-attempts", "sends of one message before the run fails, the first included")
	athenaflags.Bind(fs, &c.Athena, "Athena database holding chat_messages")
	// Bound here, not with depflags.BindMySQL: the batch has no pool to
	// size, and depflags would link the model router into it.
	fs.StringVar(&c.MySQL.DSN, "mysql-dsn", "MySQL DSN for the batch_runs record and, with --sweep, the verdicts' coverage (go-sql-driver format)")
	fs.BoolVar(&c.Sweep, "sweep", "real time's sweeper: per room, publish only the parts of the window (1h at most) with messages no done verdict covers, whatever its pipeline version")
	fs.BoolVar(&c.RereviewOtherVersions, "sweep-rereview", "with --sweep: re-review time that only done verdicts of another pipeline version (before a model or prompt rollout) cover; counted in the summary's sweep.other_version_rereviews")
	fs.DurationVar(&c.SweepGrace, "sweep-grace", "with --sweep: do not run before window end + this (>= the trigger's --max-delay + review time)")
	fs.DurationVar(&c.SweepWait, "sweep-wait", "with --sweep: a run started at most this long before window end + --sweep-grace waits until then; earlier, or with 0, it refuses (exit 1)")
	fs.StringVar(&c.PrimaryModel, "primary-model", "with --sweep: the workers' --primary-model, part of their pipeline version")
	fs.StringVar(&c.FallbackModel, "fallback-model", "with --sweep: the workers' --fallback-model when they have a fallback pool, else empty")
	fs.DurationVar(&c.ProgressInterval, "progress-interval", "how often progress is printed on stderr")
	fs.StringVar(&c.LogLevel, "log-level", "debug|info|warn|error")
	return fs
}

// WithDefaultWindow fills a missing window bound: both missing means the
// previous full UTC hour before now (for a sweep, before now less the
// grace: the latest hour it may sweep); one missing means one hour from
// the other. It also derives the run id from the window when none was
// given, and a sweep's pipeline version from the model names.
func (c Config) WithDefaultWindow(now time.Time) Config {
	if c.Sweep {
		now = now.Add(-c.SweepGrace)
		c.PipelineVersion = stages.Fingerprint(c.PrimaryModel, c.FallbackModel)
	}
	switch {
	case c.WindowStart.IsZero() && c.WindowEnd.IsZero():
		c.WindowEnd = now.UTC().Truncate(time.Hour)
		c.WindowStart = c.WindowEnd.Add(-time.Hour)
	case c.WindowStart.IsZero():
		c.WindowStart = c.WindowEnd.Add(-time.Hour)
	case c.WindowEnd.IsZero():
		c.WindowEnd = c.WindowStart.Add(time.Hour)
	}
	c.WindowStart, c.WindowEnd = c.WindowStart.UTC(), c.WindowEnd.UTC()
	if c.RunID == "" {
		c.RunID = RunIDFor(c.WindowStart, c.WindowEnd)
	}
	return c
}

// RunIDFor is the run id of a window: the same window always gives the same
// id, so a rerun is recognisable in the batch_runs table and on every event.
func RunIDFor(start, end time.Time) string {
	const layout = "20060102T150405Z"
	return "batch-" + start.UTC().Format(layout) + "-" + end.UTC().Format(layout)
}

// maxWindow bounds one run; longer backfills run window by window (Airflow
// catchup) so that each keeps its own run record. It is the worker's
// default --max-window: a longer window would be dead-lettered there.
const maxWindow = pipeline.DefaultMaxWindow

// Validate reports every problem at once. It expects WithDefaultWindow to
// have run.
func (c Config) Validate() error {
	var errs []error
	if c.WindowStart.IsZero() || c.WindowEnd.IsZero() {
		errs = append(errs, errors.New("window start and end are required"))
	} else if !c.WindowEnd.After(c.WindowStart) {
		errs = append(errs, fmt.Errorf("window end %s is not after start %s", c.WindowEnd.Format(time.RFC3339), c.WindowStart.Format(time.RFC3339)))
	} else if c.WindowEnd.Sub(c.WindowStart) > maxWindow {
		errs = append(errs, fmt.Errorf("window of %s is longer than %s; backfill window by window", c.WindowEnd.Sub(c.WindowStart), maxWindow))
	}
	if c.MaxEvents < 0 {
		errs = append(errs, fmt.Errorf("max events %d must not be negative", c.MaxEvents))
	}
	if !pipeline.ValidRunID(c.RunID) {
		errs = append(errs, fmt.Errorf("run id %q %s", c.RunID, pipeline.RunIDRule))
	}
	if !c.DryRun || c.Sweep {
		if strings.TrimSpace(c.MySQL.DSN) == "" {
			errs = append(errs, c.missingDSN())
		} else if err := c.MySQL.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if !c.DryRun {
		if err := c.Publish.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("publish: %w", err))
		}
	}
	if err := c.athenaConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ProgressInterval <= 0 {
		errs = append(errs, errors.New("progress interval must be positive"))
	}
	if c.Sweep {
		errs = append(errs, c.validateSweep()...)
	}
	if _, err := cli.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// missingDSN says why the DSN is required.
func (c Config) missingDSN() error {
	if c.Sweep {
		return errors.New("mysql dsn is required with --sweep, which reads the verdicts' coverage")
	}
	return errors.New("mysql dsn is required (except with --dry-run)")
}

// validateSweep reports the problems of a sweep's settings.
func (c Config) validateSweep() []error {
	var errs []error
	if c.SweepGrace < 0 || c.SweepGrace > maxSweepGrace {
		errs = append(errs, fmt.Errorf("sweep grace %s must be within 0..%s", c.SweepGrace, maxSweepGrace))
	}
	if c.SweepWait < 0 || c.SweepWait > maxSweepGrace {
		errs = append(errs, fmt.Errorf("sweep wait %s must be within 0..%s", c.SweepWait, maxSweepGrace))
	}
	if !c.WindowStart.IsZero() && !c.WindowEnd.IsZero() {
		if c.WindowEnd.Sub(c.WindowStart) > athena.MaxSweepWindow || !c.WindowStart.Equal(c.WindowStart.Truncate(time.Second)) {
			errs = append(errs, fmt.Errorf("a sweep window must start on a whole second and last at most %s", athena.MaxSweepWindow))
		}
	}
	if strings.TrimSpace(c.PrimaryModel) == "" {
		errs = append(errs, errors.New("a sweep needs --primary-model (the workers'), which names their pipeline version"))
	}
	return errs
}

// athenaConfig is the query's configuration as the flags mean it.
func (c Config) athenaConfig() athena.Config {
	return athenaflags.Resolve(c.Athena)
}

// runConfig is the run's configuration with its channel buffers sized
// to hold a page of rooms and one full batch per send in flight.
func (c Config) runConfig() batchrun.Config {
	rc := c.Config
	rc.RoomBuffer, rc.EventBuffer = int(c.Athena.PageSize), sqs.MaxBatch*c.Publish.Concurrency
	return rc
}
