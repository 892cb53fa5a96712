// Command athenasim serves the Athena stand-in (package athenasim, DuckDB
// over a local Parquet lake) on its own, so that tests of the production
// module can run a private instance as a separate process, with its own
// lake, tables and faults, without linking DuckDB.
//
//	athenasim --lake-dir /tmp/lake [--table verdict=events/verdict/*/*/*.parquet ...]
//
// It prints its base URL (http://127.0.0.1:PORT) on stdout once listening,
// logs JSON to stderr, and stops on SIGINT or SIGTERM. The admin endpoint is
// POST /admin/config (see package athenasim).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/chatguard/chatguard/deploy/local/athenasim"
)

// stopGrace bounds how long running requests may finish on shutdown.
const stopGrace = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// tables collects repeated --table name=glob flags.
type tables map[string]string

func (t tables) String() string { return fmt.Sprint(map[string]string(t)) }

func (t tables) Set(v string) error {
	name, glob, ok := strings.Cut(v, "=")
	if !ok || name == "" || glob == "" {
		return fmt.Errorf("%q is not name=glob", v)
	}
	t[name] = glob
	return nil
}

// run parses the flags, serves until ctx is done, and returns the exit
// code: 2 for a bad configuration, 1 when serving failed.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := athenasim.Config{}
	tbl := tables{}
	addr := "127.0.0.1:0"
	fs := flag.NewFlagSet("athenasim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "addr", addr, "listen address (port 0 picks a free port)")
	fs.StringVar(&cfg.LakeDir, "lake-dir", "", "local directory standing for the lake bucket (required)")
	fs.StringVar(&cfg.Bucket, "bucket", athenasim.DefaultBucket, "bucket name that s3:// table locations may use")
	fs.StringVar(&cfg.Database, "database", athenasim.DefaultDatabase, "the one database")
	fs.Var(tbl, "table", "name=glob, repeatable: a table over Parquet files (relative to --lake-dir, absolute, or s3://bucket/glob); none: the default tables")
	fs.DurationVar(&cfg.MinRunTime, "min-run-time", 0, "keep every query RUNNING at least this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(tbl) > 0 {
		cfg.Tables = tbl
	}
	srv, err := athenasim.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "athenasim: %v\n", err)
		return 2
	}
	defer srv.Close()
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		log.Error("athenasim: listen", "addr", addr, "err", err.Error())
		return 1
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	fmt.Fprintln(stdout, url)
	log.Info("athenasim listening", "url", url, "lake_dir", cfg.LakeDir)
	select {
	case <-ctx.Done():
	case err := <-done:
		log.Error("athenasim: serve", "err", err.Error())
		return 1
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	// Close first: it ends the running queries the shutdown would wait for.
	_ = srv.Close()
	if err := hs.Shutdown(stopCtx); err != nil {
		_ = hs.Close()
	}
	<-done
	return 0
}
