// Package reviewerstest holds the configurations that the tests of every
// binary building a stage engine (reviewers.New) boot, and the Settings
// each must report. Every binary is checked against the same cases, so two
// binaries given the same values are shown to apply the same privacy
// controls and to land their verdicts under the same pipeline version.
package reviewerstest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/reviewers"
	"github.com/chatguard/chatguard/pipeline/accounthistory"
	"github.com/chatguard/chatguard/stages"
)

// Case is one configuration of the stage engine.
type Case struct {
	Name string
	// Env are the stage engine's CHATGUARD_ variables (pools, privacy,
	// fleet); a binary's test adds what else that binary requires.
	Env map[string]string
	// Want is what the engine must report, whichever binary built it.
	Want reviewers.Settings
}

// DigestKey is the prod-like case's quote-digest key: a stand-in for the
// Secret, never the dev key.
const DigestKey = "test-digest-key-of-at-least-thirty-two-bytes"

// Cases returns the defaults (only the required pool, on a development
// stack: the dev pseudonym keys, which nothing else allows) and a prod-like
// configuration as the overlays give it: the managed fallback, the CDN
// image hosts inlined, the digest key from a Secret, the fallback
// pseudonymized and the fleet limits in Redis (down: the router then
// starts on its static share).
func Cases() []Case {
	return []Case{
		{
			Name: "default",
			Env: map[string]string{
				"CHATGUARD_PRIMARY_BASE_URL":  "http://vllm:8000/v1",
				"CHATGUARD_PRIMARY_MODEL":     "chatguard-judge",
				"CHATGUARD_DEV_INSECURE_KEYS": "true",
			},
			Want: reviewers.Settings{PipelineVersion: stages.Fingerprint("chatguard-judge", ""), PrimaryModel: "chatguard-judge",
				DevDigestKey: true, FallbackPseudonymize: true, AccountHistory: accounthistory.DefaultWindow},
		},
		{
			Name: "prod",
			Env: map[string]string{
				"CHATGUARD_PRIMARY_BASE_URL":       "http://vllm.llm.svc.cluster.local:8000/v1",
				"CHATGUARD_PRIMARY_MODEL":          "chatguard-judge",
				"CHATGUARD_FALLBACK_BASE_URL":      "https://llm-gateway.example.com/v1",
				"CHATGUARD_FALLBACK_MODEL":         "chatguard-judge-managed",
				"CHATGUARD_FALLBACK_API_KEY":       "test-secret",
				"CHATGUARD_PRIMARY_PRICE":          "gpu_hour=4.5,shared_by=32",
				"CHATGUARD_FALLBACK_PRICE":         "prompt=2.5,cached=1.25,completion=10",
				"CHATGUARD_QUOTE_DIGEST_KEY":       DigestKey,
				"CHATGUARD_IMAGE_HOSTS":            "img.bunjang.co.kr,media.bunjang.co.kr",
				"CHATGUARD_IMAGE_INLINE":           "true",
				"CHATGUARD_IMAGE_MAX_BYTES":        "5242880",
				"CHATGUARD_IMAGE_FETCH_TIMEOUT":    "5s",
				"CHATGUARD_PRIMARY_PSEUDONYMIZE":   "false",
				"CHATGUARD_FALLBACK_PSEUDONYMIZE":  "true",
				"CHATGUARD_FLEET_PRIMARY_LIMIT":    "64",
				"CHATGUARD_FLEET_PRIMARY_RESERVED": "8",
				"CHATGUARD_FLEET_FALLBACK_RPM":     "600",
				"CHATGUARD_FLEET_REPLICAS":         "4",
				"CHATGUARD_REDIS_ADDR":             "127.0.0.1:1",
				"CHATGUARD_ACCOUNT_HISTORY":        "720h",
			},
			Want: reviewers.Settings{PipelineVersion: stages.Fingerprint("chatguard-judge", "chatguard-judge-managed"),
				PrimaryModel: "chatguard-judge", FallbackModel: "chatguard-judge-managed",
				ImageHosts: []string{"img.bunjang.co.kr", "media.bunjang.co.kr"}, ImageInline: true, FallbackPseudonymize: true,
				AccountHistory: 30 * 24 * time.Hour},
		},
	}
}

// RequireLogged fails t unless logs (slog JSON lines) hold the engine's
// settings line of component reporting want: both binaries expose their
// settings the same way.
func RequireLogged(t testing.TB, logs []byte, component string, want reviewers.Settings) {
	t.Helper()
	for _, line := range bytes.Split(logs, []byte("\n")) {
		var rec struct {
			Msg                  string   `json:"msg"`
			PipelineVersion      string   `json:"pipeline_version"`
			PrimaryModel         string   `json:"primary_model"`
			FallbackModel        string   `json:"fallback_model"`
			ImageHosts           []string `json:"image_hosts"`
			ImageInline          bool     `json:"image_inline"`
			DevDigestKey         bool     `json:"dev_digest_key"`
			PrimaryPseudonymize  bool     `json:"primary_pseudonymize"`
			FallbackPseudonymize bool     `json:"fallback_pseudonymize"`
			AccountHistory       string   `json:"account_history"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.Msg != component+": stage engine ready" {
			continue
		}
		window, err := time.ParseDuration(rec.AccountHistory)
		require.NoError(t, err, "account_history %q", rec.AccountHistory)
		got := reviewers.Settings{AccountHistory: window, PipelineVersion: rec.PipelineVersion, PrimaryModel: rec.PrimaryModel, FallbackModel: rec.FallbackModel,
			ImageHosts: rec.ImageHosts, ImageInline: rec.ImageInline, DevDigestKey: rec.DevDigestKey,
			PrimaryPseudonymize: rec.PrimaryPseudonymize, FallbackPseudonymize: rec.FallbackPseudonymize}
		require.Equal(t, want, got, "the settings line of %s", component)
		return
	}
	t.Fatalf("no %q line in the logs:\n%s", component+": stage engine ready", logs)
}
