// Command genlake writes the synthetic chat lake and its ground truth.
//
//	go run ./deploy/local/sampledata/cmd/genlake --lake-dir /tmp/lake --truth-dir /tmp/truth
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chatguard/chatguard/deploy/local/sampledata"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	m, err := parseMain(os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err == nil {
		err = m.Run(ctx)
	}
	if err != nil {
		log.Error("genlake failed", "err", err)
		stop()
		os.Exit(1)
	}
}

// Main is the genlake command: it writes the lake once and returns.
type Main struct {
	Opts sampledata.Options
	Out  io.Writer
}

func env(name, def string) string {
	if v, ok := os.LookupEnv("CHATGUARD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); ok {
		return v
	}
	return def
}

func parseMain(args []string, out io.Writer) (*Main, error) {
	fs := flag.NewFlagSet("genlake", flag.ContinueOnError)
	lake := fs.String("lake-dir", env("lake-dir", "./tmp/lake"), "lake root (the S3 bucket); env CHATGUARD_LAKE_DIR")
	truth := fs.String("truth-dir", env("truth-dir", "./tmp/truth"), "ground-truth directory, outside the lake; env CHATGUARD_TRUTH_DIR")
	seed := fs.String("seed", env("seed", "1"), "random seed; the same seed gives byte-identical files; env CHATGUARD_SEED")
	rooms := fs.String("rooms", env("rooms", strconv.Itoa(sampledata.DefaultRooms)), "number of chat rooms; env CHATGUARD_ROOMS")
	days := fs.String("days", env("days", strconv.Itoa(sampledata.DefaultDays)), "number of days of chats; env CHATGUARD_DAYS")
	start := fs.String("start", env("start", sampledata.DefaultStart.Format(time.RFC3339)), "first instant of the data (RFC 3339); env CHATGUARD_START")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	sd, err1 := strconv.ParseInt(*seed, 10, 64)
	rn, err2 := strconv.Atoi(*rooms)
	dn, err3 := strconv.Atoi(*days)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("genlake: %w", err)
	}
	st, err := time.Parse(time.RFC3339, *start)
	if err != nil {
		return nil, fmt.Errorf("genlake: --start: %w", err)
	}
	return &Main{Out: out, Opts: sampledata.Options{
		LakeDir: *lake, TruthDir: *truth, Seed: sd, Rooms: rn, Days: dn, Start: st,
	}}, nil
}

// Run generates the lake; it returns the generator's error, including ctx's.
func (m *Main) Run(ctx context.Context) error {
	began := time.Now()
	sum, err := sampledata.Generate(ctx, m.Opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Out, "wrote %d rooms, %d messages (%d images, %d injection rooms) in %d files under %s [%s, %s) in %s\n",
		sum.Rooms, sum.Messages, sum.Images, sum.Injections, len(sum.Files), m.Opts.LakeDir,
		sum.From.Format(time.RFC3339), sum.To.Format(time.RFC3339), time.Since(began).Round(time.Millisecond))
	fmt.Fprintf(m.Out, "ground truth: %s\n", sum.TruthFile)
	for _, l := range slices.Sorted(maps.Keys(sum.ByLabel)) {
		fmt.Fprintf(m.Out, "  label %-10s %d\n", l, sum.ByLabel[l])
	}
	for _, c := range slices.Sorted(maps.Keys(sum.ByCategory)) {
		fmt.Fprintf(m.Out, "  category %-16s %d\n", c, sum.ByCategory[c])
	}
	return nil
}
