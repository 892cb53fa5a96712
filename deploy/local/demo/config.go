// Package demo runs the whole chatguard pipeline once on the local stack:
// it builds the three binaries, applies the migrations to a fresh
// database, publishes a window of the sample lake with `batch`, runs
// `worker` processes and the `consumer` until the review queue is drained
// and the lake holds an inference-log row for every stage call, stops them
// with SIGTERM, and reports what happened. `make demo` runs it through
// deploy/local/demo/cmd/demo; deploy/local/e2e runs the same flow with
// assertions.
package demo

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Config is one demo run. The zero values of the optional fields take the
// defaults that WithDefaults fills in.
type Config struct {
	// Root is the module root: bin/, .stack/ and the Go packages live there.
	Root string
	// EnvFile is the stack's env file (default Root/.stack/env).
	EnvFile string
	// BinDir receives the built batch, worker and consumer (default
	// Root/bin). The stack binary is always Root/bin/stack.
	BinDir string
	// BuildFlags are extra `go build` flags for the three binaries (a test
	// built with -race passes -race, which also reuses its build cache).
	BuildFlags []string
	// LogDir receives one log file per child process (default
	// Root/.stack/demo/<run id>).
	LogDir string
	// StartStack lets the demo start a stack when none is running (and stop
	// it at the end unless KeepStack). Without it a missing stack fails the
	// run at once.
	StartStack bool
	// KeepStack leaves a stack the demo started running for exploring. A
	// stack that was already running is never stopped.
	KeepStack bool
	// StackArgs are extra flags for `stack up`, `wait` and `down` (other
	// ports, --rooms, --state-dir with a matching EnvFile).
	StackArgs []string
	// StackWait bounds the start of a stack.
	StackWait time.Duration

	// Database is the MySQL database of the run, dropped and recreated at
	// the start and kept afterwards (default chatguard_demo).
	Database string
	// RunID is stamped on every review event (default demo-<UTC time>), so
	// that this run's rows stand apart in a shared lake.
	RunID string
	// WindowStart and WindowEnd are the window published; zero takes the
	// stack's sample window.
	WindowStart, WindowEnd time.Time
	// LakePrefix and ErrorsPrefix are where the consumer writes in the lake
	// bucket (default events/ and errors/, where the Athena tables look).
	LakePrefix, ErrorsPrefix string

	// Workers is how many worker processes run (default 2).
	Workers int
	// FlushAge is the consumer's --flush-age: short, so the lake fills while
	// the demo watches (default 5s).
	FlushAge time.Duration
	// Timeout bounds the whole run, stack start included (default 10m).
	Timeout time.Duration
	// Progress is how often a progress line is printed (default 2s).
	Progress time.Duration
	// StopGrace bounds each child's exit after SIGTERM; then it is killed
	// and the run fails (default 60s).
	StopGrace time.Duration

	// Realtime runs real time instead of the batch: the chat service is
	// replayed (package chatreplay) over the window, the trigger fires
	// rooms, the workers read review-realtime first; the summary reports
	// freshness beside what the hourly batch would give for the same hour.
	Realtime bool
	// Speedup is the replay's speed-up in real-time mode (default 12: an
	// hour in five minutes). The trigger's quiet and max delay keep their
	// real values, so freshness is wall time.
	Speedup float64
	// DayRooms, when set, replays a generated day instead of the stack's
	// sample window (make bench-realtime): that many rooms, retimed by
	// chatreplay.DefaultDayShape (peak 20x the trough, spam bursts), the
	// day compressed into DayMinutes of wall time.
	DayRooms   int
	DayMinutes float64
	// Fault injects one of RealtimeFaults into a real-time run.
	Fault string
	// LateShare is the share of messages whose chat event is announced
	// late (chatreplay.Late: 15 s to 2 min after the message is stored)
	// in a real-time run.
	LateShare float64
	// Trace, in a batch run, has the binaries export every span (sampling
	// 1.0) to an OTLP receiver in the demo, and the summary print one
	// review's trace as an indented span tree.
	Trace bool

	// Out receives the progress lines and the summary (default io.Discard).
	Out io.Writer
}

// DefaultDatabase is the MySQL database the demo uses unless told otherwise.
const DefaultDatabase = "chatguard_demo"

// WithDefaults returns c with every unset optional field filled in; now
// stamps the default run id.
func (c Config) WithDefaults(now time.Time) Config {
	if c.EnvFile == "" && c.Root != "" {
		c.EnvFile = filepath.Join(c.Root, ".stack", "env")
	}
	if c.BinDir == "" && c.Root != "" {
		c.BinDir = filepath.Join(c.Root, "bin")
	}
	if c.RunID == "" {
		c.RunID = "demo-" + now.UTC().Format("20060102T150405Z")
	}
	if c.LogDir == "" && c.Root != "" {
		c.LogDir = filepath.Join(c.Root, ".stack", "demo", c.RunID)
	}
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if c.LakePrefix == "" {
		c.LakePrefix = "events/"
	}
	if c.ErrorsPrefix == "" {
		c.ErrorsPrefix = "errors/"
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.FlushAge == 0 {
		c.FlushAge = 5 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Progress == 0 {
		c.Progress = 2 * time.Second
	}
	if c.StopGrace == 0 {
		c.StopGrace = 60 * time.Second
	}
	if c.StackWait == 0 {
		c.StackWait = 4 * time.Minute
	}
	if c.Speedup == 0 {
		c.Speedup = 12
	}
	if c.DayRooms > 0 {
		if c.DayMinutes == 0 {
			c.DayMinutes = 20
		}
		c.Speedup = 24 * 60 / c.DayMinutes
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return c
}

// identifier is what a MySQL database name and a run id may hold here: no
// quoting is ever needed.
var identifier = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

var runID = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	for _, p := range []struct{ v, name string }{{c.Root, "root"}, {c.EnvFile, "env file"}, {c.BinDir, "bin dir"}, {c.LogDir, "log dir"}} {
		if p.v == "" {
			errs = append(errs, fmt.Errorf("%s is required", p.name))
		}
	}
	if !identifier.MatchString(c.Database) {
		errs = append(errs, fmt.Errorf("database %q must be 1-64 letters, digits or underscores", c.Database))
	}
	if !runID.MatchString(c.RunID) {
		errs = append(errs, fmt.Errorf("run id %q must be 1-64 letters, digits, '_', '.', ':' or '-'", c.RunID))
	}
	if c.WindowStart.IsZero() != c.WindowEnd.IsZero() {
		errs = append(errs, errors.New("window start and end go together"))
	} else if !c.WindowStart.IsZero() && !c.WindowStart.Before(c.WindowEnd) {
		errs = append(errs, fmt.Errorf("window start %s must be before its end %s", c.WindowStart.Format(time.RFC3339), c.WindowEnd.Format(time.RFC3339)))
	}
	for _, p := range []struct{ v, name string }{{c.LakePrefix, "lake prefix"}, {c.ErrorsPrefix, "errors prefix"}} {
		if !strings.HasSuffix(p.v, "/") || strings.HasPrefix(p.v, "/") {
			errs = append(errs, fmt.Errorf("%s %q must end in / and not start with one", p.name, p.v))
		}
	}
	if c.LakePrefix != "" && c.LakePrefix == c.ErrorsPrefix {
		errs = append(errs, errors.New("lake prefix and errors prefix must differ"))
	}
	if c.DayRooms < 0 || (c.DayRooms > 0 && (!c.Realtime || !(c.DayMinutes > 0))) {
		errs = append(errs, errors.New("a generated day needs --realtime and positive rooms and minutes"))
	}
	if c.Fault != "" && (!c.Realtime || !slices.Contains(RealtimeFaults, c.Fault)) {
		errs = append(errs, fmt.Errorf("fault %q needs --realtime and one of %v", c.Fault, RealtimeFaults))
	}
	if c.LateShare < 0 || c.LateShare > 1 || (c.LateShare > 0 && !c.Realtime) {
		errs = append(errs, fmt.Errorf("late share %v must be within 0..1, and needs --realtime", c.LateShare))
	}
	if !(c.Speedup > 0) {
		errs = append(errs, fmt.Errorf("speed-up %v must be positive", c.Speedup))
	}
	if c.Workers < 1 || c.Workers > 8 {
		errs = append(errs, fmt.Errorf("workers %d must be in 1..8", c.Workers))
	}
	for _, d := range []struct {
		v    time.Duration
		name string
	}{{c.FlushAge, "flush age"}, {c.Timeout, "timeout"}, {c.Progress, "progress interval"}, {c.StopGrace, "stop grace"}, {c.StackWait, "stack wait"}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", d.name))
		}
	}
	return errors.Join(errs...)
}
