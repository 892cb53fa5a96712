package cmd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// configurationDoc is where the flag tables of every binary live.
var configurationDoc = filepath.Join("..", "docs", "configuration.md")

// TestConfigurationDocumentsEveryFlag keeps the configuration tables
// honest: every flag that a binary's --help lists (with its environment
// variable and default) has a row in docs/configuration.md, and the page
// names no flag that the binaries no longer have.
func TestConfigurationDocumentsEveryFlag(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(configurationDoc)
	require.NoError(t, err)
	dir := t.TempDir()
	row := regexp.MustCompile(`(?m)^\s+(--[a-z0-9-]+)\s+(CHATGUARD_[A-Z0-9_]+)\s+default (\S+)`)
	documented := regexp.MustCompile("(?m)^\\| `(--[a-z0-9-]+)` \\| `(CHATGUARD_[A-Z0-9_]+)` \\| `([^`]*)` \\|")
	want := map[string]bool{}
	for _, bin := range []struct {
		name string
		args []string
	}{
		{"batch", nil}, {"worker", nil}, {"consumer", nil}, {"console", nil},
		{"worker", []string{"stop"}}, {"worker", []string{"migrate"}}, {"worker", []string{"purge"}}, {"worker", []string{"eval"}},
		{"consumer", []string{"compact"}},
	} {
		path := filepath.Join(dir, bin.name)
		if _, err := os.Stat(path); err != nil {
			out, err := exec.Command("go", "build", "-o", path, "./"+bin.name).CombinedOutput()
			require.NoError(t, err, string(out))
		}
		out, err := exec.Command(path, append(bin.args, "--help")...).Output()
		require.NoError(t, err)
		flags := row.FindAllStringSubmatch(string(out), -1)
		require.NotEmpty(t, flags, "%s %v --help lists no flags", bin.name, bin.args)
		for _, f := range flags {
			want[f[1]+" "+f[2]+" "+f[3]] = true
		}
	}
	got := map[string]bool{}
	for _, m := range documented.FindAllStringSubmatch(string(readme), -1) {
		got[m[1]+" "+m[2]+" "+m[3]] = true
	}
	var missing, stale []string
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if !want[k] {
			stale = append(stale, k)
		}
	}
	require.Empty(t, missing, "flags missing from docs/configuration.md (flag, variable, default):\n%s", strings.Join(missing, "\n"))
	require.Empty(t, stale, "docs/configuration.md documents flags or defaults the binaries no longer have:\n%s", strings.Join(stale, "\n"))
}
