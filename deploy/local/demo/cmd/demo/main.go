// Command demo runs the whole chatguard pipeline once on the local stack
// and prints a summary (see package deploy/local/demo). `make demo` runs
// it; flags pass through DEMO_FLAGS.
//
//	demo [--keep-stack] [--timeout 10m] [--workers 2] [--window-start T --window-end T]
//	demo --realtime [--speedup 12]   # the trigger over the window replayed as live chats
//
// Exit status: 0 when the run drained and every process exited 0, 1 when
// it failed or timed out, 2 on bad usage. Every flag has a CHATGUARD_
// variable of the same name (--keep-stack ↔ CHATGUARD_KEEP_STACK).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/chatguard/chatguard/deploy/local/demo"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

type timeFlag struct{ t *time.Time }

func (f timeFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return err
	}
	*f.t = t
	return nil
}

// run is main without the process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg := demo.Config{StartStack: true}
	var noStart bool
	var stackArgs string
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Root, "root", "", "repository root (default: the nearest folder above the working directory holding go.work)")
	fs.BoolVar(&cfg.KeepStack, "keep-stack", false, "leave a stack the demo started running afterwards, for exploring")
	fs.BoolVar(&noStart, "no-start", false, "fail instead of starting a stack when none is running")
	fs.StringVar(&stackArgs, "stack-flags", "", "extra flags for `stack up|wait|down` when the demo starts a stack, space-separated")
	fs.StringVar(&cfg.EnvFile, "env-file", "", "the stack's env file (default <root>/.stack/env; pair with --stack-flags \"--state-dir DIR\" for a second stack)")
	fs.StringVar(&cfg.Database, "database", demo.DefaultDatabase, "MySQL database of the run, dropped and recreated")
	fs.StringVar(&cfg.RunID, "run-id", "", "run id stamped on every event (default demo-<UTC time>)")
	fs.Var(timeFlag{&cfg.WindowStart}, "window-start", "window start, RFC 3339 (default: the stack's sample window)")
	fs.Var(timeFlag{&cfg.WindowEnd}, "window-end", "window end, exclusive, RFC 3339")
	fs.StringVar(&cfg.LakePrefix, "lake-prefix", "events/", "where the consumer writes in the lake bucket (the Athena tables read events/)")
	fs.StringVar(&cfg.ErrorsPrefix, "errors-prefix", "errors/", "where the consumer writes invalid messages")
	fs.IntVar(&cfg.Workers, "workers", 2, "worker processes")
	fs.BoolVar(&cfg.Realtime, "realtime", false, "real time instead of the batch: replay the window as live chats through the trigger and report freshness")
	fs.IntVar(&cfg.DayRooms, "day-rooms", 0, "with --realtime, replay a generated day of this many rooms (diurnal, peak 20x the trough, spam bursts) instead of the sample window, and report the benchmark's figures")
	fs.Float64Var(&cfg.DayMinutes, "day-minutes", 20, "with --day-rooms, the wall-clock minutes the day is compressed into")
	fs.Float64Var(&cfg.LateShare, "late-share", 0, "with --realtime, the share of messages whose chat event arrives 15 s to 2 min late (e.g. 0.01)")
	var faults string
	fs.StringVar(&faults, "faults", "", "with --realtime, run once per fault ("+strings.Join(demo.RealtimeFaults, ",")+", or all) and print the fault rows")
	fs.Float64Var(&cfg.Speedup, "speedup", 12, "with --realtime, replay the window this many times faster (12: an hour in five minutes)")
	fs.BoolVar(&cfg.Trace, "trace", true, "in a batch run, trace every review (an OTLP receiver in the demo, sampling 1.0) and print one review's span tree")
	fs.DurationVar(&cfg.FlushAge, "flush-age", 5*time.Second, "the consumer's --flush-age")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "bound of the whole run, stack start included")
	fs.DurationVar(&cfg.Progress, "progress-interval", 2*time.Second, "how often a progress line is printed")
	fs.DurationVar(&cfg.StackWait, "stack-wait", 4*time.Minute, "how long a stack the demo starts may take to become ready")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: demo [flags]\n\nRuns batch, two workers and the consumer on the local stack over a window of the sample lake,\n"+
			"waits until the review queue is drained and the lake holds every inference log, stops them and prints a summary.\n\nFlags (each also as CHATGUARD_<FLAG> with - as _):")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, getenv); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demo: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg.StartStack = !noStart
	cfg.StackArgs = strings.Fields(stackArgs)
	if cfg.Root == "" {
		root, err := moduleRoot()
		if err != nil {
			fmt.Fprintf(stderr, "demo: %v\n", err)
			return 2
		}
		cfg.Root = root
	}
	cfg.Out = stdout

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	if faults != "" {
		return runFaults(ctx, cfg, faults, stdout, stderr)
	}
	if _, err := demo.Run(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return 1
	}
	return 0
}

// runFaults runs a real-time demo per fault and prints their rows; 1 when
// a run failed or a row does not hold.
func runFaults(ctx context.Context, cfg demo.Config, list string, stdout, stderr io.Writer) int {
	names := strings.Split(list, ",")
	if list == "all" {
		names = demo.RealtimeFaults
	}
	var rows []*demo.RealtimeReport
	code := 0
	for i, name := range names {
		c := cfg
		c.Realtime, c.Fault = true, strings.TrimSpace(name)
		c.RunID = fmt.Sprintf("rtfault-%s-%d-%s", c.Fault, i, time.Now().UTC().Format("150405"))
		rep, err := demo.Run(ctx, c)
		if err != nil {
			fmt.Fprintf(stderr, "fault %s: %v\n", c.Fault, err)
			code = 1
		}
		if rep != nil && rep.Realtime != nil {
			rows = append(rows, rep.Realtime)
		}
	}
	if !demo.PrintFaultRows(stdout, rows) {
		code = 1
	}
	return code
}

// parse parses args, taking CHATGUARD_<FLAG> for every flag not given.
func parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		env := "CHATGUARD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", env, v, err))
			}
		}
	})
	return errors.Join(errs...)
}

// moduleRoot is the repository root: the folder of go.work, the workspace
// that joins the production module and deploy/local (a go.mod alone may be
// deploy/local's own).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory: run from the repository or pass --root")
		}
		dir = parent
	}
}
