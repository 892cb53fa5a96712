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

// TestEngineSettingsAreEveryReviewingBinarys boots the worker's stage
// engine from its flags' environment for each shared case (the console's
// test boots its own from the same values) and checks the privacy
// settings and the pipeline version it reports and logs.
func TestEngineSettingsAreEveryReviewingBinarys(t *testing.T) {
	t.Parallel()
	for _, tc := range reviewerstest.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			env := validEnv()
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
			reviewerstest.RequireLogged(t, logs.Bytes(), "worker", tc.Want)
		})
	}
}

// noStore is a verdict store that is not open yet: the engine builds, and
// its account-history lookups fail (counted) until one is.
func noStore() pipeline.AccountHistory { return nil }
