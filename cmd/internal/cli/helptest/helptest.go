// Package helptest pins a command's --help output to a golden file, so a
// change that moves where a flag is declared cannot silently change its
// name, environment variable, default or wording.
package helptest

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update-help", false, "rewrite the --help golden files under testdata/help")

// RunFunc is a binary's run function without its context and environment.
type RunFunc func(args []string, stdout, stderr *bytes.Buffer) int

// Main is a binary's run function, the one its main calls.
type Main func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int

// CheckAll checks the --help of the binary itself and of each of its
// subcommands (see Check; a nested one is written "eval build-set"), each
// in a subtest named cmd=<subcommand>
// ("cmd=" for the binary), running main with an empty environment so
// that no variable of the test's changes a default.
func CheckAll(t *testing.T, main Main, subcommands ...string) {
	t.Helper()
	run := func(args []string, stdout, stderr *bytes.Buffer) int {
		return main(context.Background(), args, func(string) string { return "" }, stdout, stderr)
	}
	for _, sub := range append([]string{""}, subcommands...) {
		t.Run("cmd="+sub, func(t *testing.T) {
			if sub == "" {
				Check(t, run)
				return
			}
			Check(t, run, strings.Fields(sub)...)
		})
	}
}

// Check runs the command given by args with --help appended and compares
// what it printed with testdata/help/<name>.txt, where name is args joined
// by dashes (the binary itself when args is empty: "main"). With
// -update-help it rewrites the file instead. The command must exit 0.
func Check(t *testing.T, run RunFunc, args ...string) {
	t.Helper()
	name := "main"
	if len(args) > 0 {
		name = strings.Join(args, "-")
	}
	var stdout, stderr bytes.Buffer
	if code := run(append(append([]string{}, args...), "--help"), &stdout, &stderr); code != 0 {
		t.Fatalf("%v --help: exit %d, stderr %q", args, code, stderr.String())
	}
	got := append(stdout.Bytes(), stderr.Bytes()...)
	path := filepath.Join("testdata", "help", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-help to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%v --help differs from %s: a flag's name, variable, default or text changed.\n--- got\n%s\n--- want\n%s", args, path, got, want)
	}
}

// Problems returns the problem lines of a usage error as cli.Fail prints
// them ("  - <problem>"), so a test can count that each mistake is one.
func Problems(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if p, ok := strings.CutPrefix(line, "  - "); ok {
			out = append(out, p)
		}
	}
	return out
}
