package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrRunning is returned by Start when another stack holds the state
// directory.
var ErrRunning = errors.New("stack: already running")

// acquireLock takes an exclusive flock on the lock file. The kernel drops
// it when the process dies, so a killed run never blocks the next start.
func acquireLock(cfg Config) (*os.File, error) {
	f, err := os.OpenFile(cfg.LockFile(), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		pid := "unknown"
		if b, err := os.ReadFile(cfg.PIDFile()); err == nil {
			pid = strings.TrimSpace(string(b))
		}
		return nil, fmt.Errorf("%w (pid %s, state %s): use it (its env file is %s) or stop it first with `make stack-down`",
			ErrRunning, pid, cfg.StateDir, cfg.EnvFile())
	}
	return f, nil
}

// Running reports the pid of the stack that holds cfg's state directory,
// or 0 when none does.
func Running(cfg Config) int {
	f, err := os.OpenFile(cfg.LockFile(), os.O_RDWR, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return 0
	}
	b, err := os.ReadFile(cfg.PIDFile())
	if err != nil {
		return -1 // locked but the pid file is not written yet
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return pid
}

// StopRunning asks the stack holding cfg's state directory to stop
// (SIGTERM) and waits until it has released the lock, up to timeout; then
// it sends SIGKILL. It also kills a fauxqs left behind by a killed run. It
// returns whether a stack was running.
func StopRunning(ctx context.Context, cfg Config, timeout time.Duration) (bool, error) {
	pid := Running(cfg)
	if pid == 0 {
		_, err := killStaleFauxqs(cfg)
		_ = os.Remove(cfg.EnvFile())
		return false, err
	}
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for Running(cfg) != 0 {
		select {
		case <-ctx.Done():
			if pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				time.Sleep(200 * time.Millisecond)
			}
			_, _ = killStaleFauxqs(cfg)
			_ = os.Remove(cfg.EnvFile())
			return true, fmt.Errorf("stack: pid %d did not stop within %s; killed it", pid, timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
	_, err := killStaleFauxqs(cfg)
	return true, err
}

// WaitReady waits until the env file of a live stack exists and returns
// it. It fails at once when the process pid (the stack just started in the
// background; 0 to skip the check) exits, and after timeout.
func WaitReady(ctx context.Context, cfg Config, pid int, timeout time.Duration) (Env, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if env, err := ReadEnvFile(cfg.EnvFile()); err == nil {
			if p, _ := strconv.Atoi(env["CHATGUARD_STACK_PID"]); p > 0 && processAlive(p) {
				return env, nil
			}
		}
		if pid > 0 && !processAlive(pid) {
			return nil, fmt.Errorf("stack: the stack (pid %d) exited before it was ready", pid)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stack: not ready within %s (no env file at %s)", timeout, cfg.EnvFile())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkFree fails when something listens on 127.0.0.1:port, for ports a
// child process binds itself.
func checkFree(name string, port int) error {
	ln, err := listen(name, port)
	if err != nil {
		return err
	}
	return ln.Close()
}

// lazyListener is a bound listener that a service may take over; Stop
// closes it when none did.
type lazyListener struct {
	mu    sync.Mutex
	ln    net.Listener
	taken bool
}

func (l *lazyListener) take() *lazyListener {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.taken = true
	return l
}

func (l *lazyListener) closeIfUnused() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.taken {
		_ = l.ln.Close()
	}
}

// processAlive reports whether pid runs and is not a zombie.
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no procfs: trust kill(0)
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// cmdlineHas reports whether pid's command line has the argument arg.
func cmdlineHas(pid int, arg string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	for _, a := range bytes.Split(b, []byte{0}) {
		if string(a) == arg {
			return true
		}
	}
	return false
}

// tail returns up to n last lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
