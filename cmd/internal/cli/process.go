package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/chatguard/chatguard/cmd/internal/telemetry"
	"github.com/chatguard/chatguard/internal/buildinfo"
)

// NewRegistry returns the metrics registry a long-running binary serves on
// /metrics: the Go runtime and process collectors and chatguard_build_info
// (internal/buildinfo), to which the binary adds its own metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	return reg
}

// ParseCommand parses a command's arguments the way every chatguard binary
// does: --help prints the usage and ends with 0, --version prints the
// build's version and revision (internal/buildinfo) and ends with 0, a bad
// value or a stray argument ends with ExitUsage naming each problem. done reports that the
// caller should return code now.
func (f *FlagSet) ParseCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) (code int, done bool) {
	err := f.Parse(args, getenv)
	switch {
	case errors.Is(err, ErrHelp):
		f.Usage(stdout)
		return 0, true
	case errors.Is(err, ErrVersion):
		fmt.Fprintf(stdout, "%s %s\n", f.name, buildinfo.Get())
		return 0, true
	case err != nil:
		return Fail(stderr, f.name, err), true
	case len(f.Args()) > 0:
		return Fail(stderr, f.name, fmt.Errorf("unexpected arguments %q", f.Args())), true
	}
	return 0, false
}

// SignalContext returns a context that is cancelled, with the signal as its
// cause, on SIGTERM or SIGINT, so that a drain can tell a shutdown from a
// failure. stop releases the signal handler and the goroutine that waits
// for it.
func SignalContext(ctx context.Context, log *slog.Logger, name string) (sctx context.Context, stop func()) {
	sctx, cancel := context.WithCancelCause(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-sigs:
			log.Info(name+": signal received, draining", "signal", s.String())
			cancel(fmt.Errorf("received %s", s))
		case <-sctx.Done():
		}
	}()
	return sctx, func() {
		signal.Stop(sigs)
		cancel(nil)
		<-done
	}
}

// ParseLevel reads a --log-level value: debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q must be debug, info, warn or error", s)
	}
	return l, nil
}

// Runner is a binary's Main: Run serves until ctx is cancelled and its
// services have drained, and returns the first failure.
type Runner interface {
	Run(ctx context.Context) error
}

// Program is the entry of a long-running binary, the one sequence every
// main follows: parse the arguments into the flags Flags binds (answering
// --help and --version), validate, build the JSON logger at the log level,
// cancel on SIGTERM or SIGINT, and run the Main.
type Program struct {
	// Name prefixes the binary's messages.
	Name string
	// Flags binds the binary's configuration.
	Flags *FlagSet
	// Config is the configuration Flags binds, validated after parsing.
	Config interface{ Validate() error }
	// LogLevel is the configuration's --log-level field; Validate has
	// checked it.
	LogLevel *string
	// Main builds the binary's Main from the parsed configuration and the
	// logger.
	Main func(log *slog.Logger) Runner
}

// Run runs the program with args and returns its exit code: 0 after a
// clean stop, ExitUsage for a mistake in the arguments or configuration
// (each problem named), 1 when the Main fails (logged once, here).
func (p Program) Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if code, done := p.Flags.ParseCommand(args, getenv, stdout, stderr); done {
		return code
	}
	if err := p.Config.Validate(); err != nil {
		return Fail(stderr, p.Name, err)
	}
	level, _ := ParseLevel(*p.LogLevel)
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})))
	// Tracing is configured by the OTEL_* variables, not flags
	// (docs/tracing.md); off unless an endpoint is set.
	shutdown, err := telemetry.Setup(ctx, "chatguard-"+p.Name, getenv)
	if err != nil {
		return Fail(stderr, p.Name, err)
	}
	defer shutdown()
	ctx, stop := SignalContext(ctx, log, p.Name)
	defer stop()
	if err := p.Main(log).Run(ctx); err != nil {
		log.Error(p.Name+": stopped", "err", err)
		return 1
	}
	return 0
}
