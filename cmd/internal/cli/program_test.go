package cli

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type progConf struct {
	N        int
	LogLevel string
}

func (c progConf) Validate() error {
	var errs []error
	if c.N <= 0 {
		errs = append(errs, errors.New("n must be positive"))
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

type runFunc func(context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }

// program returns a Program over a fresh progConf whose Main runs fn with
// the parsed configuration.
func program(fn func(progConf, *slog.Logger) error) Program {
	c := &progConf{N: 1, LogLevel: "info"}
	fs := NewFlagSet("demo", "Demo command.")
	fs.IntVar(&c.N, "n", "how many")
	fs.StringVar(&c.LogLevel, "log-level", "debug|info|warn|error")
	return Program{Name: "demo", Flags: fs, Config: c, LogLevel: &c.LogLevel,
		Main: func(log *slog.Logger) Runner {
			return runFunc(func(context.Context) error { return fn(*c, log) })
		}}
}

func TestProgramExitCodes(t *testing.T) {
	var seen progConf
	ok := func(c progConf, _ *slog.Logger) error { seen = c; return nil }
	for _, tc := range []struct {
		name   string
		args   []string
		fn     func(progConf, *slog.Logger) error
		code   int
		stderr []string
	}{
		{"help", []string{"--help"}, ok, 0, nil},
		{"every mistake at once, nothing run", []string{"--n=0", "--log-level=loud"}, ok, ExitUsage, []string{"n must be positive", `--log-level "loud"`}},
		{"main fails, logged once", []string{"--n=3"}, func(progConf, *slog.Logger) error { return errors.New("boom") }, 1, []string{`"msg":"demo: stopped","err":"boom"`}},
		{"clean stop", []string{"--n=3", "--log-level=debug"}, ok, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen = progConf{}
			var out, errOut bytes.Buffer
			code := program(tc.fn).Run(context.Background(), tc.args, func(string) string { return "" }, &out, &errOut)
			require.Equal(t, tc.code, code, errOut.String())
			for _, w := range tc.stderr {
				require.Contains(t, errOut.String(), w)
				require.Equal(t, 1, strings.Count(errOut.String(), w))
			}
		})
	}
	require.Equal(t, progConf{N: 3, LogLevel: "debug"}, seen, "Main sees the parsed configuration, not the defaults")
}

func TestProgramLogsAtTheConfiguredLevel(t *testing.T) {
	var errOut bytes.Buffer
	code := program(func(_ progConf, log *slog.Logger) error {
		log.Debug("hidden")
		log.Warn("shown")
		return nil
	}).Run(context.Background(), []string{"--log-level=warn"}, func(string) string { return "" }, &bytes.Buffer{}, &errOut)
	require.Equal(t, 0, code)
	require.NotContains(t, errOut.String(), "hidden")
	require.Contains(t, errOut.String(), "shown")
}
