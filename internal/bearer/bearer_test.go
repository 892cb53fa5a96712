package bearer

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeTokens(t *testing.T, kv map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for k, v := range kv {
		require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o600))
	}
	return dir
}

func req(h string) *http.Request {
	r, _ := http.NewRequest("POST", "/v1/stop", nil)
	if h != "" {
		r.Header.Set("Authorization", h)
	}
	return r
}

func TestIdentify(t *testing.T) {
	t.Parallel()
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 64)
	dir := writeTokens(t, map[string]string{"console": a, "oncall-kim": b})
	// A mounted Secret's bookkeeping entries are skipped.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "..data"), 0o700))
	s, err := LoadDir(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"console", "oncall-kim"}, s.Names())

	for h, want := range map[string]string{"Bearer " + a: "console", "bearer " + b: "oncall-kim", "BEARER " + b + " ": "oncall-kim"} {
		name, ok := s.Identify(req(h))
		require.True(t, ok, h)
		require.Equal(t, want, name)
	}
	for _, h := range []string{"", "Bearer", "Bearer ", "Basic " + a, "Bearer " + a[:39], "Bearer " + a + "x", a, "Bearer " + strings.Repeat("a", 5000)} {
		_, ok := s.Identify(req(h))
		require.False(t, ok, "%q must not authenticate", h)
	}
}

func TestLoadDirRefuses(t *testing.T) {
	t.Parallel()
	good := strings.Repeat("z", 32)
	for name, kv := range map[string]map[string]string{
		"short":     {"console": "short"},
		"duplicate": {"a": good, "b": good},
		"bad name":  {"a b": good},
		"space":     {"a": good[:20] + " " + good[:20]},
	} {
		_, err := LoadDir(writeTokens(t, kv))
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), good, "%s: the error must not show a token", name)
	}
	_, err := LoadDir(t.TempDir())
	require.ErrorContains(t, err, "no token file")
	_, err = LoadDir(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	dir := writeTokens(t, map[string]string{"t": "  " + strings.Repeat("q", 33) + "\n\n"})
	tok, err := ReadFile(filepath.Join(dir, "t"))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("q", 33), tok)
}
