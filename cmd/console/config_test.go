package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/cli/helptest"
)

func TestValidateNamesEveryProblem(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OperatorURL, cfg.TrustedProxies, cfg.MaxReviews = "http://worker:9090", "10.0.0.0/8,not-a-cidr", 0
	cfg.Outbox.FeedbackRetryMax = cfg.Outbox.FeedbackRetryInitial / 2
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{"--mysql-dsn is required", "--redis-addr is required", "--operator-token-file is required",
		"--trusted-proxies: \"not-a-cidr\"", "--max-reviews", "--feedback-retry-initial/--feedback-retry-max"} {
		require.Contains(t, err.Error(), want)
	}
	cfg = DefaultConfig()
	cfg.DevInsecureKeys = true
	cfg.MySQL.DSN, cfg.Chat.BaseURL, cfg.Feedback.URL, cfg.RedisAddr = "u@tcp(h:3306)/d", "http://chat", "http://sqs/q", "r:6379"
	cfg.LLM.Primary.BaseURL, cfg.LLM.Primary.Model = "http://llm/v1", "m"
	require.ErrorContains(t, cfg.Validate(), "give --trusted-proxies", "nobody could sign in")
	cfg.DevLogin = true
	require.NoError(t, cfg.Validate())
}

func TestHelpAndBadUsage(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"--help"}, func(string) string { return "" }, &out, &errb))
	require.Contains(t, out.String(), "CHATGUARD_OPERATOR_TOKEN_FILE")
	out.Reset()
	require.Equal(t, 2, run(context.Background(), nil, func(string) string { return "" }, &out, &errb))
	require.True(t, strings.Contains(errb.String(), "--mysql-dsn is required"))
}

// Each mistake is reported once, whether it is the web app's setting
// (console.Config) or the binary's.
func TestEachMistakeIsReportedOnce(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ClientBuffer, cfg.Outbox.FeedbackSweepBatch, cfg.MaxReviews, cfg.MySQL.MaxOpenConns = 0, 0, 0, 0
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{"subscriber buffer", "--feedback-sweep-batch", "--max-reviews", "--mysql-max-open-conns", "--mysql-dsn"} {
		require.Equal(t, 1, strings.Count(err.Error(), want), "%q in:\n%v", want, err)
	}
}

// validConsoleEnv is a configuration Validate accepts.
func validConsoleEnv() map[string]string {
	return map[string]string{
		"CHATGUARD_MYSQL_DSN": "u@tcp(h:3306)/d", "CHATGUARD_CHAT_API_URL": "http://chat", "CHATGUARD_FEEDBACK_QUEUE_URL": "http://sqs/q",
		"CHATGUARD_REDIS_ADDR": "r:6379", "CHATGUARD_PRIMARY_BASE_URL": "http://llm/v1", "CHATGUARD_PRIMARY_MODEL": "m", "CHATGUARD_DEV_LOGIN": "true",
		"CHATGUARD_DEV_INSECURE_KEYS": "true",
	}
}

// Each setting that a part's own Config holds is checked by that part
// alone: one mistake, one line.
func TestPartsMistakesOneLineEach(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--stop-check-timeout=0s"}, "check timeout"},
		{[]string{"--stop-key-prefix="}, "key prefix is empty"},
		{[]string{"--live-max-len=3"}, "max len 3"},
		{[]string{"--live-ttl=10ms"}, "ttl 10ms"},
		{[]string{"--image-hosts=img.example.com,CDN.example.com"}, "CDN.example.com"},
		{[]string{"--feedback-queue-url= "}, "feedback queue url is required"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			env := validConsoleEnv()
			var out, errb bytes.Buffer
			require.Equal(t, 2, run(context.Background(), tc.args, func(k string) string { return env[k] }, &out, &errb))
			problems := helptest.Problems(errb.String())
			require.Len(t, problems, 1, errb.String())
			require.Contains(t, problems[0], tc.want)
		})
	}
}

// The live-stream flags set redislive.Config itself.
func TestLiveFlagsBindTheStreamsConfig(t *testing.T) {
	c := DefaultConfig()
	require.NoError(t, c.flags().Parse([]string{"--live-key-prefix=lv:", "--live-max-len=64", "--live-ttl=1m"}, func(string) string { return "" }))
	require.Equal(t, "lv:", c.Live.KeyPrefix)
	require.Equal(t, int64(64), c.Live.MaxLen)
	require.Equal(t, time.Minute, c.Live.TTL)
	require.Positive(t, c.Live.ReadCount, "no flag: the adapter's default")
}
