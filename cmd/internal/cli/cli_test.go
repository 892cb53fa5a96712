package cli

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/buildinfo"
)

type conf struct {
	Addr    string
	N       int
	Verbose bool
	Wait    time.Duration
	At      time.Time
}

func setup(t *testing.T) (*FlagSet, *conf) {
	t.Helper()
	c := &conf{Addr: ":8080", N: 4, Wait: time.Second}
	fs := NewFlagSet("demo", "Demo command.")
	fs.StringVar(&c.Addr, "admin-addr", "admin listen address")
	fs.IntVar(&c.N, "concurrency", "jobs at once")
	fs.BoolVar(&c.Verbose, "verbose", "log more")
	fs.DurationVar(&c.Wait, "wait", "how long to wait")
	fs.TimeVar(&c.At, "at", "a time")
	return fs, c
}

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    conf
		wantErr []string
	}{
		{name: "defaults", want: conf{Addr: ":8080", N: 4, Wait: time.Second}},
		{name: "env", env: map[string]string{"CHATGUARD_CONCURRENCY": "9", "CHATGUARD_ADMIN_ADDR": ":0"}, want: conf{Addr: ":0", N: 9, Wait: time.Second}},
		{name: "flag beats env", args: []string{"--concurrency", "3"}, env: map[string]string{"CHATGUARD_CONCURRENCY": "9"}, want: conf{Addr: ":8080", N: 3, Wait: time.Second}},
		{name: "bool and equals", args: []string{"--verbose", "--wait=2s", "-at=2026-11-01T00:00:00Z"}, want: conf{Addr: ":8080", N: 4, Wait: 2 * time.Second, Verbose: true, At: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}},
		{
			name:    "every bad value named",
			args:    []string{"--concurrency=x", "--wait", "soon", "--nope"},
			env:     map[string]string{"CHATGUARD_AT": "yesterday"},
			wantErr: []string{"CHATGUARD_AT", "--concurrency", "--wait", "--nope: unknown flag"},
		},
		{name: "missing value", args: []string{"--wait"}, wantErr: []string{"--wait: needs a value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs, c := setup(t)
			err := fs.Parse(tc.args, func(k string) string { return tc.env[k] })
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, w := range tc.wantErr {
					require.ErrorContains(t, err, w)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, *c)
		})
	}
}

func TestHelpListsEnvAndDefault(t *testing.T) {
	t.Parallel()
	fs, _ := setup(t)
	require.ErrorIs(t, fs.Parse([]string{"--help"}, func(string) string { return "" }), ErrHelp)
	var buf bytes.Buffer
	fs.Usage(&buf)
	out := buf.String()
	require.Contains(t, out, "--concurrency")
	require.Contains(t, out, "CHATGUARD_CONCURRENCY")
	require.Contains(t, out, "default 4")
	require.Contains(t, out, "CHATGUARD_ADMIN_ADDR")
}

// TestHelpMarkdownIsTheHelpAsATable checks --help=markdown: the same rows
// as --help, sorted, an empty default shown as "", and a pipe in a usage
// or a default escaped so that it cannot split a cell.
func TestHelpMarkdownIsTheHelpAsATable(t *testing.T) {
	t.Parallel()
	fs, _ := setup(t)
	level, empty := "a|b", ""
	fs.StringVar(&level, "level", "debug|info")
	fs.StringVar(&empty, "note", "a note")
	var stdout, stderr bytes.Buffer
	code, done := fs.ParseCommand([]string{"--help=" + HelpMarkdown}, func(string) string { return "" }, &stdout, &stderr)
	require.True(t, done)
	require.Equal(t, 0, code)
	require.Empty(t, stderr.String())
	require.Equal(t, "| flag | environment variable | default | meaning |\n"+
		"| --- | --- | --- | --- |\n"+
		"| `--admin-addr` | `CHATGUARD_ADMIN_ADDR` | `:8080` | admin listen address |\n"+
		"| `--at` | `CHATGUARD_AT` | `(none)` | a time |\n"+
		"| `--concurrency` | `CHATGUARD_CONCURRENCY` | `4` | jobs at once |\n"+
		"| `--level` | `CHATGUARD_LEVEL` | `a\\|b` | debug\\|info |\n"+
		"| `--note` | `CHATGUARD_NOTE` | `\"\"` | a note |\n"+
		"| `--verbose` | `CHATGUARD_VERBOSE` | `false` | log more |\n"+
		"| `--wait` | `CHATGUARD_WAIT` | `1s` | how long to wait |\n", stdout.String())

	// Plain --help on a fresh set stays text.
	fs, _ = setup(t)
	require.ErrorIs(t, fs.Parse([]string{"--help"}, func(string) string { return "" }), ErrHelp)
	stdout.Reset()
	fs.Usage(&stdout)
	require.True(t, strings.HasPrefix(stdout.String(), "Usage: demo [flags]"), stdout.String())

	// A format nobody knows is a usage error, not the text help.
	fs, _ = setup(t)
	err := fs.Parse([]string{"--help=html"}, func(string) string { return "" })
	require.ErrorContains(t, err, `unknown help format`)
	require.NotErrorIs(t, err, ErrHelp)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	fs, _ := setup(t)
	var stdout, stderr bytes.Buffer
	code, done := fs.ParseCommand([]string{"--concurrency", "3", "--version"}, func(string) string { return "" }, &stdout, &stderr)
	require.True(t, done)
	require.Equal(t, 0, code)
	require.Empty(t, stderr.String())
	require.Equal(t, "demo "+buildinfo.Get().String()+"\n", stdout.String())

	// A subcommand parsing with Parse alone gets a usage error, not a
	// silent success.
	fs, _ = setup(t)
	require.ErrorIs(t, fs.Parse([]string{"-version"}, func(string) string { return "" }), ErrVersion)

	// A command with a flag of its own named version keeps it.
	own := NewFlagSet("own", "Has a version flag.")
	v := ""
	own.StringVar(&v, "version", "schema version")
	require.NoError(t, own.Parse([]string{"--version", "7"}, func(string) string { return "" }))
	require.Equal(t, "7", v)
}

func TestNewRegistryExportsBuildInfo(t *testing.T) {
	t.Parallel()
	mfs, err := NewRegistry().Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	require.True(t, names[buildinfo.MetricName], "chatguard_build_info missing from %v", names)
	require.True(t, names["go_goroutines"])
	require.True(t, names["process_start_time_seconds"] || runtime.GOOS != "linux")
}

// A list flag trims its items, drops empty ones, lets the flag replace
// the environment's list, and shows its default joined (or "" if none).
func TestListVar(t *testing.T) {
	t.Parallel()
	hosts, none := []string{"a.example", "b.example"}, []string(nil)
	fs := NewFlagSet("demo", "Demo command.")
	fs.ListVar(&hosts, "hosts", "allowed hosts")
	fs.ListVar(&none, "none", "nothing by default")
	var help bytes.Buffer
	fs.Usage(&help)
	require.Contains(t, help.String(), "default a.example,b.example")
	require.Contains(t, help.String(), `default ""`)

	env := map[string]string{"CHATGUARD_HOSTS": "env.example", "CHATGUARD_NONE": " x , ,y "}
	require.NoError(t, fs.Parse([]string{"--hosts= c.example , .d.example ,"}, func(k string) string { return env[k] }))
	require.Equal(t, []string{"c.example", ".d.example"}, hosts)
	require.Equal(t, []string{"x", "y"}, none)
	require.NoError(t, fs.Parse([]string{"--hosts= , "}, func(string) string { return "" }))
	require.Empty(t, hosts)
}
