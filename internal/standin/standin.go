// Package standin runs private instances of the local stack's stand-ins
// (deploy/local: the LLM simulator, the Athena stand-in, the chat API, the
// sample-lake generator) as separate processes for tests of the production
// module. The production module never imports deploy/local, which is a
// module of its own: this package builds the stand-ins' commands in the
// workspace (go.work at the repository root) and talks to them only over
// their wire protocols and admin endpoints, as tests do with the running
// stack's instances (internal/stacktest).
//
// A test that needs a stand-in only its own traffic reaches (fault
// injection, call counts, a lake of its own) starts one here; a test that
// can share one uses the stack's. Every process started here is stopped when
// its test ends, and dies with the test binary (Linux: the parent-death
// signal). Binaries are built once per test binary into a temporary folder
// that Main removes, so a package using standin runs its tests through Main:
//
//	func TestMain(m *testing.M) { standin.Main(m) }
package standin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// module is the stand-ins' module (deploy/local).
const module = "github.com/chatguard/chatguard/deploy/local"

// Commands of deploy/local that tests start.
const (
	LLMSimCommand    = module + "/llmsim/cmd/llmsim"
	AthenaSimCommand = module + "/athenasim/cmd/athenasim"
	ChatAPICommand   = module + "/chatapi/cmd/chatapi"
	GenlakeCommand   = module + "/sampledata/cmd/genlake"
)

// Bounds of the waits on a process.
const (
	buildTimeout = 5 * time.Minute
	startTimeout = time.Minute
	stopTimeout  = 15 * time.Second
)

var (
	inMain atomic.Bool

	binMu   sync.Mutex
	binDir  string
	binOnce = map[string]*buildResult{}
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// Main runs the tests and then removes the binaries built for them; call it
// from TestMain. It does not return.
func Main(m *testing.M) {
	inMain.Store(true)
	code := m.Run()
	binMu.Lock()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	binMu.Unlock()
	os.Exit(code)
}

// RepoRoot returns the repository root: the nearest folder above the
// working directory holding go.work.
func RepoRoot() (string, error) {
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
			return "", errors.New("standin: no go.work above the working directory: the stand-ins build in the repository's workspace")
		}
		dir = parent
	}
}

// Build builds the command pkg (an import path in the workspace) once per
// test binary and returns the executable's path. It fails t when the build
// fails or when the package's TestMain does not run through Main.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	if !inMain.Load() {
		t.Fatalf("standin: run the package's tests through standin.Main (func TestMain(m *testing.M) { standin.Main(m) }) so that built stand-ins are removed")
	}
	binMu.Lock()
	r, ok := binOnce[pkg]
	if !ok {
		r = &buildResult{}
		binOnce[pkg] = r
	}
	binMu.Unlock()
	r.once.Do(func() { r.path, r.err = build(pkg) })
	if r.err != nil {
		t.Fatalf("%v", r.err)
	}
	return r.path
}

func build(pkg string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	binMu.Lock()
	if binDir == "" {
		binDir, err = os.MkdirTemp("", "chatguard-standins-")
	}
	dir := binDir
	binMu.Unlock()
	if err != nil {
		return "", fmt.Errorf("standin: %w", err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	// The workspace is what makes deploy/local's packages buildable here.
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"))
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("standin: go build %s: %v: %s", pkg, err, b)
	}
	return out, nil
}

// Proc is one stand-in process.
type Proc struct {
	// URL is what the process printed first on stdout: its base URL.
	URL string

	name   string
	cmd    *exec.Cmd
	stderr *tailBuffer
	exited chan error
}

// Start runs bin with args, waits (bounded) until it prints its URL on
// stdout, and stops it with SIGTERM (SIGKILL after stopTimeout) when t
// ends, logging the tail of its stderr if t failed.
func Start(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{name: filepath.Base(bin), stderr: &tailBuffer{max: 16 << 10}, exited: make(chan error, 1)}
	stdout := &firstLine{line: make(chan string, 1)}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = stdout, p.stderr
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("standin: start %s: %v", p.name, err)
	}
	go func() {
		err := p.cmd.Wait()
		stdout.close() // a process that exits before printing a line
		p.exited <- err
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", p.name, p.stderr.String())
		}
	})
	select {
	case p.URL = <-stdout.line:
	case <-time.After(startTimeout):
		t.Fatalf("standin: %s printed no URL in %s; stderr:\n%s", p.name, startTimeout, p.stderr.String())
	}
	if !strings.HasPrefix(p.URL, "http://") {
		t.Fatalf("standin: %s did not start (first line %q); stderr:\n%s", p.name, p.URL, p.stderr.String())
	}
	return p
}

// stop sends SIGTERM and waits for the exit, killing the process after
// stopTimeout.
func (p *Proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Run runs bin with args to completion (bounded by timeout) and returns its
// stdout, failing t on a non-zero exit.
func Run(t testing.TB, timeout time.Duration, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = sysProcAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("standin: %s: %v; stderr:\n%s", filepath.Base(bin), err, stderr.String())
	}
	return stdout.String()
}

// firstLine sends the first line written to it (trimmed; "" when the
// writer is closed before a whole line came) on line, and discards the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	line chan string
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.send(string(w.buf[:i]))
	}
	return len(p), nil
}

func (w *firstLine) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.sent {
		w.send("")
	}
}

// send is called with mu held, once.
func (w *firstLine) send(s string) {
	w.sent, w.buf = true, nil
	w.line <- strings.TrimSpace(s)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = append([]byte(nil), w.b[len(w.b)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
