package athenasim

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Defaults for the zero fields of Config.
const (
	DefaultDatabase       = "chatguard"
	DefaultBucket         = "lake"
	DefaultWorkGroup      = "primary"
	DefaultOutputLocation = "s3://athena-results/"
	DefaultMaxConcurrent  = 4
	DefaultMaxQueued      = 64
	DefaultMaxRetained    = 256
	DefaultMaxResultRows  = 500_000
)

// DefaultTables maps chatguard's Athena tables to Parquet globs relative to
// the lake root: the chat tables of the sample lake and the consumer's event
// tables. Every directory level of the form key=value becomes a string
// partition column (dt, hour, event_type), as Athena's projected partitions.
func DefaultTables() map[string]string {
	return map[string]string{
		"chat_rooms":         "chat/rooms/*/*/*.parquet",
		"chat_messages":      "chat/messages/*/*/*.parquet",
		"inference_log":      "events/event_type=inference_log/dt=*/hour=*/*.parquet",
		"moderator_feedback": "events/event_type=moderator_feedback/dt=*/hour=*/*.parquet",
		"verdict":            "events/event_type=verdict/dt=*/hour=*/*.parquet",
		"shadow_verdict":     "events/event_type=shadow_verdict/dt=*/hour=*/*.parquet",
		"protective_action":  "events/event_type=protective_action/dt=*/hour=*/*.parquet",
	}
}

// Config configures the stand-in.
type Config struct {
	// LakeDir is the local directory that backs the S3 bucket Bucket.
	LakeDir string
	// Bucket is the bucket name that s3:// table locations may use; default "lake".
	Bucket string
	// Database is the only database (schema) the server knows; default "chatguard".
	Database string
	// Tables maps table names to Parquet globs: relative to LakeDir,
	// absolute, or s3://<Bucket>/<glob>. Nil means DefaultTables().
	Tables map[string]string
	// OutputLocation is reported as the result location when a query gives
	// none; results are kept in memory, nothing is written there.
	OutputLocation string
	// MaxConcurrent bounds queries running at once; more wait as QUEUED.
	MaxConcurrent int
	// MaxQueued bounds queries queued or running; beyond it
	// StartQueryExecution answers TooManyRequestsException.
	MaxQueued int
	// MaxRetained bounds finished executions kept; the oldest are forgotten.
	MaxRetained int
	// MaxResultRows fails a query whose result is larger, to bound memory.
	MaxResultRows int
	// MinRunTime keeps every query RUNNING at least this long, so that
	// callers' polling, timeouts and StopQueryExecution can be exercised.
	// Change it at run time with SetMinRunTime or POST /admin/config.
	MinRunTime time.Duration
}

func (c Config) withDefaults() Config {
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if c.Tables == nil {
		c.Tables = DefaultTables()
	}
	if c.OutputLocation == "" {
		c.OutputLocation = DefaultOutputLocation
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = DefaultMaxQueued
	}
	if c.MaxRetained == 0 {
		c.MaxRetained = DefaultMaxRetained
	}
	if c.MaxResultRows == 0 {
		c.MaxResultRows = DefaultMaxResultRows
	}
	return c
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,127}$`)

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.LakeDir == "" {
		errs = append(errs, errors.New("lake dir is missing"))
	}
	if !identRE.MatchString(c.Database) {
		errs = append(errs, fmt.Errorf("database %q is not a lower-case identifier", c.Database))
	}
	if len(c.Tables) == 0 {
		errs = append(errs, errors.New("no tables"))
	}
	for name, loc := range c.Tables {
		if !identRE.MatchString(name) {
			errs = append(errs, fmt.Errorf("table %q is not a lower-case identifier", name))
		}
		if _, err := c.resolve(loc); err != nil {
			errs = append(errs, fmt.Errorf("table %s: %w", name, err))
		}
	}
	if c.MaxConcurrent < 1 {
		errs = append(errs, fmt.Errorf("max concurrent %d is below 1", c.MaxConcurrent))
	}
	if c.MaxQueued < c.MaxConcurrent {
		errs = append(errs, fmt.Errorf("max queued %d is below max concurrent %d", c.MaxQueued, c.MaxConcurrent))
	}
	if c.MaxRetained < 1 {
		errs = append(errs, fmt.Errorf("max retained %d is below 1", c.MaxRetained))
	}
	if c.MaxResultRows < 1 {
		errs = append(errs, fmt.Errorf("max result rows %d is below 1", c.MaxResultRows))
	}
	if c.MinRunTime < 0 {
		errs = append(errs, fmt.Errorf("min run time %s is negative", c.MinRunTime))
	}
	return errors.Join(errs...)
}

// resolve turns a table location into a local glob.
func (c Config) resolve(loc string) (string, error) {
	switch {
	case loc == "":
		return "", errors.New("empty location")
	case strings.HasPrefix(loc, "s3://"):
		rest := strings.TrimPrefix(loc, "s3://")
		bucket, key, ok := strings.Cut(rest, "/")
		if !ok || bucket != c.Bucket || key == "" {
			return "", fmt.Errorf("location %q is not under s3://%s/", loc, c.Bucket)
		}
		return filepath.Join(c.LakeDir, filepath.FromSlash(key)), nil
	case strings.Contains(loc, "://"):
		return "", fmt.Errorf("location %q has an unsupported scheme", loc)
	case filepath.IsAbs(loc):
		return filepath.Clean(loc), nil
	default:
		return filepath.Join(c.LakeDir, filepath.FromSlash(loc)), nil
	}
}
