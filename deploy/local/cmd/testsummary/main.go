// Command testsummary reads `go test -json` on stdin, prints the tests'
// output as `go test` would (a failed test's lines; every test's with -v),
// and ends with a table of every package's time
// and counts of tests run, passed, failed and skipped, with the totals and
// the run's wall time. It exits 1 when a package failed or nothing ran, so
// `go test -json ... | testsummary` fails as `go test` would.
//
//	go test -json ./... | go run ./deploy/local/cmd/testsummary
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/chatguard/chatguard/deploy/local/testsummary"
)

func main() {
	verbose := flag.Bool("v", false, "print every test's output, as go test -v")
	flag.Parse()
	start := time.Now()
	s, err := testsummary.Read(os.Stdin, os.Stdout, *verbose)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := s.Write(os.Stdout, time.Since(start)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if s.Failed {
		os.Exit(1)
	}
}
