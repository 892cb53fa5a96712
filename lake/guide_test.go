package lake_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// analystsGuide is the page that tells analysts which tables, views and
// queries exist and shows how to query them.
var analystsGuide = filepath.Join("..", "docs", "analysts.md")

// TestAnalystsGuideListsEveryQuery keeps docs/analysts.md in step with the
// SQL the tests run through the Athena stand-in: every query and view file
// is named there, the guide names none that is gone, and a query the guide
// quotes (a ```sql block whose first line names its file) is that file
// verbatim.
func TestAnalystsGuideListsEveryQuery(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(analystsGuide)
	require.NoError(t, err)
	guide := string(b)

	files := map[string]bool{}
	for _, dir := range []string{"queries", "views"} {
		names, err := filepath.Glob(filepath.Join(dir, "*.sql"))
		require.NoError(t, err)
		require.NotEmpty(t, names, dir)
		for _, n := range names {
			rel := filepath.ToSlash(n)
			files[rel] = true
			require.Contains(t, guide, "`"+rel+"`", "docs/analysts.md does not list %s", rel)
		}
	}
	named := regexp.MustCompile("`((?:queries|views)/[a-z0-9_]+\\.sql)`")
	for _, m := range named.FindAllStringSubmatch(guide, -1) {
		require.True(t, files[m[1]], "docs/analysts.md names %s, which lake/ does not have", m[1])
	}

	quoted := regexp.MustCompile("(?s)```sql\n-- lake/((?:queries|views)/[a-z0-9_]+\\.sql)\n(.*?)```")
	blocks := quoted.FindAllStringSubmatch(guide, -1)
	require.NotEmpty(t, blocks, "docs/analysts.md quotes no Athena query")
	for _, m := range blocks {
		want, err := os.ReadFile(m[1])
		require.NoError(t, err, "docs/analysts.md quotes %s", m[1])
		require.Equal(t, strings.TrimSpace(string(want)), strings.TrimSpace(m[2]), "docs/analysts.md quotes %s, not as the file has it", m[1])
	}
}
