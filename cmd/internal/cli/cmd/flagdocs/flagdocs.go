package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
)

// Main renders the pages' flag tables.
type Main struct {
	// Root is the repository root; the binaries are its cmd/<name>.
	Root string
	// Docs are the pages, as glob patterns relative to Root: every
	// command's table has its section in exactly one of them.
	Docs []string
	// Print writes the rendered pages to Stdout instead of the files,
	// each after a "==> PATH <==" line (see Printed).
	Print bool
	// Timeout bounds the builds and the --help calls together.
	Timeout time.Duration
	// Stdout receives the pages when Print is set.
	Stdout io.Writer
}

// Run finds the commands, asks each for its table and splices the tables
// into the pages. It writes only the files whose content changed. A
// cancelled ctx stops the build or the --help call in progress; the pages
// are then left as they were.
func (m *Main) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	cmds, err := commands(filepath.Join(m.Root, "cmd"))
	if err != nil {
		return err
	}
	pages, err := readPages(m.Root, m.Docs)
	if err != nil {
		return err
	}
	tables, err := helpTables(ctx, m.Root, cmds)
	if err != nil {
		return err
	}
	out, err := spliceAll(pages, tables)
	if err != nil {
		return err
	}
	if m.Print {
		_, err := m.Stdout.Write(Printed(out))
		return err
	}
	for i, p := range out {
		if bytes.Equal(p.content, pages[i].content) {
			continue
		}
		if err := os.WriteFile(filepath.Join(m.Root, filepath.FromSlash(p.rel)), p.content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// page is one Markdown page holding flag sections: its path relative to
// the root, slash-separated, and its content.
type page struct {
	rel     string
	content []byte
}

// readPages reads the pages matching the patterns under root, sorted by
// path; a pattern that matches nothing is an error (a moved page would
// otherwise leave its tables unchecked).
func readPages(root string, patterns []string) ([]page, error) {
	seen := map[string]bool{}
	var out []page
	for _, pat := range patterns {
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pat)))
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("%s: no such page", pat)
		}
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err != nil {
				return nil, err
			}
			rel = filepath.ToSlash(rel)
			if seen[rel] {
				continue
			}
			seen[rel] = true
			b, err := os.ReadFile(m)
			if err != nil {
				return nil, err
			}
			out = append(out, page{rel: rel, content: b})
		}
	}
	slices.SortFunc(out, func(a, b page) int { return strings.Compare(a.rel, b.rel) })
	return out, nil
}

// Printed is the --print form of pages: each page after a line
// "==> PATH <==", in the order given, so that a test can compare what
// is on disk with what would be written.
func Printed(pages []page) []byte {
	var b bytes.Buffer
	for _, p := range pages {
		fmt.Fprintf(&b, "==> %s <==\n", p.rel)
		b.Write(p.content)
	}
	return b.Bytes()
}

// command is one binary or subcommand with a flag set of its own.
type command struct {
	// name is the flag set's name, as the page's marker spells it:
	// "worker stop".
	name string
	// bin is the binary, cmd/<bin>.
	bin string
	// args select the subcommand ("stop"); none for the binary itself.
	args []string
}

// commands returns every command whose flag set is declared under cmdDir's
// binaries (cmd/<bin>/*.go, tests and cmd/internal left out), sorted by
// name. A flag set whose name is not a string literal, or whose first word
// is not its binary, is an error: its table could not be found.
func commands(cmdDir string) ([]command, error) {
	entries, err := os.ReadDir(cmdDir)
	if err != nil {
		return nil, err
	}
	var out []command
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "internal" {
			continue
		}
		files, err := filepath.Glob(filepath.Join(cmdDir, e.Name(), "*.go"))
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			names, err := flagSetNames(file)
			if err != nil {
				errs = append(errs, err)
			}
			for _, n := range names {
				words := strings.Fields(n)
				if len(words) == 0 || words[0] != e.Name() {
					errs = append(errs, fmt.Errorf("%s: flag set %q is not named for its binary %s", file, n, e.Name()))
					continue
				}
				out = append(out, command{name: n, bin: words[0], args: words[1:]})
			}
		}
	}
	slices.SortFunc(out, func(a, b command) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(out); i++ {
		if out[i].name == out[i-1].name {
			errs = append(errs, fmt.Errorf("two flag sets are named %q", out[i].name))
		}
	}
	return out, errors.Join(errs...)
}

// flagSetNames returns the names given to cli.NewFlagSet in file.
func flagSetNames(file string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "NewFlagSet" {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "cli" {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			errs = append(errs, fmt.Errorf("%s: cli.NewFlagSet's name is not a string literal, so its command is unknown", file))
			return true
		}
		name, err := strconv.Unquote(lit.Value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", file, err))
			return true
		}
		names = append(names, name)
		return true
	})
	return names, errors.Join(errs...)
}

// helpTables builds each binary once into a temporary folder and returns
// every command's `--help=markdown`, by name. The binaries run with an
// empty environment, so that no CHATGUARD_ variable of the caller's shell
// shows up as a default.
func helpTables(ctx context.Context, root string, cmds []command) (map[string][]byte, error) {
	dir, err := os.MkdirTemp("", "flagdocs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	built := map[string]string{}
	tables := map[string][]byte{}
	for _, c := range cmds {
		bin, ok := built[c.bin]
		if !ok {
			bin = filepath.Join(dir, c.bin)
			build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+c.bin)
			build.Dir = root
			if out, err := build.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("build cmd/%s: %w\n%s", c.bin, err, out)
			}
			built[c.bin] = bin
		}
		help := exec.CommandContext(ctx, bin, append(slices.Clone(c.args), "--help="+cli.HelpMarkdown)...)
		help.Env = []string{}
		var stderr bytes.Buffer
		help.Stderr = &stderr
		out, err := help.Output()
		if err != nil {
			return nil, fmt.Errorf("%s --help=%s: %w\n%s", c.name, cli.HelpMarkdown, err, stderr.Bytes())
		}
		if !bytes.HasPrefix(out, []byte("| flag |")) {
			return nil, fmt.Errorf("%s --help=%s printed no Markdown table", c.name, cli.HelpMarkdown)
		}
		tables[c.name] = out
	}
	return tables, nil
}

// Section markers: a table sits between <!-- flags:NAME --> and
// <!-- end -->, each on a line of its own.
var (
	beginMarker = regexp.MustCompile(`^<!-- flags:([a-z0-9][a-z0-9 -]*) -->$`)
	endMarker   = "<!-- end -->"
)

// splice returns page with the content of every flags section replaced by
// its command's table; see spliceAll.
func splice(content []byte, tables map[string][]byte) ([]byte, error) {
	out, err := spliceAll([]page{{content: content}}, tables)
	if err != nil {
		return nil, err
	}
	return out[0].content, nil
}

// spliceAll returns the pages with the content of every flags section
// replaced by its command's table, set off by blank lines (so that the end
// marker can never be read as a row of the table). Every command needs
// exactly one section among all the pages and every section a command;
// the problems are joined, each prefixed with its page.
func spliceAll(pages []page, tables map[string][]byte) ([]page, error) {
	var errs []error
	seen := map[string]bool{}
	out := make([]page, len(pages))
	for i, p := range pages {
		content, err := splicePage(p.content, tables, seen)
		if err != nil && p.rel != "" {
			err = fmt.Errorf("%s: %w", p.rel, err)
		}
		errs = append(errs, err)
		out[i] = page{rel: p.rel, content: content}
	}
	var missing []string
	for name := range tables {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	for _, name := range missing {
		errs = append(errs, fmt.Errorf("no section for %q: add <!-- flags:%s --> and %s where its table belongs", name, name, endMarker))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// splicePage splices the tables into one page, marking in seen the
// sections it has.
func splicePage(content []byte, tables map[string][]byte, seen map[string]bool) ([]byte, error) {
	var out bytes.Buffer
	var errs []error
	open := ""
	for i, line := range strings.SplitAfter(string(content), "\n") {
		text := strings.TrimRight(line, "\r\n")
		if m := beginMarker.FindStringSubmatch(text); m != nil {
			if open != "" {
				errs = append(errs, fmt.Errorf("line %d: section %q opens before %q ends", i+1, m[1], open))
			}
			open = m[1]
			out.WriteString(line)
			table, ok := tables[open]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("line %d: section %q names no command", i+1, open))
			case seen[open]:
				errs = append(errs, fmt.Errorf("line %d: a second section %q", i+1, open))
			default:
				out.WriteString("\n")
				out.Write(table)
				out.WriteString("\n")
			}
			seen[open] = true
			continue
		}
		if text == endMarker {
			if open == "" {
				errs = append(errs, fmt.Errorf("line %d: %s outside a section", i+1, endMarker))
			}
			open = ""
			out.WriteString(line)
			continue
		}
		if open == "" {
			out.WriteString(line)
		}
	}
	if open != "" {
		errs = append(errs, fmt.Errorf("section %q has no %s", open, endMarker))
	}
	return out.Bytes(), errors.Join(errs...)
}
