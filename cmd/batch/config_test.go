package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline/batchrun"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/review"
)

func TestWithDefaultWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 1, 9, 17, 3, 0, time.FixedZone("KST", 9*3600))
	at := func(h int) time.Time { return time.Date(2026, 11, 1, h, 0, 0, 0, time.UTC) }
	tests := []struct {
		name       string
		in         Config
		start, end time.Time
		runID      string
	}{
		{name: "previous full UTC hour", start: at(0).Add(-time.Hour), end: at(0), runID: "batch-20261031T230000Z-20261101T000000Z"},
		{name: "start only", in: Config{Config: batchrun.Config{WindowStart: at(3)}}, start: at(3), end: at(4), runID: "batch-20261101T030000Z-20261101T040000Z"},
		{name: "end only", in: Config{Config: batchrun.Config{WindowEnd: at(3)}}, start: at(2), end: at(3), runID: "batch-20261101T020000Z-20261101T030000Z"},
		{name: "explicit run id kept", in: Config{Config: batchrun.Config{WindowStart: at(1), WindowEnd: at(2), RunID: "manual-1"}}, start: at(1), end: at(2), runID: "manual-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tc.in.WithDefaultWindow(now)
			require.Equal(t, tc.start, got.WindowStart)
			require.Equal(t, tc.end, got.WindowEnd)
			require.Equal(t, tc.runID, got.RunID)
		})
	}
}

func TestValidateNamesEveryProblem(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.WindowStart = time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	c.WindowEnd = c.WindowStart.Add(-time.Hour)
	c.RunID = "bad id/with slash"
	c.MaxEvents = -1
	c.Publish.Concurrency = 0
	c.Athena.OutputLocation = "bucket/prefix"
	c.LogLevel = "loud"
	err := c.Validate()
	for _, w := range []string{"not after start", "run id", "max events", "mysql dsn", "review queue url", "concurrency", "s3://", "--log-level"} {
		require.ErrorContains(t, err, w)
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		want   int
		stdout string
		stderr string
	}{
		{name: "help", args: []string{"--help"}, want: 0, stdout: "CHATGUARD_WINDOW_START"},
		{name: "unknown flag", args: []string{"--nope"}, want: 2, stderr: "--nope: unknown flag"},
		{name: "bad time", args: []string{"--window-start", "yesterday"}, want: 2, stderr: "--window-start"},
		{name: "missing settings", args: []string{"--window-start", "2026-11-01T00:00:00Z"}, want: 2, stderr: "review queue url is required"},
		{name: "stray argument", args: []string{"now"}, want: 2, stderr: "unexpected arguments"},
		{name: "bad env", env: map[string]string{"CHATGUARD_MAX_EVENTS": "many"}, want: 2, stderr: "CHATGUARD_MAX_EVENTS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, func(k string) string { return tc.env[k] }, &out, &errb)
			require.Equal(t, tc.want, code, errb.String())
			require.Contains(t, out.String(), tc.stdout)
			require.Contains(t, errb.String(), tc.stderr)
		})
	}
}

// --mysql-dsn sets the store's own configuration, whose Validate checks
// the DSN: a malformed one is one line, and --dry-run needs none.
func TestMySQLDSNIsTheStoresConfig(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) Config {
		c := DefaultConfig()
		require.NoError(t, c.flags().Parse(append([]string{"--review-queue-url=http://q/review", "--window-start=2026-11-01T00:00:00Z"}, args...),
			func(string) string { return "" }))
		return c.WithDefaultWindow(time.Now())
	}
	c := parse("--mysql-dsn=u@tcp(db:3306)/chatguard")
	require.Equal(t, "u@tcp(db:3306)/chatguard", c.MySQL.DSN)
	require.NoError(t, c.Validate())

	err := parse("--mysql-dsn=not a dsn").Validate()
	require.Error(t, err)
	require.Len(t, strings.Split(err.Error(), "\n"), 1, err.Error())
	require.Contains(t, err.Error(), "mysql dsn")

	err = parse().Validate()
	require.EqualError(t, err, "mysql dsn is required (except with --dry-run)")
	require.NoError(t, parse("--dry-run").Validate())
}

// The run's flags set batchrun.Config itself; runConfig only sizes its
// buffers from the parts.
func TestRunFlagsAreTheRunsConfig(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	require.NoError(t, c.flags().Parse([]string{"--window-start=2026-11-01T03:00:00Z", "--run-id=manual-2", "--max-events=7",
		"--dry-run", "--progress-interval=3s"}, func(string) string { return "" }))
	c = c.WithDefaultWindow(time.Now())
	require.NoError(t, c.Validate())
	rc := c.runConfig()
	require.Equal(t, batchrun.Config{WindowStart: time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC), WindowEnd: time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC),
		RunID: "manual-2", DryRun: true, MaxEvents: 7, ProgressInterval: 3 * time.Second,
		RoomBuffer: int(c.Athena.PageSize), EventBuffer: 10 * c.Publish.Concurrency}, rc)
	require.NoError(t, rc.Validate())
}

// The sweep's settings: its default window is the latest hour whose grace
// has passed, its pipeline version is the one the workers store for the
// same model names, and every bad setting is named.
func TestSweepConfig(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) Config {
		c := DefaultConfig()
		require.NoError(t, c.flags().Parse(append([]string{"--review-queue-url=http://q/review", "--mysql-dsn=u@tcp(db:3306)/chatguard", "--sweep"}, args...),
			func(string) string { return "" }))
		return c
	}
	now := time.Date(2026, 11, 1, 9, 14, 0, 0, time.UTC)
	c := parse("--primary-model=judge-a").WithDefaultWindow(now)
	require.Equal(t, DefaultSweepGrace, c.SweepGrace)
	require.Equal(t, time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC), c.WindowStart, "09:14 is before 09:00 + 15m: the hour before")
	require.Equal(t, "batch-20261101T070000Z-20261101T080000Z", c.RunID)
	require.NoError(t, c.Validate())
	c = parse("--primary-model=judge-a").WithDefaultWindow(now.Add(time.Minute))
	require.Equal(t, time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC), c.WindowStart)

	for _, tc := range []struct{ fallbackURL, fallbackModel string }{{"", ""}, {"http://fallback/v1", "judge-b"}} {
		router, err := llm.New(llm.Config{
			Primary:  llm.PoolConfig{BaseURL: "http://primary/v1", Model: "judge-a", MaxConcurrency: 1},
			Fallback: llm.PoolConfig{BaseURL: tc.fallbackURL, Model: tc.fallbackModel, MaxConcurrency: 1},
		}, nil)
		require.NoError(t, err)
		rv, err := review.New(review.Config{}, router, nil, nil, nil)
		require.NoError(t, err)
		c := parse("--primary-model=judge-a", "--fallback-model="+tc.fallbackModel).WithDefaultWindow(now)
		require.Equal(t, rv.PipelineVersion(), c.PipelineVersion, "the workers' version for fallback %q", tc.fallbackModel)
		require.Equal(t, c.PipelineVersion, c.runConfig().PipelineVersion)
	}
	require.NotEqual(t, parse("--primary-model=judge-a").WithDefaultWindow(now).PipelineVersion,
		parse("--primary-model=judge-b").WithDefaultWindow(now).PipelineVersion)
	require.Empty(t, DefaultConfig().WithDefaultWindow(now).PipelineVersion, "no sweep, no version")

	// Any done verdict is coverage unless the sweep is asked to re-review
	// other pipeline versions (the ConfigMap's setting, in either mode).
	require.False(t, c.RereviewOtherVersions)
	c = parse("--primary-model=judge-a").WithDefaultWindow(now)
	require.NoError(t, c.flags().Parse(nil, func(k string) string { return map[string]string{"CHATGUARD_SWEEP_REREVIEW": "true"}[k] }))
	require.True(t, c.runConfig().RereviewOtherVersions)
	require.NoError(t, c.Validate())

	bad := parse("--sweep-grace=-1m", "--window-start=2026-11-01T00:00:00.5Z", "--window-end=2026-11-01T02:00:00Z", "--mysql-dsn=", "--dry-run").WithDefaultWindow(now)
	err := bad.Validate()
	for _, w := range []string{"sweep grace -1m0s must be within 0..24h0m0s", "whole second and last at most 1h0m0s", "--primary-model", "mysql dsn is required with --sweep"} {
		require.ErrorContains(t, err, w)
	}
}
