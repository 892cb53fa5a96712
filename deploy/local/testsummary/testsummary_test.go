package testsummary

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// events is a run of two packages, one failing, one without tests, and a
// line that is not an event.
const events = `{"Action":"start","Package":"a/b"}
{"Action":"run","Package":"a/b","Test":"TestOne"}
{"Action":"output","Package":"a/b","Test":"TestOne","Output":"=== RUN   TestOne\n"}
{"Action":"run","Package":"a/b","Test":"TestOne/sub"}
{"Action":"pass","Package":"a/b","Test":"TestOne/sub","Elapsed":0}
{"Action":"pass","Package":"a/b","Test":"TestOne","Elapsed":0.1}
{"Action":"run","Package":"a/b","Test":"TestTwo"}
{"Action":"skip","Package":"a/b","Test":"TestTwo","Elapsed":0}
{"Action":"output","Package":"a/b","Output":"ok  \ta/b\t1.250s\n"}
{"Action":"pass","Package":"a/b","Elapsed":1.25}
{"Action":"run","Package":"a/c","Test":"TestBad"}
{"Action":"output","Package":"a/c","Test":"TestBad","Output":"    bad_test.go:9: want 1\n"}
{"Action":"fail","Package":"a/c","Test":"TestBad","Elapsed":2}
{"Action":"fail","Package":"a/c","Elapsed":2.5}
{"Action":"skip","Package":"a/d","Elapsed":0}
go: warning: not an event
`

// TestReadCountsEveryPackage: tests and subtests are counted per package,
// the slowest package first, the package lines and a failed test's output
// are passed on (a passing test's only when verbose), and a failed test
// fails the run.
func TestReadCountsEveryPackage(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	s, err := Read(strings.NewReader(events), &out, false)
	require.NoError(t, err)
	require.Equal(t, "ok  \ta/b\t1.250s\n    bad_test.go:9: want 1\ngo: warning: not an event\n", out.String())
	var verbose strings.Builder
	_, err = Read(strings.NewReader(events), &verbose, true)
	require.NoError(t, err)
	require.Equal(t, "=== RUN   TestOne\nok  \ta/b\t1.250s\n    bad_test.go:9: want 1\ngo: warning: not an event\n", verbose.String())
	require.Equal(t, []Package{
		{Name: "a/c", Elapsed: 2500 * time.Millisecond, Run: 1, Failed: 1, Result: "FAIL"},
		{Name: "a/b", Elapsed: 1250 * time.Millisecond, Run: 3, Passed: 2, Skipped: 1, Result: "ok"},
		{Name: "a/d", Result: "no tests"},
	}, s.Packages)
	require.True(t, s.Failed)
	require.Equal(t, 1, s.Invalid)

	var table strings.Builder
	require.NoError(t, s.Write(&table, 90*time.Second))
	require.Equal(t, "\n"+
		"result        time    run   pass   fail   skip  package\n"+
		"FAIL          2.5s      1      0      1      0  a/c\n"+
		"ok            1.2s      3      2      0      1  a/b\n"+
		"FAIL          3.8s      4      2      1      1  total: 2 packages with tests, 1 without; wall 1m30s\n", table.String())
}

// TestReadFailsARunThatNeverFinished: a package with no final event (its
// binary was killed) and an input with no package at all both fail.
func TestReadFailsARunThatNeverFinished(t *testing.T) {
	t.Parallel()
	s, err := Read(strings.NewReader(`{"Action":"run","Package":"a/b","Test":"TestHang"}`+"\n"), &strings.Builder{}, false)
	require.NoError(t, err)
	require.True(t, s.Failed)
	require.Equal(t, "FAIL", s.Packages[0].Result)

	s, err = Read(strings.NewReader("go: cannot find main module\n"), &strings.Builder{}, false)
	require.NoError(t, err)
	require.True(t, s.Failed, "nothing ran")

	s, err = Read(strings.NewReader(`{"Action":"pass","Package":"a/b","Elapsed":0.5}`+"\n"), &strings.Builder{}, false)
	require.NoError(t, err)
	require.False(t, s.Failed)
}
