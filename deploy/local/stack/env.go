package stack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Env is the set of variables the stack publishes in its env file.
type Env map[string]string

// Keys returns the variable names, sorted.
func (e Env) Keys() []string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Encode renders the env file: one KEY='value' line per variable, sorted,
// so that both `set -a; . .stack/env` and stacktest read it. It fails on a
// value a shell could not take back verbatim inside single quotes.
func (e Env) Encode() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# Written by the chatguard local stack (deploy/local). Do not edit: it is\n")
	b.WriteString("# rewritten on every start and removed on stop.\n")
	for _, k := range e.Keys() {
		v := e[k]
		if strings.ContainsAny(v, "'\n") {
			return nil, fmt.Errorf("env: %s has a quote or newline", k)
		}
		fmt.Fprintf(&b, "%s='%s'\n", k, v)
	}
	return b.Bytes(), nil
}

// WriteFile writes the env file atomically (temp file and rename), so a
// reader never sees half of it.
func (e Env) WriteFile(path string) error {
	data, err := e.Encode()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".env-*")
	if err != nil {
		return fmt.Errorf("env: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("env: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("env: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("env: %w", err)
	}
	return nil
}

// ReadEnvFile parses an env file written by WriteFile. It returns an error
// wrapping fs.ErrNotExist when there is none.
func ReadEnvFile(path string) (Env, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("env: %w", err)
	}
	defer f.Close()
	env := Env{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("env: %s: malformed line %q", path, line)
		}
		env[k] = strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'")
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("env: %w", err)
	}
	if len(env) == 0 {
		return nil, errors.New("env: empty env file")
	}
	return env, nil
}
