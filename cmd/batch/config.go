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
	MySQL mysql.Config

	LogLevel string
}

// DefaultConfig returns the defaults; the window stays zero until
// WithDefaultWindow fills it in from the clock.
func DefaultConfig() Config {
	return Config{
		Config:   batchrun.Config{ProgressInterval: 2 * time.Second},
		Publish:  sqs.DefaultReviewConfig(),
		Athena:   athena.DefaultConfig(),
		MySQL:    mysql.DefaultConfig(),
		LogLevel: "info",
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
	fs.StringVar(&c.MySQL.DSN, "mysql-dsn", "MySQL DSN for the batch_runs record (go-sql-driver format)")
	fs.DurationVar(&c.ProgressInterval, "progress-interval", "how often progress is printed on stderr")
	fs.StringVar(&c.LogLevel, "log-level", "debug|info|warn|error")
	return fs
}

// WithDefaultWindow fills a missing window bound: both missing means the
// previous full UTC hour before now; one missing means one hour from the
// other. It also derives the run id from the window when none was given.
func (c Config) WithDefaultWindow(now time.Time) Config {
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
	if !c.DryRun {
		if strings.TrimSpace(c.MySQL.DSN) == "" {
			errs = append(errs, errors.New("mysql dsn is required (except with --dry-run)"))
		} else if err := c.MySQL.Validate(); err != nil {
			errs = append(errs, err)
		}
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
	if _, err := cli.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
