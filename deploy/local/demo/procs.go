package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Child is one process the demo started, as the report shows it.
type Child struct {
	Name string
	// Path is the executable; every child of a run lives under BinDir.
	Path string
	PID  int
	// Log is the file that holds the child's stderr (and stdout, except
	// batch's JSON summary).
	Log string
	// ExitCode is -1 while it runs and when a signal ended it.
	ExitCode int
	// Killed says the demo had to kill it (SIGKILL) after the grace.
	Killed bool
}

// proc is a running child: it owns the process and the goroutine that
// waits for it, which ends when the process does.
type proc struct {
	Child
	cmd    *exec.Cmd
	logF   *os.File
	done   chan struct{}
	mu     sync.Mutex
	exit   error
	stdout *bytes.Buffer
}

// startProc starts path with args and env, its stderr (and stdout unless
// captureStdout) appended to logDir/name.log. The child gets its own
// process group, so a Ctrl-C at the terminal reaches only the demo, which
// then stops its children in order; Pdeathsig kills it if the demo itself
// is killed.
func startProc(name, path string, args, env []string, dir, logDir string, captureStdout bool) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stderr = f
	p := &proc{Child: Child{Name: name, Path: path, Log: logPath, ExitCode: -1}, cmd: cmd, logF: f, done: make(chan struct{})}
	if captureStdout {
		p.stdout = &bytes.Buffer{}
		cmd.Stdout = io.MultiWriter(p.stdout, f)
	} else {
		cmd.Stdout = f
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.PID = cmd.Process.Pid
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exit = err
		p.ExitCode = cmd.ProcessState.ExitCode()
		p.mu.Unlock()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// oneShot says the child runs to its own end rather than until stopped:
// the batch, the flush row's sweep, and the Athena stand-in serving it
// (stopped once the sweep is done).
func (p *proc) oneShot() bool {
	return p.Name == "batch" || p.Name == "sweep" || p.Name == "athenasim"
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// snapshot returns the child's record; safe while it runs.
func (p *proc) snapshot() Child {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Child
}

// wait blocks until the process exits or timeout passes; it reports
// whether it exited.
func (p *proc) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// stop sends SIGTERM and waits up to grace for the exit; a child still
// running then is killed with its process group. It returns an error
// unless the child exited 0 by itself.
func (p *proc) stop(grace time.Duration) error {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	if !p.wait(grace) {
		_ = syscall.Kill(-p.PID, syscall.SIGKILL)
		p.mu.Lock()
		p.Killed = true
		p.mu.Unlock()
		p.wait(10 * time.Second)
		return fmt.Errorf("%s (pid %d) did not exit within %s of SIGTERM; killed it (log %s)", p.Name, p.PID, grace, p.Log)
	}
	return p.result()
}

// result is the outcome of an exited child.
func (p *proc) result() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit != nil {
		return fmt.Errorf("%s (pid %d) exited: %v; last lines of %s:\n%s", p.Name, p.PID, p.exit, p.Log, tail(p.Log, 15))
	}
	return nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// runCmd runs a short command to completion, killing it (and its process
// group) when ctx ends first; the error carries the output.
func runCmd(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	what := filepath.Base(name) + " " + strings.Join(args, " ")
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return out.String(), fmt.Errorf("%s: %w\n%s", what, err, strings.TrimSpace(out.String()))
		}
		return out.String(), nil
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return out.String(), fmt.Errorf("%s: %w", what, context.Cause(ctx))
	}
}
