package main

import (
	"bytes"
	"context"
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func setup(t *testing.T) (*flag.FlagSet, *int, *time.Duration) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	workers := fs.Int("workers", 2, "")
	timeout := fs.Duration("timeout", time.Minute, "")
	return fs, workers, timeout
}

func TestParseTakesTheEnvTwinUnlessTheFlagIsGiven(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		args        []string
		env         map[string]string
		workers     int
		timeout     time.Duration
		errContains string
	}{
		{name: "defaults", workers: 2, timeout: time.Minute},
		{name: "env", env: map[string]string{"CHATGUARD_WORKERS": "3", "CHATGUARD_TIMEOUT": "5m"}, workers: 3, timeout: 5 * time.Minute},
		{name: "flag wins", args: []string{"--workers", "4"}, env: map[string]string{"CHATGUARD_WORKERS": "3"}, workers: 4, timeout: time.Minute},
		{name: "bad env", env: map[string]string{"CHATGUARD_TIMEOUT": "soon"}, errContains: `CHATGUARD_TIMEOUT="soon"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs, workers, timeout := setup(t)
			err := parse(fs, tc.args, func(k string) string { return tc.env[k] })
			if tc.errContains != "" {
				require.ErrorContains(t, err, tc.errContains)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.workers, *workers)
			require.Equal(t, tc.timeout, *timeout)
		})
	}
}

func TestRunUsage(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	var out, errb bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"--help"}, none, &out, &errb))
	require.Contains(t, errb.String(), "keep-stack")
	errb.Reset()
	require.Equal(t, 2, run(context.Background(), []string{"extra"}, none, &out, &errb))
	require.Contains(t, errb.String(), `unexpected arguments ["extra"]`)
	errb.Reset()
	require.Equal(t, 2, run(context.Background(), []string{"--workers", "x"}, none, &out, &errb))
	errb.Reset()
	require.Equal(t, 1, run(context.Background(), []string{"--workers", "9", "--root", t.TempDir()}, none, &out, &errb), "config errors fail the run")
	require.Contains(t, errb.String(), "workers 9 must be in 1..8")
}
