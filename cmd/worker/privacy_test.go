package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPrivacyConfig(t *testing.T) {
	t.Parallel()
	d := DefaultConfig()
	require.True(t, d.FallbackPseudonymize, "the third-party pool gets placeholders by default")
	require.False(t, d.PrimaryPseudonymize)
	require.Empty(t, d.ImageHosts, "no image host is trusted until configured")
	require.NoError(t, d.privacyOptions.validate())
	r := d.router()
	require.True(t, r.Fallback.Pseudonymize)
	require.False(t, r.Primary.Pseudonymize)

	c := d
	c.QuoteDigestKey = "short"
	require.ErrorContains(t, c.privacyOptions.validate(), "--quote-digest-key")
	c.QuoteDigestKey = strings.Repeat("k", 32)
	c.ImageHosts = "https://cdn.example.com, img.example.com"
	require.ErrorContains(t, c.privacyOptions.validate(), "--image-*")
	c.ImageHosts = " img.example.com , .cdn.example.com "
	require.NoError(t, c.privacyOptions.validate())
	require.Equal(t, []string{"img.example.com", ".cdn.example.com"}, c.images().Hosts)
	c.ImageInline, c.ImageMaxBytes = true, 0
	require.Error(t, c.privacyOptions.validate())
}
