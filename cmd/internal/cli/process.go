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
