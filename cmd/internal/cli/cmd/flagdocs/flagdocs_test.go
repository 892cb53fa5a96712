package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const table = "| flag | environment variable | default | meaning |\n| --- | --- | --- | --- |\n"

// TestSpliceReplacesStaleTables: every section's content becomes its
// command's table, set off by blank lines, and the prose around stays byte
// for byte; splicing the result again changes nothing.
func TestSpliceReplacesStaleTables(t *testing.T) {
	t.Parallel()
	page := "# Configuration\n\nIntro naming `<!-- end -->` inline.\n\n## worker\n\nProse.\n<!-- flags:worker -->\n" +
		"| flag | variable | default | meaning |\n| `--old` | `CHATGUARD_OLD` | `1` | gone |\n<!-- end -->\nAfter.\n\n" +
		"## worker stop\n\n<!-- flags:worker stop -->\n<!-- end -->\n"
	tables := map[string][]byte{
		"worker":      []byte(table + "| `--new` | `CHATGUARD_NEW` | `2` | new |\n"),
		"worker stop": []byte(table + "| `--room` | `CHATGUARD_ROOM` | `\"\"` | a room |\n"),
	}
	got, err := splice([]byte(page), tables)
	require.NoError(t, err)
	require.Equal(t, "# Configuration\n\nIntro naming `<!-- end -->` inline.\n\n## worker\n\nProse.\n<!-- flags:worker -->\n\n"+
		table+"| `--new` | `CHATGUARD_NEW` | `2` | new |\n\n<!-- end -->\nAfter.\n\n"+
		"## worker stop\n\n<!-- flags:worker stop -->\n\n"+table+"| `--room` | `CHATGUARD_ROOM` | `\"\"` | a room |\n\n<!-- end -->\n", string(got))
	again, err := splice(got, tables)
	require.NoError(t, err)
	require.Equal(t, string(got), string(again))
}

// TestSpliceNamesEveryProblem: a command without a section, a section
// without a command, a second section, an end outside a section and an
// unterminated section are each reported, all at once.
func TestSpliceNamesEveryProblem(t *testing.T) {
	t.Parallel()
	page := "<!-- end -->\n<!-- flags:batch -->\n<!-- end -->\n<!-- flags:batch -->\n<!-- end -->\n" +
		"<!-- flags:worker gone -->\n<!-- end -->\n<!-- flags:console -->\n"
	tables := map[string][]byte{"batch": []byte(table), "console": []byte(table), "worker stop": []byte(table)}
	_, err := splice([]byte(page), tables)
	require.Error(t, err)
	for _, want := range []string{
		"line 1: <!-- end --> outside a section",
		`line 4: a second section "batch"`,
		`line 6: section "worker gone" names no command`,
		`section "console" has no <!-- end -->`,
		`no section for "worker stop": add <!-- flags:worker stop -->`,
	} {
		require.ErrorContains(t, err, want)
	}
}

// writeFile writes content to root/rel, making its folders.
func writeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// TestCommandsFindsEveryFlagSet: each cli.NewFlagSet of a binary's files is
// a command; tests and cmd/internal are not binaries.
func TestCommandsFindsEveryFlagSet(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFile(t, root, "foo/main.go", "package main\n\nfunc a() { _ = cli.NewFlagSet(\"foo\", \"x\") }\n")
	writeFile(t, root, "foo/sub.go", "package main\n\nfunc b() { fs := cli.NewFlagSet(`foo bar`, \"x\"); _ = fs; _ = other.NewFlagSet(\"nope\") }\n")
	writeFile(t, root, "foo/main_test.go", "package main\n\nfunc c() { _ = cli.NewFlagSet(\"foo test\", \"x\") }\n")
	writeFile(t, root, "internal/lib/lib.go", "package lib\n\nfunc d() { _ = cli.NewFlagSet(\"lib\", \"x\") }\n")
	cmds, err := commands(root)
	require.NoError(t, err)
	require.Equal(t, []command{
		{name: "foo", bin: "foo", args: []string{}},
		{name: "foo bar", bin: "foo", args: []string{"bar"}},
	}, cmds)
}

// TestCommandsRefusesAnUnknowableName: a flag set named by a variable, or
// named for another binary, cannot be matched to a --help call.
func TestCommandsRefusesAnUnknowableName(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFile(t, root, "foo/main.go", "package main\n\nfunc a(n string) { _ = cli.NewFlagSet(n, \"x\"); _ = cli.NewFlagSet(\"bar baz\", \"x\") }\n")
	_, err := commands(root)
	require.ErrorContains(t, err, "cli.NewFlagSet's name is not a string literal")
	require.ErrorContains(t, err, `flag set "bar baz" is not named for its binary foo`)
}

// TestCommandsOfThisRepository: the walk finds the binaries and the
// subcommands docs/configuration.md documents.
func TestCommandsOfThisRepository(t *testing.T) {
	t.Parallel()
	cmds, err := commands(filepath.Join("..", "..", "..", ".."))
	require.NoError(t, err)
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	require.Subset(t, names, []string{"batch", "console", "consumer", "consumer compact", "worker", "worker eval", "worker migrate", "worker purge", "worker stop"})
	require.NotContains(t, names, "flagdocs", "cmd/internal is not a binary")
}

// TestSpliceAllSpreadsSectionsOverPages: each command's section may sit in
// any one page; a section repeated in another page, and a command with no
// section in any page, are reported with their page.
func TestSpliceAllSpreadsSectionsOverPages(t *testing.T) {
	t.Parallel()
	tables := map[string][]byte{"worker": []byte(table), "worker stop": []byte(table), "batch": []byte(table)}
	pages := []page{
		{rel: "docs/configuration/batch.md", content: []byte("# batch\n<!-- flags:batch -->\n<!-- end -->\n")},
		{rel: "docs/configuration/worker.md", content: []byte("<!-- flags:worker -->\n<!-- end -->\n<!-- flags:worker stop -->\n<!-- end -->\n")},
	}
	out, err := spliceAll(pages, tables)
	require.NoError(t, err)
	require.Equal(t, "# batch\n<!-- flags:batch -->\n\n"+table+"\n<!-- end -->\n", string(out[0].content))
	require.Equal(t, "docs/configuration/worker.md", out[1].rel)
	require.Equal(t, "==> a.md <==\nA\n==> b.md <==\nB\n", string(Printed([]page{{rel: "a.md", content: []byte("A\n")}, {rel: "b.md", content: []byte("B\n")}})))

	pages[0].content = []byte("<!-- flags:batch -->\n<!-- end -->\n<!-- flags:worker -->\n<!-- end -->\n")
	pages[1].content = []byte("<!-- flags:worker -->\n<!-- end -->\n")
	_, err = spliceAll(pages, tables)
	require.ErrorContains(t, err, `docs/configuration/worker.md: line 1: a second section "worker"`)
	require.ErrorContains(t, err, `no section for "worker stop"`)
}

// TestReadPagesRefusesAPatternMatchingNothing: a page moved away must not
// leave its tables unchecked.
func TestReadPagesRefusesAPatternMatchingNothing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFile(t, root, "docs/configuration/b.md", "B\n")
	writeFile(t, root, "docs/configuration/a.md", "A\n")
	pages, err := readPages(root, []string{"docs/configuration/*.md"})
	require.NoError(t, err)
	require.Equal(t, []page{{rel: "docs/configuration/a.md", content: []byte("A\n")}, {rel: "docs/configuration/b.md", content: []byte("B\n")}}, pages)
	_, err = readPages(root, []string{"docs/configuration.md"})
	require.ErrorContains(t, err, "docs/configuration.md: no such page")
}
