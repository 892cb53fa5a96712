package demo

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// StackEnv is the set of variables the local stack publishes in its env
// file (.stack/env).
type StackEnv map[string]string

// ReadStackEnv parses the stack's env file (KEY='value' lines). It fails
// when the file is missing or malformed; a stale file is caught by Alive.
func ReadStackEnv(path string) (StackEnv, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("stack env: %w", err)
	}
	defer f.Close()
	env := StackEnv{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("stack env: %s: malformed line %q", path, line)
		}
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = v[1 : len(v)-1]
		}
		env[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stack env: %w", err)
	}
	if len(env) == 0 {
		return nil, fmt.Errorf("stack env: %s is empty", path)
	}
	return env, nil
}

// Require returns the values of keys, or one error naming every missing key.
func (e StackEnv) Require(keys ...string) ([]string, error) {
	out := make([]string, len(keys))
	var missing []string
	for i, k := range keys {
		if out[i] = e[k]; out[i] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("stack env: missing %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// Alive reports whether the stack that wrote the env file still runs.
func (e StackEnv) Alive() bool {
	pid, err := strconv.Atoi(e["CHATGUARD_STACK_PID"])
	return err == nil && pid > 0 && processAlive(pid)
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// childEnv is the environment of a child process: this process's
// environment without any CHATGUARD_ or AWS_ variable (a stray one in the
// caller's shell must not point a child elsewhere), then the stack's
// variables, then overrides. Later entries win.
func childEnv(base []string, stack StackEnv, overrides map[string]string) []string {
	var out []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CHATGUARD_") || strings.HasPrefix(k, "AWS_") {
			continue
		}
		out = append(out, kv)
	}
	keys := make([]string, 0, len(stack))
	for k := range stack {
		if _, over := overrides[k]; !over {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+stack[k])
	}
	keys = keys[:0]
	for k := range overrides {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+overrides[k])
	}
	return out
}
