package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTracesEnvWithoutJaegerIsEmpty(t *testing.T) {
	t.Parallel()
	cfg := Defaults("/repo")
	require.Empty(t, cfg.TracesEnv(), "without TRACES=1 the env file is as before: tracing off")
	for _, p := range cfg.ports() {
		require.NotContains(t, p.name, "jaeger", "no Jaeger port is checked or bound")
	}
}

func TestTracesEnvPointsTheBinariesAtJaeger(t *testing.T) {
	t.Parallel()
	cfg := Defaults("/repo")
	cfg.Jaeger = "/repo/bin/jaeger"
	cfg.JaegerOTLPPort, cfg.JaegerQueryPort = 24318, 26686
	require.Equal(t, Env{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:24318",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "1.0",
		"CHATGUARD_STACK_TRACES_URL":  "http://127.0.0.1:26686",
	}, cfg.TracesEnv())
	// Each binary names itself (chatguard-worker, ...): the stack must not.
	require.NotContains(t, cfg.TracesEnv(), "OTEL_SERVICE_NAME")
	data, err := cfg.TracesEnv().Encode()
	require.NoError(t, err, "the values survive the env file")
	require.Contains(t, string(data), "OTEL_TRACES_SAMPLER_ARG='1.0'\n")
}

func TestJaegerConfigBindsOnlyTheStacksPorts(t *testing.T) {
	t.Parallel()
	cfg := Defaults("/repo")
	cfg.Jaeger = "/repo/bin/jaeger"
	cfg.JaegerOTLPPort, cfg.JaegerQueryPort, cfg.JaegerGRPCPort = 24318, 26686, 26685
	y := cfg.jaegerConfig()
	for _, want := range []string{"endpoint: 127.0.0.1:24318", "endpoint: 127.0.0.1:26686", "endpoint: 127.0.0.1:26685", "memory:", "level: none"} {
		require.Contains(t, y, want)
	}
	// Jaeger's defaults bind 4317, 14250, 9411, 5778, 13133, 8888...: none
	// of those receivers or extensions is configured.
	for _, unwanted := range []string{"grpc:\n        endpoint", "zipkin", "jaeger:\n", "remote_sampling", "healthcheck", "0.0.0.0", "localhost"} {
		require.NotContains(t, y, unwanted)
	}
	require.Equal(t, 3, strings.Count(y, "endpoint: "), "three ports, each the stack's")
}

func TestJaegerPortsAreValidated(t *testing.T) {
	t.Parallel()
	cfg := Defaults("/repo")
	cfg.JaegerQueryPort = cfg.SQSPort
	require.NoError(t, cfg.Validate(), "without Jaeger its ports are not used")
	cfg.Jaeger = "/repo/bin/jaeger"
	require.ErrorContains(t, cfg.Validate(), "--sqs-port and --jaeger-query-port are both")
	cfg = Defaults("/repo")
	cfg.Jaeger, cfg.JaegerOTLPPort = "/repo/bin/jaeger", 0
	require.ErrorContains(t, cfg.Validate(), "--jaeger-otlp-port 0")
}

// TestJaegerModuleStaysOutOfTheWorkspace: Jaeger's requirements (hundreds
// of modules, storage clients among them) must reach neither the
// workspace, whose modules every linter and govulncheck scan, nor the
// production module's go.sum.
func TestJaegerModuleStaysOutOfTheWorkspace(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	gomod, err := os.ReadFile(filepath.Join(root, "deploy", "local", "jaeger", "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(gomod), "\ntool github.com/jaegertracing/jaeger/cmd/jaeger\n")
	require.Contains(t, string(gomod), "github.com/jaegertracing/jaeger v1.75.0")
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	require.NoError(t, err)
	require.NotContains(t, string(work), "jaeger", "go.work must not use deploy/local/jaeger")
	for _, f := range []string{"go.mod", "go.sum", "go.work.sum", "deploy/local/go.mod", "deploy/local/go.sum", "deploy/k8s/go.mod", "deploy/k8s/go.sum"} {
		data, err := os.ReadFile(filepath.Join(root, f))
		if f == "go.work.sum" && os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		require.NotContains(t, string(data), "github.com/jaegertracing/jaeger ", f)
	}
}
