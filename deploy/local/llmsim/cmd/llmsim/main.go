// Command llmsim runs one simulated model endpoint (see package llmsim): an
// OpenAI-compatible, vLLM-like server whose answers come from rules, not a
// model. The local stack runs two, named primary and fallback.
//
// Every flag can also be set by an environment variable CHATGUARD_LLMSIM_<NAME>
// (--ttft ↔ CHATGUARD_LLMSIM_TTFT); flags win. It prints the base URL for
// OpenAI clients (http://host:port/v1) on stdout once listening, logs JSON to
// stderr, and stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/chatguard/chatguard/deploy/local/llmsim"
)

// envPrefix prefixes the environment variable of every flag.
const envPrefix = "CHATGUARD_LLMSIM_"

// stopGrace bounds how long running requests may finish on shutdown.
const stopGrace = 10 * time.Second

func main() {
	// The simulator keeps a small live heap and churns through short-lived
	// request buffers; collecting less often cuts its CPU by about a fifth
	// in the capacity benchmarks. GOGC still wins when set.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Main is the command's configuration.
type Main struct {
	Addr   string
	Config llmsim.Config
	Stdout io.Writer
	Log    *slog.Logger
}

// Run serves until ctx is done, then stops within stopGrace. It returns the
// start error or a forced stop's error.
func (m *Main) Run(ctx context.Context) error {
	r, err := llmsim.Start(ctx, m.Addr, m.Config)
	if err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, r.URL)
	m.Log.Info("llmsim listening", "name", m.Config.Name, "url", r.URL, "models", strings.Join(m.Config.Models, ","),
		"ttft", m.Config.TTFT.String(), "itl", m.Config.ITL.String(), "max_running", m.Config.MaxRunning)
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	err = r.Stop(stopCtx)
	m.Log.Info("llmsim stopped", "name", m.Config.Name, "stats", r.Server.Stats().ChatRequests(""))
	return err
}

// run parses flags and environment, runs, and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	m := Main{Addr: "127.0.0.1:0", Config: llmsim.DefaultConfig(), Stdout: stdout}
	c := &m.Config
	models := strings.Join(c.Models, ",")
	fs := flag.NewFlagSet("llmsim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&m.Addr, "addr", m.Addr, "listen address (port 0 picks a free port)")
	fs.StringVar(&c.Name, "name", c.Name, "endpoint name in stats and logs: primary or fallback")
	fs.StringVar(&models, "models", models, "comma-separated model ids served")
	fs.StringVar(&c.APIKey, "api-key", c.APIKey, "bearer key required on /v1 (empty: none)")
	fs.DurationVar(&c.TTFT, "ttft", c.TTFT, "time to first token")
	fs.DurationVar(&c.ITL, "itl", c.ITL, "inter-token latency")
	fs.DurationVar(&c.ImageTTFT, "image-ttft", c.ImageTTFT, "time to first token added per image part (a slow vision stage)")
	fs.Float64Var(&c.Jitter, "jitter", c.Jitter, "relative jitter of ttft and itl, in [0, 1]")
	fs.IntVar(&c.TokensPerChunk, "tokens-per-chunk", c.TokensPerChunk, "tokens per streamed chunk")
	fs.IntVar(&c.MaxRunning, "max-running", c.MaxRunning, "requests generating at once (vLLM max_num_seqs)")
	fs.IntVar(&c.MaxWaiting, "max-waiting", c.MaxWaiting, "waiting queue bound; a full queue is refused")
	fs.BoolVar(&c.PriorityScheduling, "priority-scheduling", c.PriorityScheduling, "order the waiting queue by each request's priority (lower first), then arrival, as vLLM's --scheduling-policy priority (no preemption); off, a non-zero priority gets 400")
	fs.IntVar(&c.QueueFullStatus, "queue-full-status", c.QueueFullStatus, "status for a full queue: 429 or 503")
	fs.DurationVar(&c.RetryAfter, "retry-after", c.RetryAfter, "Retry-After sent with 429 and 503")
	fs.DurationVar(&c.MaxHang, "max-hang", c.MaxHang, "longest a hang fault holds a request")
	fs.IntVar(&c.CacheSize, "cache-size", c.CacheSize, "answers cached by prompt hash (0: off)")
	fs.DurationVar(&c.PrefillPerToken, "prefill-per-token", c.PrefillPerToken, "prefill time per uncached prompt token, added to TTFT")
	fs.Float64Var(&c.BatchSlowdown, "batch-slowdown", c.BatchSlowdown, "ITL grows to ITL*(1+this) at a full running batch")
	fs.IntVar(&c.KVCacheTokens, "kv-cache-tokens", c.KVCacheTokens, "KV cache size in tokens (0: max-running*2048)")
	fs.IntVar(&c.RPM, "rpm", c.RPM, "requests per minute before 429 (managed API; 0: no limit)")
	fs.IntVar(&c.TPM, "tpm", c.TPM, "tokens per minute before 429 (managed API; 0: no limit)")
	fs.DurationVar(&c.RateWindow, "rate-window", c.RateWindow, "burst the rpm/tpm buckets allow, as the time that earns it (0: a minute)")
	fs.IntVar(&c.PrefixCacheBlocks, "prefix-cache-blocks", c.PrefixCacheBlocks, "prefix-cache model size in 16-token blocks (0: off)")
	fs.Float64Var(&c.Faults.Status429, "fault-429", 0, "rate of 429 answers")
	fs.Float64Var(&c.Faults.Status500, "fault-500", 0, "rate of 500 answers")
	fs.Float64Var(&c.Faults.Status503, "fault-503", 0, "rate of 503 answers")
	fs.Float64Var(&c.Faults.Hang, "fault-hang", 0, "rate of requests that hang")
	fs.Float64Var(&c.Faults.Drop, "fault-drop", 0, "rate of connections dropped mid-answer")
	fs.Float64Var(&c.Faults.Malformed, "fault-malformed", 0, "rate of answers with invalid JSON")
	fs.Float64Var(&c.Faults.Truncate, "fault-truncate", 0, "rate of answers cut short (finish_reason stop)")

	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := envName(f.Name)
		if v := getenv(env); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", env, v, err))
			}
		}
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs)
			return 0
		}
		errs = append(errs, err)
	} else if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %q", fs.Args()))
	}
	c.Models = nil
	for _, id := range strings.Split(models, ",") {
		if id = strings.TrimSpace(id); id != "" {
			c.Models = append(c.Models, id)
		}
	}
	errs = append(errs, c.Validate())
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(stderr, "llmsim: invalid configuration:")
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "  - %s\n", line)
		}
		fmt.Fprintln(stderr, "Run 'llmsim --help' for the flags.")
		return 2
	}
	m.Log = slog.New(slog.NewJSONHandler(stderr, nil))
	if err := m.Run(ctx); err != nil {
		m.Log.Error("llmsim failed", "err", err.Error())
		return 1
	}
	return 0
}

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, "Usage: llmsim [flags]\n\nA rule-based stand-in for an OpenAI-compatible vLLM endpoint (not a model).\n\n"+
		"Flags (each also settable by its environment variable; flags win):\n")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	for _, n := range names {
		f := fs.Lookup(n)
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(tw, "  --%s\t%s\tdefault %s\t%s\n", n, envName(n), def, f.Usage)
	}
	tw.Flush()
}
