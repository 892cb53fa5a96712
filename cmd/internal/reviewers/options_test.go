package reviewers

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/pipeline/llm"
)

func TestOptionsValidateNamesEveryProblem(t *testing.T) {
	t.Parallel()
	d := DefaultOptions()
	require.NoError(t, d.Validate(""))
	require.True(t, d.FallbackPseudonymize, "the third-party pool gets placeholders by default")
	require.Empty(t, d.Images.Hosts, "no image host is trusted until configured")

	o := d
	o.QuoteDigestKey, o.Images.Hosts, o.PrimaryPrice = "short", []string{"https://cdn.example.com"}, "gpu_hour=x"
	o.FleetPrimaryLimit, o.FleetPrimaryReserved, o.FleetReplicas = 4, 4, 0
	err := o.Validate("")
	require.Error(t, err)
	for _, want := range []string{"--quote-digest-key", "--image-*", "--primary-price", "--fleet-primary-reserved", "--fleet-replicas", "--fleet-* limits need --redis-addr"} {
		require.ErrorContains(t, err, want)
	}
}

func TestOptionsReachTheRouter(t *testing.T) {
	t.Parallel()
	o := DefaultOptions()
	fs := cli.NewFlagSet("test", "")
	o.Flags(fs)
	o.FleetFlags(fs)
	env := map[string]string{"CHATGUARD_PRIMARY_PSEUDONYMIZE": "true", "CHATGUARD_FLEET_FALLBACK_TPM": "90000"}
	require.NoError(t, fs.Parse([]string{"--fallback-price=prompt=2.5,completion=10", "--fleet-primary-limit=16",
		"--fleet-primary-reserved=4", "--fleet-primary-reserved-realtime=6", "--fleet-key-prefix=cg:fleet:", "--image-hosts= img.example.com , .cdn.example.com "},
		func(k string) string { return env[k] }))
	require.NoError(t, o.Validate("redis:6379"))
	require.Equal(t, []string{"img.example.com", ".cdn.example.com"}, o.Images.Hosts)
	rc := o.Router(depflags.Pools{LLM: llm.Config{Primary: llm.PoolConfig{BaseURL: "http://p/v1", Model: "p"}, Fallback: llm.PoolConfig{BaseURL: "http://f/v1", Model: "f"}}}.Router(), nil)
	require.True(t, rc.Primary.Pseudonymize)
	o.FleetPrimaryReservedRealtime = 12
	require.ErrorContains(t, o.Validate("redis:6379"), "--fleet-primary-reserved-realtime", "4 + 12 leaves batch nothing of 16")
	require.True(t, rc.Fallback.Pseudonymize)
	require.Positive(t, rc.Fallback.Price.CompletionPerMTok)
	require.Equal(t, llm.FleetConfig{PrimaryLimit: 16, PrimaryReserved: 4, PrimaryReservedRealtime: 6, FallbackTPM: 90000, Replicas: 1, Name: "cg:fleet"}, rc.Fleet)
}

func TestNewRefusesWhatValidateRefuses(t *testing.T) {
	t.Parallel()
	o := DefaultOptions()
	o.QuoteDigestKey = strings.Repeat("k", 8)
	_, err := New(Params{Component: "test", Pools: depflags.Pools{LLM: llm.Config{Primary: llm.PoolConfig{BaseURL: "http://p/v1", Model: "p"}}}, Options: o})
	require.ErrorContains(t, err, "--quote-digest-key")
}
