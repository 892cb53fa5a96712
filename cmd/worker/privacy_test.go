package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPrivacyConfig(t *testing.T) {
	t.Parallel()
	d := DefaultConfig()
	require.Empty(t, d.Images.Hosts, "no image host is trusted until configured")
	require.ErrorContains(t, d.Options.Validate(), "--quote-digest-key is empty", "no key, no start")
	dev := d
	dev.DevInsecureKeys = true
	require.NoError(t, dev.Options.Validate(), "a development stack says so")
	require.True(t, d.LegacyPseudonyms, "stored pseudonyms keep matching across the upgrade by default")
	r := d.Pools.Router()
	require.True(t, r.Fallback.Pseudonymize, "the third-party pool gets placeholders by default")
	require.False(t, r.Primary.Pseudonymize)
	fs := d.flags()
	require.NoError(t, fs.Parse([]string{"--primary-pseudonymize", "--fallback-pseudonymize=false"}, func(string) string { return "" }))
	require.True(t, d.LLM.Primary.Pseudonymize, "the flag sets the pool's own switch")
	require.False(t, d.LLM.Fallback.Pseudonymize)

	c := d
	c.QuoteDigestKey = "short"
	require.ErrorContains(t, c.Options.Validate(), "--quote-digest-key")
	c.QuoteDigestKey = strings.Repeat("k", 32)
	c.Images.Hosts = []string{"https://cdn.example.com", "img.example.com"}
	require.ErrorContains(t, c.Options.Validate(), "--image-*")
	c.Images.Hosts = []string{"img.example.com", ".cdn.example.com"}
	require.NoError(t, c.Options.Validate())
	c.Images.Inline, c.Images.MaxBytes = true, 0
	require.Error(t, c.Options.Validate())
}
