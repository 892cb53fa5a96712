package main

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/reviewers/reviewerstest"
	"github.com/chatguard/chatguard/pipeline"
)

// TestEngineSettingsAreEveryReviewingBinarys boots the console's stage
// engine from its flags' environment for each shared case (the worker's
// test boots its own from the same values) and checks the privacy
// settings and the pipeline version it reports and logs: on-demand
// verdicts land in the rows the workers write, under the same controls.
func TestEngineSettingsAreEveryReviewingBinarys(t *testing.T) {
	t.Parallel()
	for _, tc := range reviewerstest.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			env := map[string]string{
				"CHATGUARD_MYSQL_DSN":          "u@tcp(127.0.0.1:3306)/chatguard",
				"CHATGUARD_CHAT_API_URL":       "http://chat:8080",
				"CHATGUARD_FEEDBACK_QUEUE_URL": "http://sqs/feedback",
				"CHATGUARD_REDIS_ADDR":         "127.0.0.1:6379",
				"CHATGUARD_TRUSTED_PROXIES":    "127.0.0.1/32",
			}
			for k, v := range tc.Env {
				env[k] = v
			}
			cfg := DefaultConfig()
			require.NoError(t, cfg.flags().Parse(nil, func(k string) string { return env[k] }))
			require.NoError(t, cfg.Validate())
			var logs bytes.Buffer
			eng, err := newReviewer(cfg, nil, prometheus.NewRegistry(), slog.New(slog.NewJSONHandler(&logs, nil)), noStore)
			require.NoError(t, err)
			defer eng.Close()
			require.Equal(t, tc.Want, eng.Settings())
			reviewerstest.RequireLogged(t, logs.Bytes(), "console", tc.Want)
		})
	}
}

// noStore is a verdict store that is not open yet: the engine builds, and
// its account-history lookups fail (counted) until one is.
func noStore() pipeline.AccountHistory { return nil }
