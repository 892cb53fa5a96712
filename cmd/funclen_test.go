package cmd_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines bounds a function of the root module, from its declaration
// line to its closing brace: the engine's paths are read by people
// checking privacy and injection rules, the binaries' by people checking
// what a flag does, and a function that does not fit on one screen hides
// which rule runs when.
const maxFuncLines = 80

// funcLenExceptions are the "file:function" entries allowed over
// maxFuncLines, each with the reason: only functions whose split is under
// way. An entry whose function is gone or now short fails the test, so it
// goes with the split.
var funcLenExceptions = map[string]string{}

// TestFuncLenRootModule fails on a function over maxFuncLines in a
// non-test file of the root module (test helper packages included; the
// deploy/k8s and deploy/local modules and testdata are not the root
// module), and on an exception that no longer names a long function.
func TestFuncLenRootModule(t *testing.T) {
	var long []string
	stale := make(map[string]bool, len(funcLenExceptions))
	for k := range funcLenExceptions {
		stale[k] = true
	}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipOutsideRootModule(path, d)
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel("..", path)
		rel = filepath.ToSlash(rel)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, fn := range longFuncs(fset, f, maxFuncLines) {
			key := rel + ":" + fn.name
			delete(stale, key)
			if _, ok := funcLenExceptions[key]; !ok {
				long = append(long, key+" ("+itoa(fn.lines)+" lines)")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(long) > 0 {
		t.Errorf("functions over %d lines (split them into steps named for what they do):\n%s", maxFuncLines, strings.Join(long, "\n"))
	}
	if len(stale) > 0 {
		keys := make([]string, 0, len(stale))
		for k := range stale {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		t.Errorf("funcLenExceptions entries that name no long function (remove them):\n%s", strings.Join(keys, "\n"))
	}
}

// skipOutsideRootModule is filepath.SkipDir for a directory whose files
// are not the root module's: another module (its own go.mod), testdata,
// and hidden or underscore directories the go tool ignores.
func skipOutsideRootModule(path string, d fs.DirEntry) error {
	if path == ".." {
		return nil
	}
	name := d.Name()
	if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return filepath.SkipDir
	}
	if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
		return filepath.SkipDir
	}
	return nil
}

// TestFuncLenSkipsOtherModules shows the walk covers the binaries and the
// test helper packages but not the deployment and local-stack modules.
func TestFuncLenSkipsOtherModules(t *testing.T) {
	dirs := map[string]error{}
	for _, p := range []string{"../cmd", "../storage/storetest", "../deploy", "../deploy/k8s", "../deploy/local", "../cmd/worker/testdata"} {
		info, err := os.Stat(p)
		if err != nil {
			continue // a directory this checkout lacks says nothing
		}
		dirs[p] = skipOutsideRootModule(p, fs.FileInfoToDirEntry(info))
	}
	for p, want := range map[string]error{"../cmd": nil, "../storage/storetest": nil, "../deploy": nil,
		"../deploy/k8s": filepath.SkipDir, "../deploy/local": filepath.SkipDir, "../cmd/worker/testdata": filepath.SkipDir} {
		if got, ok := dirs[p]; ok && got != want {
			t.Errorf("skipOutsideRootModule(%s) = %v, want %v", p, got, want)
		}
	}
}

// TestFunctionLengthCheckCatchesALongFunction shows the check counts from
// the declaration line to the closing brace, names methods by their
// receiver (generic ones too), and lets a function of exactly the limit
// pass.
func TestFunctionLengthCheckCatchesALongFunction(t *testing.T) {
	src := "package p\n\n" +
		"func atLimit() {\n" + strings.Repeat("\t_ = 0\n", maxFuncLines-2) + "}\n\n" +
		"func (s *set[T]) overLimit() {\n" + strings.Repeat("\t_ = 0\n", maxFuncLines-1) + "}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := longFuncs(fset, f, maxFuncLines)
	want := []funcLen{{name: "set.overLimit", lines: maxFuncLines + 1}}
	if !slices.Equal(got, want) {
		t.Errorf("longFuncs = %v, want %v", got, want)
	}
}

// funcLen is a function declaration and its length in lines.
type funcLen struct {
	name  string
	lines int
}

// longFuncs returns the function declarations of f longer than limit
// lines, named "Func" or "Recv.Method".
func longFuncs(fset *token.FileSet, f *ast.File, limit int) []funcLen {
	var out []funcLen
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		if n > limit {
			out = append(out, funcLen{name: funcName(fd), lines: n})
		}
	}
	return out
}

// funcName is fd's name, prefixed with its receiver's type name for a
// method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	switch g := t.(type) {
	case *ast.IndexExpr:
		t = g.X
	case *ast.IndexListExpr:
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
