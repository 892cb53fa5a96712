package cmd_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// clockedTrees are the production trees whose own timing logic runs on
// internal/clock, so that a test can move their time by hand.
var clockedTrees = []string{"pipeline", "consumer", "storage"}

// wallTimeCalls are the package time functions that read or wait on the
// wall clock.
var wallTimeCalls = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}

// clockExceptions are files allowed a direct wall-clock call, each with
// the reason. Keep it empty unless the call bounds a wait on another
// machine that no test needs to move.
var clockExceptions = map[string]string{}

// TestTimeComesFromTheClock fails on a direct time.Now, time.NewTimer,
// time.Sleep (…) in a non-test file of the clocked trees: those go through
// internal/clock, so that one fake moves them all in tests.
func TestTimeComesFromTheClock(t *testing.T) {
	var found []string
	for _, tree := range clockedTrees {
		err := filepath.WalkDir(filepath.Join("..", tree), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel("..", path)
			rel = filepath.ToSlash(rel)
			if _, ok := clockExceptions[rel]; ok {
				return nil
			}
			for _, c := range wallTimeUses(t, path) {
				found = append(found, rel+": "+c)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(found) > 0 {
		t.Errorf("direct wall-clock calls (take an internal/clock Clock instead):\n%s", strings.Join(found, "\n"))
	}
}

// wallTimeUses returns "time.Now (line 12)"-style entries for each direct
// call or reference to a wall-clock function of package time in path.
func wallTimeUses(t *testing.T, path string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	timeName := ""
	for _, imp := range f.Imports {
		if imp.Path.Value == `"time"` {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	if timeName == "" {
		return nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == timeName && slices.Contains(wallTimeCalls, sel.Sel.Name) {
			out = append(out, "time."+sel.Sel.Name+" (line "+itoa(fset.Position(sel.Pos()).Line)+")")
		}
		return true
	})
	return out
}
