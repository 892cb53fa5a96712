// Package testsummary reads the events of `go test -json`, passes their
// output on as `go test` would print it, and sums up each package: how long
// it took, how many tests ran, passed, failed and were skipped. `make test`
// prints the table at the end, so that the ten-minute budget is visible
// suite by suite and a dropped test shows as a smaller count.
package testsummary

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// Package is one package's outcome.
type Package struct {
	// Name is the import path.
	Name string
	// Elapsed is the package's own time, as `go test` reports it.
	Elapsed time.Duration
	// Run, Passed, Failed and Skipped count tests and subtests.
	Run, Passed, Failed, Skipped int
	// Result is "ok", "FAIL" (a test, the build or the binary failed) or
	// "no tests".
	Result string
}

// Summary is every package seen, and whether the run as a whole failed.
type Summary struct {
	Packages []Package
	// Failed is set when a package failed or the input held no package at
	// all (go test stopped before running anything).
	Failed bool
	// Invalid counts input lines that were not test events; they are
	// passed on as they are.
	Invalid int
}

// Read consumes the events of r and returns the summary once r ends. It
// writes output to out as plain `go test` does: a package's own lines as
// they come, and a test's lines only when it fails (all of them with
// verbose set, as `go test -v`).
func Read(r io.Reader, out io.Writer, verbose bool) (Summary, error) {
	pkgs := map[string]*Package{}
	get := func(name string) *Package {
		p, ok := pkgs[name]
		if !ok {
			p = &Package{Name: name}
			pkgs[name] = p
		}
		return p
	}
	var s Summary
	held := map[[2]string][]string{} // a running test's output, until it passes or fails
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			s.Invalid++
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		show(out, held, e, verbose)
		if e.Package == "" {
			continue
		}
		count(get(e.Package), e)
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("testsummary: %w", err)
	}
	for _, p := range pkgs {
		if p.Result == "" {
			p.Result = "FAIL" // the package never finished: its binary died or the input was cut
		}
		s.Failed = s.Failed || p.Result == "FAIL" || p.Failed > 0
		s.Packages = append(s.Packages, *p)
	}
	slices.SortFunc(s.Packages, func(a, b Package) int {
		return cmp.Or(cmp.Compare(b.Elapsed, a.Elapsed), strings.Compare(a.Name, b.Name))
	})
	s.Failed = s.Failed || len(s.Packages) == 0
	return s, nil
}

// show writes e's output, holding a test's lines back until the test ends
// and dropping them when it passed or was skipped, unless verbose.
func show(out io.Writer, held map[[2]string][]string, e event, verbose bool) {
	key := [2]string{e.Package, e.Test}
	switch {
	case verbose || e.Test == "":
		_, _ = io.WriteString(out, e.Output)
	case e.Action == "output":
		held[key] = append(held[key], e.Output)
	case e.Action == "fail":
		_, _ = io.WriteString(out, strings.Join(held[key], ""))
		delete(held, key)
	case e.Action == "pass" || e.Action == "skip":
		delete(held, key)
	}
}

// count applies one event to its package.
func count(p *Package, e event) {
	if e.Test != "" {
		switch e.Action {
		case "run":
			p.Run++
		case "pass":
			p.Passed++
		case "fail":
			p.Failed++
		case "skip":
			p.Skipped++
		}
		return
	}
	switch e.Action {
	case "pass":
		p.Result, p.Elapsed = "ok", seconds(e.Elapsed)
	case "fail":
		p.Result, p.Elapsed = "FAIL", seconds(e.Elapsed)
	case "skip":
		p.Result, p.Elapsed = "no tests", seconds(e.Elapsed)
	}
}

// seconds is a float of seconds as a duration, to the millisecond.
func seconds(f float64) time.Duration {
	return time.Duration(f * float64(time.Second)).Round(time.Millisecond)
}

// Write prints the summary table: one row per package that ran tests (the
// slowest first), then the totals. Elapsed times overlap when packages run
// in parallel, so their sum is CPU-side, not wall-clock, time; wall is the
// run's own duration where the caller measured it (zero: not printed).
func (s Summary) Write(w io.Writer, wall time.Duration) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-8s %9s %6s %6s %6s %6s  %s\n", "result", "time", "run", "pass", "fail", "skip", "package")
	var total Package
	empty := 0
	for _, p := range s.Packages {
		if p.Result == "no tests" && p.Run == 0 {
			empty++
			continue
		}
		fmt.Fprintf(&b, "%-8s %8.1fs %6d %6d %6d %6d  %s\n", p.Result, p.Elapsed.Seconds(), p.Run, p.Passed, p.Failed, p.Skipped, p.Name)
		total.Elapsed += p.Elapsed
		total.Run += p.Run
		total.Passed += p.Passed
		total.Failed += p.Failed
		total.Skipped += p.Skipped
	}
	result := "ok"
	if s.Failed {
		result = "FAIL"
	}
	fmt.Fprintf(&b, "%-8s %8.1fs %6d %6d %6d %6d  total: %d packages with tests, %d without", result, total.Elapsed.Seconds(),
		total.Run, total.Passed, total.Failed, total.Skipped, len(s.Packages)-empty, empty)
	if wall > 0 {
		fmt.Fprintf(&b, "; wall %s", wall.Round(time.Second))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
