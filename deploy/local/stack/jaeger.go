package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Default ports of the opt-in trace store (Config.Jaeger), in the stack's
// block rather than Jaeger's own 4318 and 16686, which other tools on a
// developer's machine often hold.
const (
	DefaultJaegerOTLPPort  = 18430 // OTLP over HTTP/protobuf: what the binaries export to
	DefaultJaegerQueryPort = 18431 // the query API (JSON over HTTP)
	DefaultJaegerGRPCPort  = 18432 // the query service's gRPC API (bound by Jaeger, unused here)
)

// LocalSampleRatio is the root sampling ratio the stack publishes with the
// trace store: every trace, so a local run's reviews can all be looked up.
const LocalSampleRatio = "1.0"

// JaegerConfigFile is the collector configuration the stack writes for
// Jaeger on each start.
func (c Config) JaegerConfigFile() string { return filepath.Join(c.StateDir, "jaeger.yaml") }

// JaegerLog receives the Jaeger child's output.
func (c Config) JaegerLog() string { return filepath.Join(c.StateDir, "jaeger.log") }

// JaegerQueryURL is the query API's base URL (GET /api/services,
// /api/traces?service=…, /api/traces/<trace id>).
func (c Config) JaegerQueryURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(c.JaegerQueryPort)
}

// TracesEnv is what the stack adds to its env file when it runs the trace
// store: the standard OTEL_* variables every chatguard binary reads
// (cmd/internal/telemetry), pointing at Jaeger's OTLP receiver and sampling
// every new trace, and the query API's URL. Without a trace store it is
// empty, so the env file is as before and tracing stays off.
func (c Config) TracesEnv() Env {
	if c.Jaeger == "" {
		return Env{}
	}
	return Env{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:" + strconv.Itoa(c.JaegerOTLPPort),
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     LocalSampleRatio,
		"CHATGUARD_STACK_TRACES_URL":  c.JaegerQueryURL(),
	}
}

// jaegerConfig is Jaeger's all-in-one configuration cut down to what the
// stack uses, each port the stack's: the OTLP/HTTP receiver, in-memory
// storage (gone on stop) and the query service; no gRPC OTLP, Jaeger,
// Zipkin or sampling receivers and no metrics endpoint of its own, so it
// binds only the three ports the stack checked.
func (c Config) jaegerConfig() string {
	return fmt.Sprintf(`# Written by the chatguard local stack on every start (deploy/local/stack/jaeger.go).
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, c.JaegerQueryPort, c.JaegerGRPCPort, c.JaegerOTLPPort)
}

// startJaeger writes the configuration, starts Jaeger in its own process
// group (killed with the stack, even by SIGKILL) and waits until its query
// API and OTLP receiver answer. It registers the stop and publishes
// TracesEnv.
func (s *Stack) startJaeger(ctx context.Context) error {
	cfg := s.cfg
	if err := os.WriteFile(cfg.JaegerConfigFile(), []byte(cfg.jaegerConfig()), 0o644); err != nil {
		return fmt.Errorf("jaeger: %w", err)
	}
	logf, err := os.OpenFile(cfg.JaegerLog(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("jaeger: %w", err)
	}
	cmd := exec.Command(cfg.Jaeger, "--config", cfg.JaegerConfigFile())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return fmt.Errorf("jaeger: start %s (build it with make bin/jaeger): %w", cfg.Jaeger, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.onStop("jaeger", func(ctx context.Context) error { return stopChild(ctx, cmd, exited) })
	for _, url := range []string{cfg.JaegerQueryURL(), "http://127.0.0.1:" + strconv.Itoa(cfg.JaegerOTLPPort)} {
		if err := waitHTTP(ctx, url, cfg.ReadyTimeout); err != nil {
			return fmt.Errorf("jaeger (log %s): %w", cfg.JaegerLog(), err)
		}
	}
	env := cfg.TracesEnv()
	for _, k := range env.Keys() {
		s.set(k, env[k])
	}
	cfg.logger().Info("jaeger ready", "query", cfg.JaegerQueryURL(), "otlp", env["OTEL_EXPORTER_OTLP_ENDPOINT"])
	return nil
}

// stopChild sends SIGTERM to the child's process group and kills it when
// it has not exited within 5 s (or ctx's end).
func stopChild(ctx context.Context, cmd *exec.Cmd, exited <-chan struct{}) error {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-exited:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
	return nil
}
