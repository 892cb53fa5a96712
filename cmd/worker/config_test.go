package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/cli/helptest"
	"github.com/chatguard/chatguard/pipeline"
)

func validEnv() map[string]string {
	return map[string]string{
		"CHATGUARD_REVIEW_QUEUE_URL":   "http://sqs/review",
		"CHATGUARD_REVIEW_DLQ_URL":     "http://sqs/review-dlq",
		"CHATGUARD_FEEDBACK_QUEUE_URL": "http://sqs/feedback",
		"CHATGUARD_MYSQL_DSN":          "root@tcp(127.0.0.1:3306)/chatguard",
		"CHATGUARD_CHAT_API_URL":       "http://chat:8080",
		"CHATGUARD_PRIMARY_BASE_URL":   "http://vllm:8000/v1",
		"CHATGUARD_PRIMARY_MODEL":      "qwen",
		"CHATGUARD_DEV_INSECURE_KEYS":  "true",
	}
}

func TestHelpListsEveryFlagWithEnvAndDefault(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"--help"}, func(string) string { return "" }, &out, &errb))
	c := DefaultConfig()
	fs := c.flags()
	var names []string
	fsNames(fs, &names)
	require.NotEmpty(t, names)
	for _, n := range names {
		require.Contains(t, out.String(), "--"+n)
		require.Contains(t, out.String(), cli.EnvName(n))
	}
	for _, w := range []string{"--review-queue-url", "--concurrency", "CHATGUARD_DRAIN_TIMEOUT", "default 16", "default :9090", "default 6h0m0s", "worker migrate"} {
		require.Contains(t, out.String(), w)
	}
}

// fsNames lists the flags from the help text itself, so a flag added to
// the FlagSet without a row would be caught by the row count below.
func fsNames(fs *cli.FlagSet, names *[]string) {
	var b bytes.Buffer
	fs.Usage(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "--") {
			*names = append(*names, strings.Fields(line)[0][2:])
		}
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	with := func(kv ...string) map[string]string {
		env := validEnv()
		for i := 0; i+1 < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return env
	}
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		want   int
		stderr []string
	}{
		{name: "unknown flag", args: []string{"--nope"}, env: validEnv(), want: 2, stderr: []string{"--nope: unknown flag"}},
		{name: "every bad value named", args: []string{"--concurrency=x", "--drain-timeout", "soon"}, env: with("CHATGUARD_MAX_AGE", "old"),
			want: 2, stderr: []string{"--concurrency", "--drain-timeout", "CHATGUARD_MAX_AGE"}},
		{name: "missing settings", env: map[string]string{}, want: 2,
			stderr: []string{"review queue url is required", "review-dlq queue url is required", "feedback queue url is required",
				"mysql dsn is required", "chat api url is required", "--primary-base-url is required"}},
		{name: "bad ranges", env: with("CHATGUARD_CONCURRENCY", "0", "CHATGUARD_HEARTBEAT_INTERVAL", "50s", "CHATGUARD_LOG_LEVEL", "loud",
			"CHATGUARD_ADMIN_ADDR", "nope", "CHATGUARD_RETRY_BASE", "10m"),
			want: 2, stderr: []string{"concurrency 0", "heartbeat interval", "--log-level", "--admin-addr", "retry base"}},
		{name: "fallback without model", env: with("CHATGUARD_FALLBACK_BASE_URL", "http://api/v1"), want: 2, stderr: []string{"--fallback-model is required"}},
		{name: "stray argument", args: []string{"now"}, env: validEnv(), want: 2, stderr: []string{"unexpected arguments"}},
		{name: "migrate needs a dsn", args: []string{"migrate"}, env: map[string]string{}, want: 2, stderr: []string{"--mysql-dsn is required"}},
		{name: "migrate bad dsn", args: []string{"migrate", "--mysql-dsn", "not a dsn"}, env: map[string]string{}, want: 2, stderr: []string{"mysql dsn: "}},
		{name: "purge needs a dsn", args: []string{"purge"}, env: map[string]string{}, want: 2, stderr: []string{"--mysql-dsn is required"}},
		{name: "migrate unknown flag", args: []string{"migrate", "--down"}, env: map[string]string{}, want: 2, stderr: []string{"--down: unknown flag"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, func(k string) string { return tc.env[k] }, &out, &errb)
			require.Equal(t, tc.want, code, errb.String())
			for _, w := range tc.stderr {
				require.Contains(t, errb.String(), w)
			}
		})
	}
}

func TestMissingValuesReportedOnce(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	require.Equal(t, 2, run(context.Background(), nil, func(string) string { return "" }, &out, &errb))
	require.Equal(t, 1, strings.Count(strings.ToLower(strings.ReplaceAll(errb.String(), "-", " ")), "review queue url"), errb.String())
	require.Equal(t, 1, strings.Count(strings.ToLower(strings.ReplaceAll(errb.String(), "-", " ")), "mysql dsn"), errb.String())
}

// One mistake is one line: a prefetch above the concurrency is the job
// loop's to report, and nothing else reports it again.
func TestOneMistakeOneLine(t *testing.T) {
	t.Parallel()
	env := validEnv()
	var out, errb bytes.Buffer
	require.Equal(t, 2, run(context.Background(), []string{"--prefetch", "4", "--concurrency", "2"}, func(k string) string { return env[k] }, &out, &errb))
	problems := helptest.Problems(errb.String())
	require.Len(t, problems, 1, errb.String())
	require.Contains(t, problems[0], "prefetch 4")
}

func TestFlagsAndEnvReachTheParts(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	fs := c.flags()
	env := validEnv()
	env["CHATGUARD_CONCURRENCY"] = "7"
	require.NoError(t, fs.Parse([]string{"--max-age=90m", "--max-receive-count", "3", "--event-buffer=12", "--mysql-max-open-conns=9"}, func(k string) string { return env[k] }))
	require.NoError(t, c.Validate())
	require.Equal(t, 7, c.Loop.Concurrency)
	require.Equal(t, "http://sqs/review", c.ReviewQueue.URL)
	require.Equal(t, "review-dlq", c.ReviewDLQ.Name, "the DLQ keeps its own name")
	require.Equal(t, "http://sqs/review-dlq", c.ReviewDLQ.URL)
	require.Equal(t, 3, c.Loop.MaxReceiveCount)
	require.Equal(t, 90*time.Minute, c.Review.MaxAge)
	require.Equal(t, 12, c.Events.Buffer)
	require.Equal(t, 9, c.MySQL.MaxOpenConns)
	require.Equal(t, "http://chat:8080", c.Chat.BaseURL)
	r := c.Pools.Router()
	require.Equal(t, "qwen", r.Primary.Model)
	require.False(t, r.Fallback.Enabled())
}

func TestEventLimitFlags(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	fs := c.flags()
	env := validEnv()
	env["CHATGUARD_MAX_CLOCK_SKEW"] = "2m"
	require.NoError(t, fs.Parse([]string{"--max-window=72h"}, func(k string) string { return env[k] }))
	require.NoError(t, c.Validate())
	require.Equal(t, pipeline.EventLimits{MaxWindow: 72 * time.Hour, MaxClockSkew: 2 * time.Minute}, c.Review.Limits)
	c.Review.Limits = pipeline.EventLimits{MaxWindow: 0, MaxClockSkew: 2 * time.Hour}
	err := c.Validate()
	require.ErrorContains(t, err, "max window 0s")
	require.ErrorContains(t, err, "max clock skew 2h0m0s")
}

// Each setting that a part's own Config holds is checked by that part
// alone: one mistake, one line.
func TestPartsMistakesOneLineEach(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--stop-check-timeout=0s"}, "check timeout"},
		{[]string{"--stop-channel="}, "channel is empty"},
		{[]string{"--image-hosts=https://cdn.example.com"}, "--image-*: imagecdn: host"},
		{[]string{"--image-inline", "--image-max-bytes=0"}, "max bytes 0"},
		{[]string{"migrate", "--mysql-dsn=not a dsn"}, "mysql dsn: "},
		{[]string{"purge", "--mysql-dsn=not a dsn"}, "mysql dsn: "},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			env := validEnv()
			var out, errb bytes.Buffer
			require.Equal(t, 2, run(context.Background(), tc.args, func(k string) string { return env[k] }, &out, &errb))
			problems := helptest.Problems(errb.String())
			require.Len(t, problems, 1, errb.String())
			require.Contains(t, problems[0], tc.want)
		})
	}
}

// The shadow flags reach their config, the key from the environment, and
// each mistake is named once.
func TestShadowFlags(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	fs := c.flags()
	env := validEnv()
	env["CHATGUARD_SHADOW_API_KEY"] = "sk-candidate"
	require.NoError(t, fs.Parse([]string{"--shadow-rate=0.1", "--shadow-base-url=https://api.example.com/v1", "--shadow-model=large-2",
		"--shadow-price=prompt=2.5,completion=10", "--shadow-budget-tpm=60000", "--redis-addr=127.0.0.1:6379"}, func(k string) string { return env[k] }))
	require.NoError(t, c.Validate())
	require.Equal(t, "sk-candidate", c.Shadow.APIKey)
	require.True(t, c.Shadow.Pseudonymize, "a third-party candidate is pseudonymised by default")
	p := c.shadowPools().Router()
	require.Equal(t, "large-2", p.Primary.Model)
	require.Equal(t, 2.5, p.Primary.Price.PromptPerMTok)
	require.True(t, p.Primary.Pseudonymize)
	require.False(t, p.Fallback.Enabled(), "the candidate has no fallback")
	require.False(t, p.Fleet.Limited(), "the shadow budget is its own, not the live pools' leases")

	c = DefaultConfig()
	fs = c.flags()
	require.NoError(t, fs.Parse([]string{"--shadow-rate=1.5", "--shadow-base-url=ftp://x", "--shadow-concurrency=0", "--shadow-budget-usd-per-day=5"},
		func(k string) string { return env[k] }))
	problems := strings.Split(c.Validate().Error(), "\n")
	for _, want := range []string{"--shadow-rate 1.5", `--shadow-base-url "ftp`, "--shadow-model is required", "--shadow-concurrency", "need --redis-addr"} {
		n := 0
		for _, p := range problems {
			if strings.Contains(p, want) {
				n++
			}
		}
		require.Equal(t, 1, n, "%q once in %q", want, problems)
	}
}
