package k8s_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/chatguard/chatguard/deploy/k8s/inventory"
	"github.com/chatguard/chatguard/deploy/k8s/manifest"
)

// bootLimit bounds every wait on a booted binary.
const bootLimit = 90 * time.Second

// deadDeps are local stand-ins for what a booted binary connects to first:
// a TCP port that accepts and at once closes (MySQL), and a port nothing
// listens on (every AWS endpoint, Redis, the vLLM metrics). Nothing leaves
// the machine.
type deadDeps struct {
	mysql    net.Listener
	accepted chan struct{}
	// closed is a loopback address nothing listens on: every AWS endpoint,
	// Redis and the vLLM metrics.
	closed string
	awsURL string
}

func newDeadDeps(t *testing.T) *deadDeps {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	d := &deadDeps{mysql: ln, accepted: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case d.accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	d.closed = closed.Addr().String()
	d.awsURL = "http://" + d.closed
	closed.Close()
	return d
}

// environ is the environment a pod would give the container, with secrets
// and endpoints replaced by local stand-ins and the admin listener on a free
// loopback port. Nothing of the test's own environment leaks in.
func (d *deadDeps) environ(t *testing.T, env map[string]envSource) []string {
	t.Helper()
	out := []string{
		"HOME=/tmp",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL=" + d.awsURL,
	}
	for k, v := range env {
		val := v.value
		switch {
		case k == "CHATGUARD_MYSQL_DSN":
			val = "chatguard:test@tcp(" + d.mysql.Addr().String() + ")/chatguard?timeout=2s"
		case k == "CHATGUARD_QUOTE_DIGEST_KEY" && v.secretRef != nil:
			// Only a key from a Secret stands in: a ConfigMap's empty
			// value stays, and the binary reports the dev key.
			val = "test-secret-of-at-least-thirty-two-bytes"
		case v.secretRef != nil:
			val = "test-secret"
		case k == "CHATGUARD_ADMIN_ADDR", k == "CHATGUARD_OPERATOR_ADDR", k == "CHATGUARD_LISTEN_ADDR":
			val = "127.0.0.1:0"
		case k == "CHATGUARD_REDIS_ADDR" && val != "":
			val = d.closed
		case k == "CHATGUARD_PRIMARY_METRICS_URL" && val != "":
			val = "http://" + d.closed + "/metrics"
		case k == "CHATGUARD_OPERATOR_TOKENS_DIR":
			val = t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(val, "console"), []byte("test-token-of-at-least-thirty-two-bytes"), 0o600))
		case (k == "CHATGUARD_OPERATOR_TOKEN_FILE" || k == "CHATGUARD_SESSION_KEY_FILE") && val != "":
			// Files of the console's mounted Secret.
			val = filepath.Join(t.TempDir(), filepath.Base(val))
			require.NoError(t, os.WriteFile(val, []byte("test-file-secret-of-at-least-thirty-two-bytes"), 0o600))
		}
		out = append(out, k+"="+val)
	}
	sort.Strings(out)
	return out
}

// proc is a started binary whose stderr is collected line by line.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
	mu    sync.Mutex
	all   strings.Builder
	done  chan error
}

func start(t *testing.T, bin string, args, env []string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	cmd.Stdout = io.Discard
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, lines: make(chan string, 1024), done: make(chan error, 1)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.all.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		<-read
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.all.String()
}

// exit waits (bounded) for the process to end and returns its exit code.
func (p *proc) exit(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	case <-time.After(bootLimit):
		_ = p.cmd.Process.Kill()
		t.Fatalf("%s did not exit within %s; stderr:\n%s", p.cmd.Path, bootLimit, p.stderr())
		return -1
	}
}

// requireAccepted fails unless the configuration was accepted: exit 1
// (a dependency failed), never 2 (bad usage or configuration).
func requireAccepted(t *testing.T, p *proc, code int) {
	t.Helper()
	require.NotContains(t, p.stderr(), "invalid configuration", "the rendered configuration was refused")
	require.Equal(t, 1, code, "expected a failure to reach the dead dependencies; stderr:\n%s", p.stderr())
}

// TestRenderedConfigStartsTheBinaries boots each binary with each overlay's
// settings, exactly as its pod would get them, against dead local
// dependencies: every value must parse and pass the binary's own
// validation. The consumer, which needs nothing to start, is also scraped,
// and what it serves is cross-checked with the metric inventory that the
// alert and dashboard tests rely on.
func TestRenderedConfigStartsTheBinaries(t *testing.T) {
	t.Parallel()
	dir := binaries(t)
	inv := exported(t)
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			t.Parallel()
			s := render(t, o)
			t.Run("consumer", func(t *testing.T) {
				t.Parallel()
				deps := newDeadDeps(t)
				c := container(t, s, "chatguard-consumer")
				p := start(t, filepath.Join(dir, "consumer"), c.Args, deps.environ(t, envOf(t, s, c)))
				addr := waitForLog(t, p, "consumer: receiving", "admin_addr")
				for _, probe := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
					code := get(t, "http://"+addr+probe.HTTPGet.Path)
					require.Contains(t, []int{200, 503}, code, "probe GET %s answered %d", probe.HTTPGet.Path, code)
				}
				scraped := scrape(t, "http://"+addr+"/metrics")
				checkScrape(t, scraped, inv)
				require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
				require.Equal(t, 0, p.exit(t), "a drained consumer exits 0; stderr:\n%s", p.stderr())
			})
			t.Run("worker and console", func(t *testing.T) {
				t.Parallel()
				// Both build the same stage engine from their own rendered
				// settings and log it before their first dial.
				worker := bootWorker(t, dir, s)
				console := bootConsole(t, dir, s)
				t.Logf("both report %+v", worker)
				require.NotEmpty(t, worker.PipelineVersion)
				require.Equal(t, worker, console, "the worker and the console review with different settings: on-demand verdicts would skip a privacy control or land under another pipeline version")
				if o == "prod" {
					require.False(t, worker.DevDigestKey, "prod quote digests use the Secret's key, never the dev key")
					require.NotEmpty(t, worker.ImageHosts, "prod lets images through only from the CDN hosts")
					require.True(t, worker.FallbackPseudonymize, "prod pseudonymizes chats towards the third-party fallback")
					require.NotEmpty(t, worker.FallbackModel, "prod has the managed fallback pool")
				}
			})
			t.Run("migrate", func(t *testing.T) {
				t.Parallel()
				deps := newDeadDeps(t)
				// The migration has a kustomization of its own.
				m := render(t, o+"/migrate")
				c := m.Jobs["chatguard-migrate"].Spec.Template.Spec.Containers[0]
				p := start(t, filepath.Join(dir, "worker"), append(c.Command[1:], c.Args...), deps.environ(t, envOf(t, m, c)))
				requireAccepted(t, p, p.exit(t))
				require.Len(t, deps.accepted, 1, "migrate never dialled MySQL")
			})
			t.Run("purge", func(t *testing.T) {
				t.Parallel()
				deps := newDeadDeps(t)
				c := s.CronJobs["chatguard-purge"].Spec.JobTemplate.Spec.Template.Spec.Containers[0]
				p := start(t, filepath.Join(dir, "worker"), append(c.Command[1:], c.Args...), deps.environ(t, envOf(t, s, c)))
				requireAccepted(t, p, p.exit(t))
				require.Len(t, deps.accepted, 1, "purge never dialled MySQL")
			})
			t.Run("compact", func(t *testing.T) {
				t.Parallel()
				deps := newDeadDeps(t)
				c := s.CronJobs["chatguard-compact"].Spec.JobTemplate.Spec.Template.Spec.Containers[0]
				p := start(t, filepath.Join(dir, "consumer"), append(c.Command[1:], c.Args...), deps.environ(t, envOf(t, s, c)))
				requireAccepted(t, p, p.exit(t))
				require.Contains(t, p.stderr(), "s3lake: compact: list", "compaction reached for S3")
			})
			t.Run("batch", func(t *testing.T) {
				t.Parallel()
				deps := newDeadDeps(t)
				env := map[string]envSource{"CHATGUARD_MYSQL_DSN": {}}
				for k, v := range s.ConfigMaps["chatguard-batch"].Data {
					env[k] = envSource{value: v}
				}
				// The arguments the Airflow DAG passes for one hour.
				args := []string{"--window-start", "2026-11-01T05:00:00+00:00", "--window-end", "2026-11-01T06:00:00+00:00"}
				p := start(t, filepath.Join(dir, "batch"), args, deps.environ(t, env))
				requireAccepted(t, p, p.exit(t))
				require.Len(t, deps.accepted, 1, "batch never dialled MySQL")
			})
		})
	}
}

// engineSettings are what a binary's "<component>: stage engine ready"
// line reports about the chat data its reviews send and the rows their
// verdicts land in: everything but the class, the one setting that differs
// between the worker (batch) and the console (interactive) by design.
type engineSettings struct {
	PipelineVersion      string   `json:"pipeline_version"`
	PrimaryModel         string   `json:"primary_model"`
	FallbackModel        string   `json:"fallback_model"`
	ImageHosts           []string `json:"image_hosts"`
	ImageInline          bool     `json:"image_inline"`
	DevDigestKey         bool     `json:"dev_digest_key"`
	PrimaryPseudonymize  bool     `json:"primary_pseudonymize"`
	FallbackPseudonymize bool     `json:"fallback_pseudonymize"`
}

// engineReady waits (bounded) for component's stage-engine line and
// returns its settings.
func engineReady(t *testing.T, p *proc, component string) engineSettings {
	t.Helper()
	line := waitForLine(t, p, component+": stage engine ready")
	var s engineSettings
	require.NoError(t, json.Unmarshal([]byte(line), &s), line)
	return s
}

// bootWorker starts the worker with the overlay's settings, reads its
// stage engine's settings, and stops it once it has dialled MySQL (which it
// would wait for): the configuration must have been accepted.
func bootWorker(t *testing.T, dir string, s *manifest.Set) engineSettings {
	t.Helper()
	deps := newDeadDeps(t)
	c := container(t, s, "chatguard-worker")
	p := start(t, filepath.Join(dir, "worker"), c.Args, deps.environ(t, envOf(t, s, c)))
	got := engineReady(t, p, "worker")
	select {
	case <-deps.accepted:
	case err := <-p.done:
		t.Fatalf("worker exited (%v) before dialling MySQL; stderr:\n%s", err, p.stderr())
	case <-time.After(bootLimit):
		t.Fatalf("worker never dialled MySQL; stderr:\n%s", p.stderr())
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	requireAccepted(t, p, p.exit(t))
	require.Contains(t, p.stderr(), "mysql unreachable")
	return got
}

// bootConsole starts the console with the overlay's settings and reads its
// stage engine's settings; it gives up at its schema check, the first thing
// it asks MySQL.
func bootConsole(t *testing.T, dir string, s *manifest.Set) engineSettings {
	t.Helper()
	deps := newDeadDeps(t)
	c := container(t, s, "chatguard-console")
	p := start(t, filepath.Join(dir, "console"), c.Args, deps.environ(t, envOf(t, s, c)))
	got := engineReady(t, p, "console")
	requireAccepted(t, p, p.exit(t))
	require.Len(t, deps.accepted, 1, "console never dialled MySQL")
	require.Contains(t, p.stderr(), "reading the schema version")
	return got
}

// waitForLog waits (bounded) for a JSON log line whose msg is msg and
// returns its string field.
func waitForLog(t *testing.T, p *proc, msg, field string) string {
	t.Helper()
	line := waitForLine(t, p, msg)
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &rec))
	v, _ := rec[field].(string)
	require.NotEmpty(t, v, "log %q has no %s: %s", msg, field, line)
	return v
}

// waitForLine waits (bounded) for a JSON log line whose msg is msg and
// returns it.
func waitForLine(t *testing.T, p *proc, msg string) string {
	t.Helper()
	deadline := time.After(bootLimit)
	for {
		select {
		case line := <-p.lines:
			var rec struct {
				Msg string `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg {
				return line
			}
		case err := <-p.done:
			t.Fatalf("exited (%v) before logging %q; stderr:\n%s", err, msg, p.stderr())
		case <-deadline:
			t.Fatalf("no %q within %s; stderr:\n%s", msg, bootLimit, p.stderr())
		}
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return mfs
}

// checkScrape holds a live scrape to the source inventory: the build info
// carries the stamp, and every chatguard_ family served is one the
// inventory knows, with its type and labels. A family the inventory missed
// would mean its reader has a blind spot, and the alert and dashboard tests
// would wrongly refuse that metric.
func checkScrape(t *testing.T, mfs map[string]*dto.MetricFamily, inv map[string]inventory.Metric) {
	t.Helper()
	bi, ok := mfs["chatguard_build_info"]
	require.True(t, ok, "no chatguard_build_info served")
	require.Len(t, bi.Metric, 1)
	got := map[string]string{}
	for _, l := range bi.Metric[0].Label {
		got[l.GetName()] = l.GetValue()
	}
	require.Equal(t, map[string]string{"version": stamp.Version, "revision": stamp.Revision}, got)
	require.Equal(t, 1.0, bi.Metric[0].GetGauge().GetValue())

	n := 0
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "chatguard_") {
			continue
		}
		n++
		m, ok := inv[name]
		require.True(t, ok, "%s is served but missing from the source inventory", name)
		require.Equal(t, m.Type, strings.ToLower(mf.GetType().String()), name)
		for _, s := range mf.Metric {
			for _, l := range s.Label {
				require.True(t, m.HasLabel(name, l.GetName()), "%s carries label %s, unknown to the inventory %v", name, l.GetName(), m.Labels)
			}
		}
	}
	require.GreaterOrEqual(t, n, 10, "the consumer serves fewer chatguard_ families than expected")
}
