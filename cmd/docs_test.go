package cmd_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// configurationDocs are the pages holding the flag tables, one per binary.
var configurationDocs = filepath.Join("..", "docs", "configuration", "*.md")

// TestConfigurationTablesAreGenerated keeps the configuration tables
// honest: every page of docs/configuration/ must be, byte for byte, what
// `make docs` (cmd/internal/cli/cmd/flagdocs) renders from every binary's
// and subcommand's --help, so a new, renamed or re-defaulted flag, or a
// new subcommand, fails here until the pages are regenerated.
func TestConfigurationTablesAreGenerated(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(configurationDocs)
	require.NoError(t, err)
	require.NotEmpty(t, paths, "docs/configuration/ has its pages")
	slices.Sort(paths)
	var pages bytes.Buffer
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		rel, err := filepath.Rel(repoRoot, p)
		require.NoError(t, err)
		pages.WriteString("==> " + filepath.ToSlash(rel) + " <==\n")
		pages.Write(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	gen := exec.CommandContext(ctx, "go", "run", "./internal/cli/cmd/flagdocs", "--root", repoRoot, "--print")
	gen.Stderr = &stderr
	rendered, err := gen.Output()
	require.NoError(t, err, "flagdocs: %s", stderr.String())
	require.Contains(t, pages.String(), "<!-- flags:worker stop -->", "the pages keep their sections")
	if !bytes.Equal(rendered, pages.Bytes()) {
		t.Fatalf("docs/configuration/'s flag tables are not the binaries' --help: run make docs\n%s",
			strings.Join(lineDifferences(pages.String(), string(rendered), 10), "\n"))
	}
}

// lineDifferences returns up to n lines, numbered, where page and rendered
// differ, so that a stale table is named without printing both pages.
func lineDifferences(page, rendered string, n int) []string {
	a, b := strings.Split(page, "\n"), strings.Split(rendered, "\n")
	var out []string
	for i := 0; i < max(len(a), len(b)) && len(out) < n; i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			out = append(out, "line "+itoa(i+1)+":\n  page:      "+x+"\n  --help has: "+y)
		}
	}
	return out
}

// repoRoot is the repository's root as the tests in cmd/ see it.
const repoRoot = ".."

// walkRepo calls fn for every file of the working tree under root, with
// its slash-separated path relative to root, leaving out what is not
// source: hidden folders (.git, .cache, .stack), node_modules and the
// testdata corpora.
func walkRepo(t *testing.T, root string, fn func(rel string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fn(filepath.ToSlash(rel))
		return nil
	})
	require.NoError(t, err)
}

// packageFolders returns every folder under root that holds a Go file,
// that is every package folder of the workspace's three modules.
func packageFolders(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	walkRepo(t, root, func(rel string) {
		if strings.HasSuffix(rel, ".go") {
			out[path.Dir(rel)] = true
		}
	})
	return out
}

// layoutFolders returns the paths the first column of the README's Layout
// table names (every `backticked` path of it), each without a trailing
// slash.
func layoutFolders(t *testing.T, readme string) []string {
	t.Helper()
	_, after, ok := strings.Cut(readme, "\n## Layout\n")
	require.True(t, ok, "README.md has no Layout section")
	if i := strings.Index(after, "\n## "); i >= 0 {
		after = after[:i]
	}
	tick := regexp.MustCompile("`([^`]+)`")
	var out []string
	for _, line := range strings.Split(after, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "folder" {
			continue
		}
		for _, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			out = append(out, strings.TrimSuffix(m[1], "/"))
		}
	}
	require.NotEmpty(t, out, "README.md's Layout table names no folder")
	return out
}

// TestReadmeLayoutListsEveryPackageFolder keeps the README's Layout table
// complete: every folder of the workspace that holds Go packages (the root
// module, deploy/local and deploy/k8s) is listed, and every path listed
// still exists.
func TestReadmeLayoutListsEveryPackageFolder(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	listed := layoutFolders(t, string(readme))
	pkgs := packageFolders(t, repoRoot)
	require.Greater(t, len(pkgs), 30, "the walk found the workspace's packages")
	var missing, gone []string
	for dir := range pkgs {
		if !slices.Contains(listed, dir) {
			missing = append(missing, dir)
		}
	}
	for _, p := range listed {
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(p))); err != nil {
			gone = append(gone, p)
		}
	}
	slices.Sort(missing)
	require.Empty(t, missing, "package folders missing from README.md's Layout table:\n%s", strings.Join(missing, "\n"))
	require.Empty(t, gone, "README.md's Layout table lists paths that do not exist:\n%s", strings.Join(gone, "\n"))
}

// TestLayoutCheckCatchesAMissingFolder proves the Layout check can fail:
// a table without one of the folders, and one naming a folder that is
// gone, are both caught.
func TestLayoutCheckCatchesAMissingFolder(t *testing.T) {
	t.Parallel()
	readme := "# x\n\n## Layout\n\n| folder | what |\n| --- | --- |\n| `cmd/batch`, `pipeline/` | a |\n| `no/such/dir` | b |\n\n## Next\n\n| `storage/mysql` | not the layout |\n"
	listed := layoutFolders(t, readme)
	require.Equal(t, []string{"cmd/batch", "pipeline", "no/such/dir"}, listed)
	pkgs := packageFolders(t, repoRoot)
	require.True(t, pkgs["storage/mysql"], "the walk finds storage/mysql")
	require.False(t, slices.Contains(listed, "storage/mysql"), "a folder outside the table is missing from it")
	_, err := os.Stat(filepath.Join(repoRoot, "no", "such", "dir"))
	require.Error(t, err)
}

// TestReadmeIsADoorway keeps the README short: what chatguard is, the
// flow, the two commands, the Layout and links; the rest lives in docs/.
func TestReadmeIsADoorway(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	lines := strings.Count(string(readme), "\n")
	require.LessOrEqual(t, lines, 200, "README.md has %d lines; move detail into docs/", lines)
	for _, doc := range []string{"docs/README.md", "docs/architecture.md", "docs/configuration.md", "docs/operations.md", "docs/analysts.md", "docs/console.md", "docs/performance.md", "CHANGELOG.md"} {
		require.Contains(t, string(readme), "("+doc+")", "README.md links to %s", doc)
	}
}

// ticketNumber matches a reference to a tracker's ticket (the word issue,
// ticket, bug or PR followed by a number, or a number in brackets after a
// hash): history belongs in CHANGELOG.md and commit messages; a
// comment, a heading or a test name says why instead. The number is
// written as a class so that this line does not match itself.
var ticketNumber = regexp.MustCompile(`(?i)\b(issue|ticket|bug|pr)s?\s?#?[0-9]+\b|\(#[0-9]+\)`)

// ticketChecked says which files the ticket check reads: source, docs,
// SQL, manifests and scripts.
func ticketChecked(rel string) bool {
	if rel == "CHANGELOG.md" {
		return false
	}
	switch path.Base(rel) {
	case "Makefile", "Dockerfile":
		return true
	}
	switch path.Ext(rel) {
	case ".go", ".md", ".sql", ".yaml", ".yml", ".env", ".py", ".sh", ".tmpl", ".html", ".txt":
		return true
	}
	return false
}

// TestNoTicketNumbers fails on a ticket number in code, docs or test names
// anywhere but CHANGELOG.md.
func TestNoTicketNumbers(t *testing.T) {
	t.Parallel()
	var found []string
	n := 0
	walkRepo(t, repoRoot, func(rel string) {
		if !ticketChecked(rel) {
			return
		}
		n++
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			if m := ticketNumber.FindString(line); m != "" {
				found = append(found, rel+":"+itoa(i+1)+": "+m)
			}
		}
	})
	require.Greater(t, n, 100, "the walk found the repository's files")
	require.Empty(t, found, "ticket numbers outside CHANGELOG.md (say why instead):\n%s", strings.Join(found, "\n"))
}

// TestTicketPatternCatchesReferences proves the ticket check can fail and
// leaves ordinary numbers alone.
func TestTicketPatternCatchesReferences(t *testing.T) {
	t.Parallel()
	// Written in parts, so that this file does not trip the check it tests.
	ref := func(before, number, after string) string { return before + number + after }
	for _, s := range []string{ref("(issue ", "17", ")"), ref("Issue ", "14", "'s settings"), ref("see ticket #", "4", ""),
		ref("issues ", "12", ""), ref("fixed in PR #", "31", ""), ref("merged (#", "12", ")")} {
		require.NotEmpty(t, ticketNumber.FindString(s), s)
	}
	for _, s := range []string{"seed 7", "HTTP 429", "the sample lake's 600 rooms", "migration 00010", "issuer 3", "#ffcc00"} {
		require.Empty(t, ticketNumber.FindString(s), s)
	}
	require.False(t, ticketChecked("CHANGELOG.md"))
	require.True(t, ticketChecked("docs/operations.md"))
	require.True(t, ticketChecked("pipeline/jobloop/loop.go"))
}

func itoa(n int) string { return strconv.Itoa(n) }

// docPages are the Markdown pages whose links TestDocsLinksResolve checks.
func docPages(t *testing.T) []string {
	t.Helper()
	var out []string
	walkRepo(t, repoRoot, func(rel string) {
		if strings.HasSuffix(rel, ".md") {
			out = append(out, rel)
		}
	})
	return out
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown page (lower case, punctuation dropped, spaces as hyphens),
// leaving out fenced code.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}

// mdLink matches a Markdown link or image target: ](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// brokenLinks returns the relative links of page (at rel) that name a file
// that does not exist or an anchor its target page lacks; read returns a
// page's content, or an error when it does not exist.
func brokenLinks(rel, page string, read func(string) (string, error)) []string {
	var bad []string
	fenced := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := rel
			if file != "" {
				dest = path.Join(path.Dir(rel), file)
			}
			content, err := read(dest)
			if err != nil {
				bad = append(bad, rel+": "+target+" (no such file)")
				continue
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !headingAnchors(content)[anchor] {
				bad = append(bad, rel+": "+target+" (no such heading)")
			}
		}
	}
	return bad
}

// TestDocsLinksResolve checks every relative link and image of every
// Markdown page: the file exists, and an anchor names a heading of it.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	read := func(rel string) (string, error) {
		p := filepath.Join(repoRoot, filepath.FromSlash(rel))
		st, err := os.Stat(p)
		if err != nil || st.IsDir() {
			return "", err
		}
		b, err := os.ReadFile(p)
		return string(b), err
	}
	var bad []string
	pages := docPages(t)
	require.Contains(t, pages, "docs/console.md")
	for _, rel := range pages {
		page, err := read(rel)
		require.NoError(t, err)
		bad = append(bad, brokenLinks(rel, page, read)...)
	}
	require.Empty(t, bad, "broken links:\n%s", strings.Join(bad, "\n"))
}

// TestLinkCheckCatchesBrokenLinks proves the link check can fail: a
// missing file, a missing image and a missing heading are each reported.
func TestLinkCheckCatchesBrokenLinks(t *testing.T) {
	t.Parallel()
	files := map[string]string{"docs/a.md": "# A\n\n## Runbook\n", "docs/console/queue.png": "png"}
	read := func(rel string) (string, error) {
		if c, ok := files[rel]; ok {
			return c, nil
		}
		return "", os.ErrNotExist
	}
	page := "[ok](a.md#runbook) ![ok](console/queue.png) [web](https://example.com/x)\n" +
		"[gone](b.md) ![gone](console/room.png) [heading](a.md#sizing)\n```\n[in code](nowhere.md)\n```\n"
	require.Equal(t, []string{
		"docs/index.md: b.md (no such file)",
		"docs/index.md: console/room.png (no such file)",
		"docs/index.md: a.md#sizing (no such heading)",
	}, brokenLinks("docs/index.md", page, read))
}

// maxDocLines bounds a page under docs/: a reader looking for one task or
// one figure should not have to page through a lab notebook.
const maxDocLines = 400

// longPages returns the pages of files (path to content) with maxDocLines
// lines or more, with their length.
func longPages(files map[string]string) []string {
	var out []string
	for rel, content := range files {
		if n := strings.Count(content, "\n"); n >= maxDocLines {
			out = append(out, rel+" ("+itoa(n)+" lines)")
		}
	}
	slices.Sort(out)
	return out
}

// TestDocsPagesAreShort keeps every Markdown page under docs/ (its
// folders included) under maxDocLines lines: split a long page into task
// or reference pages and link them from docs/README.md.
func TestDocsPagesAreShort(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for _, rel := range docPages(t) {
		if !strings.HasPrefix(rel, "docs/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
		require.NoError(t, err)
		files[rel] = string(b)
	}
	require.Contains(t, files, "docs/operations.md")
	require.Empty(t, longPages(files), "docs pages of %d lines or more (split them):", maxDocLines)
}

// TestLongPageCheckCatchesALongPage proves the length check can fail, and
// that a page just under the limit passes.
func TestLongPageCheckCatchesALongPage(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"docs/a.md": strings.Repeat("x\n", maxDocLines-1),
		"docs/b.md": strings.Repeat("x\n", maxDocLines),
	}
	require.Equal(t, []string{"docs/b.md (400 lines)"}, longPages(files))
}

// figureDate is a recording date as the performance page writes it.
var figureDate = regexp.MustCompile(`\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b`)

// badFigureRows returns the rows of the current-figures tables of a
// performance page that lack a value, a command (in backticks), a date or
// a machine, and "no figures" when the page has none.
func badFigureRows(page string) []string {
	_, current, _ := strings.Cut(page, "\n## Current figures\n")
	current, _, _ = strings.Cut(current, "\n## History\n")
	var bad []string
	rows := 0
	inTable := false
	for _, line := range strings.Split(current, "\n") {
		if strings.HasPrefix(line, "| figure | value | command | recorded | machine |") {
			inTable = true
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		if !inTable || strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		rows++
		if len(cells) != 5 || strings.TrimSpace(cells[1]) == "" || !strings.Contains(cells[2], "`") ||
			!figureDate.MatchString(cells[3]) || strings.TrimSpace(cells[4]) == "" {
			bad = append(bad, line)
		}
	}
	if rows == 0 {
		bad = append(bad, "no figures")
	}
	return bad
}

// TestPerformanceFiguresSayHowWhenAndWhere keeps docs/performance.md a
// page of figures a reader can reproduce: every row of its current-figures
// tables has a value, the command, the date and the machine.
func TestPerformanceFiguresSayHowWhenAndWhere(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "performance.md"))
	require.NoError(t, err)
	require.Empty(t, badFigureRows(string(b)), "figures without a command, a date or a machine")
}

// TestFigureRowCheckCatchesAGap proves the figure check can fail: a row
// without a date and one without a command are reported, a page without
// figures too.
func TestFigureRowCheckCatchesAGap(t *testing.T) {
	t.Parallel()
	page := "# P\n\n## Current figures\n\n| figure | value | command | recorded | machine |\n| --- | --- | --- | --- | --- |\n" +
		"| a | 1 | `make a` | 2026-12-01 | dev VM |\n| b | 2 | `make b` | last week | dev VM |\n| c | 3 | by hand | 2026-12-01 | dev VM |\n\n## History\n"
	require.Equal(t, []string{"| b | 2 | `make b` | last week | dev VM |", "| c | 3 | by hand | 2026-12-01 | dev VM |"}, badFigureRows(page))
	require.Equal(t, []string{"no figures"}, badFigureRows("# P\n"))
}
