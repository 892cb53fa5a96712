// Command stack runs chatguard's local development stack (see
// deploy/local/README.md).
//
//	stack [up] [flags]   start everything in the foreground; Ctrl-C or SIGTERM stops it
//	stack wait [flags]   wait until a stack started in the background is ready
//	stack status         exit 0 when a stack is running and ready, 1 otherwise
//	stack down           stop the running stack and wait until it is gone
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
	"path/filepath"
	"syscall"
	"time"

	"github.com/chatguard/chatguard/deploy/local/stack"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	m, err := parse(os.Args[1:], os.Stdout, log)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "stack: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = m.Run(ctx)
	stop()
	if err != nil {
		log.Error("stack failed", "err", err)
		os.Exit(1)
	}
}

// Main is one invocation of the command.
type Main struct {
	Cmd     string
	Cfg     stack.Config
	PID     int           // wait: the background stack's pid
	Timeout time.Duration // wait and down
	Out     io.Writer
	Log     *slog.Logger
}

func parse(args []string, out io.Writer, log *slog.Logger) (*Main, error) {
	cmd := "up"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "up", "wait", "status", "down":
	default:
		return nil, fmt.Errorf("unknown command %q (want up, wait, status or down)", cmd)
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	cfg := stack.Defaults(root)
	m := &Main{Cmd: cmd, Out: out, Log: log, Timeout: 3 * time.Minute}
	fs := flag.NewFlagSet("stack "+cmd, flag.ContinueOnError)
	fs.StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "state: env file, pid, logs, S3 data and the lake")
	fs.StringVar(&cfg.CacheDir, "cache-dir", cfg.CacheDir, "installed Node and fauxqs")
	fs.IntVar(&cfg.SQSPort, "sqs-port", cfg.SQSPort, "fauxqs (SQS) port")
	fs.IntVar(&cfg.S3Port, "s3-port", cfg.S3Port, "S3 port")
	fs.IntVar(&cfg.AthenaPort, "athena-port", cfg.AthenaPort, "Athena stand-in port")
	fs.IntVar(&cfg.ChatAPIPort, "chat-api-port", cfg.ChatAPIPort, "chat-history API port")
	fs.IntVar(&cfg.PrimaryPort, "primary-port", cfg.PrimaryPort, "primary LLM simulator port")
	fs.IntVar(&cfg.FallbackPort, "fallback-port", cfg.FallbackPort, "fallback LLM simulator port")
	fs.IntVar(&cfg.MySQLPort, "mysql-port", cfg.MySQLPort, "embedded MySQL port (when the machine's does not answer)")
	fs.IntVar(&cfg.RedisPort, "redis-port", cfg.RedisPort, "miniredis port (when the machine's Redis does not answer)")
	fs.IntVar(&cfg.RedisClusterPort, "redis-cluster-port", cfg.RedisClusterPort, "first port of the three-master Redis Cluster (each bus: port+10000); 0: no cluster")
	fs.StringVar(&cfg.ExternalMySQL, "external-mysql", cfg.ExternalMySQL, "MySQL to use when it accepts root with an empty password; empty: always embedded")
	fs.StringVar(&cfg.Jaeger, "jaeger", cfg.Jaeger, "a Jaeger binary (make bin/jaeger) to run as the local trace store; the env file then points the binaries at it (make stack-up TRACES=1); empty: none, tracing off")
	fs.IntVar(&cfg.JaegerOTLPPort, "jaeger-otlp-port", cfg.JaegerOTLPPort, "Jaeger's OTLP/HTTP receiver port (with --jaeger)")
	fs.IntVar(&cfg.JaegerQueryPort, "jaeger-query-port", cfg.JaegerQueryPort, "Jaeger's query API port (with --jaeger)")
	fs.IntVar(&cfg.JaegerGRPCPort, "jaeger-grpc-port", cfg.JaegerGRPCPort, "Jaeger's query gRPC port (with --jaeger)")
	fs.StringVar(&cfg.ExternalRedis, "external-redis", cfg.ExternalRedis, "Redis to use when it answers; empty: always miniredis")
	fs.IntVar(&cfg.MaxReceiveCount, "max-receive-count", cfg.MaxReceiveCount, "redrive maxReceiveCount of review and feedback")
	fs.DurationVar(&cfg.VisibilityTimeout, "visibility-timeout", cfg.VisibilityTimeout, "default visibility timeout of review and feedback")
	fs.IntVar(&cfg.Rooms, "rooms", cfg.Rooms, "rooms in the sample lake generated on first start")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the sample lake")
	fs.DurationVar(&cfg.ReadyTimeout, "ready-timeout", cfg.ReadyTimeout, "how long each service may take to answer")
	noInstall := fs.Bool("no-install", false, "fail instead of installing Node and fauxqs when missing")
	fs.IntVar(&m.PID, "pid", 0, "wait: pid of the stack started in the background (fail fast when it exits)")
	fs.DurationVar(&m.Timeout, "timeout", m.Timeout, "wait, down: how long to wait")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.Install = !*noInstall
	if cfg.Jaeger != "" {
		if cfg.Jaeger, err = filepath.Abs(cfg.Jaeger); err != nil {
			return nil, err
		}
	}
	cfg.Log = log
	m.Cfg = cfg
	return m, cfg.Validate()
}

// Run executes the command. up returns nil after a clean stop on ctx's
// end; wait and status return an error when the stack is not ready.
func (m *Main) Run(ctx context.Context) error {
	switch m.Cmd {
	case "wait":
		env, err := stack.WaitReady(ctx, m.Cfg, m.PID, m.Timeout)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Out, "stack ready (pid %s): %s\n", env["CHATGUARD_STACK_PID"], m.Cfg.EnvFile())
		printTraces(m.Out, env)
		return nil
	case "status":
		pid := stack.Running(m.Cfg)
		if pid == 0 {
			return errors.New("no stack is running")
		}
		env, err := stack.WaitReady(ctx, m.Cfg, 0, time.Millisecond)
		if err != nil {
			return fmt.Errorf("stack pid %d is running but not ready", pid)
		}
		fmt.Fprintf(m.Out, "stack running (pid %d): %s\n", pid, m.Cfg.EnvFile())
		printTraces(m.Out, env)
		return nil
	case "down":
		was, err := stack.StopRunning(ctx, m.Cfg, m.Timeout)
		if err != nil {
			return err
		}
		if was {
			fmt.Fprintln(m.Out, "stack stopped")
		} else {
			fmt.Fprintln(m.Out, "no stack was running")
		}
		return nil
	}
	began := time.Now()
	s, err := stack.Start(ctx, m.Cfg)
	if err != nil {
		return err
	}
	m.Log.Info("stack up; Ctrl-C stops it", "env", m.Cfg.EnvFile(), "startup", time.Since(began).Round(time.Millisecond))
	<-ctx.Done()
	m.Log.Info("stopping the stack")
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil {
		return err
	}
	m.Log.Info("stack stopped")
	return nil
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
			return "", errors.New("run it inside the repository: no go.work above the working directory")
		}
		dir = parent
	}
}

// printTraces names the trace store's query API when the stack runs one.
func printTraces(out io.Writer, env stack.Env) {
	if u := env["CHATGUARD_STACK_TRACES_URL"]; u != "" {
		fmt.Fprintf(out, "traces: %s (Jaeger query API: %s/api/services, %s/api/traces?service=chatguard-worker)\n", u, u, u)
	}
}
