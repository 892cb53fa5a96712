// Command flagdocs renders the flag table of every chatguard binary and
// subcommand into its page of docs/configuration/ (one per binary),
// between the page's marker comments (<!-- flags:worker stop --> …
// <!-- end -->), and leaves the prose around them as it is. `make docs`
// runs it, and cmd's TestConfigurationTablesAreGenerated fails when a page
// differs from what it renders, so a new flag cannot be left undocumented.
//
// The commands are read from the source: each cli.NewFlagSet("worker stop", …)
// under cmd/<binary>/ is one command, its first word the binary and the rest
// the subcommand. Each binary is built once and asked for
// `<binary> [subcommand] --help=markdown`, so every table is the binary's own
// --help.
//
//	flagdocs [--root DIR] [--doc GLOB]... [--print]
//
// Exit status: 0 rendered, 1 failed (a command without a section, a section
// without a command, a build that failed), 2 bad usage.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], cli.Environ, os.Stdout, os.Stderr))
}

// run is main without the process: it parses the flags, renders and maps
// the outcome to an exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	m := &Main{Root: ".", Timeout: 10 * time.Minute, Stdout: stdout}
	docs := docsFlag{patterns: defaultDocs}
	fs := cli.NewFlagSet("flagdocs", "Renders the flag table of every binary and subcommand (their --help=markdown) into the\n"+
		"<!-- flags:NAME --> … <!-- end --> sections of the pages of docs/configuration/.")
	fs.StringVar(&m.Root, "root", "repository root: the binaries are its cmd/<name>")
	fs.Var(&docs, "doc", "a page or glob of pages, relative to --root (repeatable; given, it replaces the default)")
	fs.BoolVar(&m.Print, "print", "write the rendered pages to stdout, each after a line ==> PATH <==, and leave the files as they are")
	fs.DurationVar(&m.Timeout, "timeout", "deadline of the builds and --help calls together")
	if code, done := fs.ParseCommand(args, getenv, stdout, stderr); done {
		return code
	}
	m.Docs = docs.patterns
	if m.Timeout <= 0 {
		return cli.Fail(stderr, "flagdocs", fmt.Errorf("--timeout must be positive"))
	}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "flagdocs: %v\n", err)
		return 1
	}
	return 0
}

// defaultDocs are the pages holding the flag sections: one per binary.
var defaultDocs = []string{"docs/configuration/*.md"}

// docsFlag is the repeatable --doc; the first value given replaces the
// default.
type docsFlag struct {
	patterns []string
	given    bool
}

func (d *docsFlag) String() string { return strings.Join(d.patterns, ",") }

func (d *docsFlag) Set(s string) error {
	if !d.given {
		d.patterns, d.given = nil, true
	}
	d.patterns = append(d.patterns, s)
	return nil
}
