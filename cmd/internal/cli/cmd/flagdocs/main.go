// Command flagdocs renders the flag table of every chatguard binary and
// subcommand into docs/configuration.md, between the page's marker
// comments (<!-- flags:worker stop --> … <!-- end -->), and leaves the prose
// around them as it is. `make docs` runs it, and cmd's
// TestConfigurationTablesAreGenerated fails when the page differs from what
// it renders, so a new flag cannot be left undocumented.
//
// The commands are read from the source: each cli.NewFlagSet("worker stop", …)
// under cmd/<binary>/ is one command, its first word the binary and the rest
// the subcommand. Each binary is built once and asked for
// `<binary> [subcommand] --help=markdown`, so every table is the binary's own
// --help.
//
//	flagdocs [--root DIR] [--doc PATH] [--print]
//
// Exit status: 0 rendered, 1 failed (a command without a section, a section
// without a command, a build that failed), 2 bad usage.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], cli.Environ, os.Stdout, os.Stderr))
}

// run is main without the process: it parses the flags, renders and maps
// the outcome to an exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	m := &Main{Root: ".", Doc: "docs/configuration.md", Timeout: 10 * time.Minute, Stdout: stdout}
	fs := cli.NewFlagSet("flagdocs", "Renders the flag table of every binary and subcommand (their --help=markdown) into the\n"+
		"<!-- flags:NAME --> … <!-- end --> sections of docs/configuration.md.")
	fs.StringVar(&m.Root, "root", "repository root: the binaries are its cmd/<name>")
	fs.StringVar(&m.Doc, "doc", "the page, relative to --root")
	fs.BoolVar(&m.Print, "print", "write the rendered page to stdout and leave the file as it is")
	fs.DurationVar(&m.Timeout, "timeout", "deadline of the builds and --help calls together")
	if code, done := fs.ParseCommand(args, getenv, stdout, stderr); done {
		return code
	}
	if m.Timeout <= 0 {
		return cli.Fail(stderr, "flagdocs", fmt.Errorf("--timeout must be positive"))
	}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "flagdocs: %v\n", err)
		return 1
	}
	return 0
}
