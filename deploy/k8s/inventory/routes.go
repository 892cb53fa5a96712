package inventory

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
)

// Route is one pattern a binary's admin mux registers.
type Route struct {
	Method string // "" for every method
	Path   string // "/healthz"; a trailing slash matches the subtree
}

// Serves reports whether a GET of path reaches this route.
func (r Route) Serves(method, path string) bool {
	if r.Method != "" && r.Method != method {
		return false
	}
	if strings.HasSuffix(r.Path, "/") {
		return strings.HasPrefix(path, r.Path)
	}
	return r.Path == path
}

// Routes reads the http.ServeMux patterns registered in the non-test Go
// files of the package in dir: every X.Handle("...", ...) and
// X.HandleFunc("...", ...) with a literal pattern ("GET /healthz",
// "/debug/pprof/"). A registration whose pattern is not a literal is an
// error.
func Routes(dir string) ([]Route, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	fset := token.NewFileSet()
	var out []Route
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("inventory: %w", err)
		}
		var ferr error
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			pattern, ok := stringLit(call.Args[0])
			if !ok {
				ferr = fmt.Errorf("inventory: %s: a route whose pattern is not a literal", fset.Position(call.Pos()))
				return false
			}
			method, path, found := strings.Cut(pattern, " ")
			if !found {
				method, path = "", pattern
			}
			out = append(out, Route{Method: method, Path: strings.TrimSpace(path)})
			return true
		})
		if ferr != nil {
			return nil, ferr
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("inventory: no routes registered in %s", dir)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path+out[i].Method < out[j].Path+out[j].Method })
	return out, nil
}
