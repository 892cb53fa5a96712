package k8s_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkerPrivacySettings: the settings that keep chat data where it
// belongs, as deployed. The quote
// digest key comes from a Secret that must exist (never the dev key), the
// third-party fallback gets pseudonymized requests, images are limited to
// the CDN and inlined, pprof is off, and the operator API has its tokens.
func TestWorkerPrivacySettings(t *testing.T) {
	t.Parallel()
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			c := container(t, s, "chatguard-worker")
			env := envOf(t, s, c)
			key, ok := env["CHATGUARD_QUOTE_DIGEST_KEY"]
			require.True(t, ok)
			require.NotNil(t, key.secretRef, "the digest key comes from a Secret")
			require.True(t, key.secretRef.Optional == nil || !*key.secretRef.Optional, "the digest key Secret is required")
			val := func(k string) string { return env[k].value }
			require.Equal(t, "true", val("CHATGUARD_FALLBACK_PSEUDONYMIZE"))
			require.Equal(t, "true", val("CHATGUARD_IMAGE_INLINE"))
			require.NotEmpty(t, val("CHATGUARD_IMAGE_HOSTS"))
			require.NotContains(t, val("CHATGUARD_IMAGE_HOSTS"), "://", "hosts, not URLs")
			require.Empty(t, val("CHATGUARD_PPROF_ADDR"))
			dir := val("CHATGUARD_OPERATOR_TOKENS_DIR")
			mounted := false
			for _, m := range c.VolumeMounts {
				mounted = mounted || (m.MountPath == dir && m.ReadOnly)
			}
			require.True(t, mounted, "the operator tokens are mounted read-only at %s", dir)
			require.True(t, strings.HasPrefix(dir, "/var/run/secrets/"))
		})
	}
}
