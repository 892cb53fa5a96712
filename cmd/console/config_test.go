package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
	cfg.MySQL.DSN, cfg.Chat.BaseURL, cfg.FeedbackQueueURL, cfg.RedisAddr = "u@tcp(h:3306)/d", "http://chat", "http://sqs/q", "r:6379"
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
