// Package inventory answers two questions about the chatguard binaries for
// the deployment tests: which flags (and so CHATGUARD_* variables) each one
// takes, read from its --help; and which metrics the product exports, read
// from the Go source of the product module.
//
// The metric inventory is derived from every prometheus.New* constructor
// call in the module's non-test code, not from a list kept by hand, so a
// renamed or removed metric disappears from it as soon as the code changes.
// A constructor call it cannot read (a name built at run time, options
// passed in a variable, Namespace/Subsystem prefixes) is an error rather
// than a silent gap; extend the reader when that happens. Scraping a booted
// binary would miss every labelled metric that has not been observed yet,
// which is why the source is the primary record; the tests cross-check it
// against what a booted consumer actually serves.
package inventory

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// promPath is the import path of the Prometheus client library.
const promPath = "github.com/prometheus/client_golang/prometheus"

// Metric is one metric family the product registers.
type Metric struct {
	Name string
	// Type is counter, gauge, histogram or summary.
	Type string
	// Labels are the variable and constant label names.
	Labels []string
	// Pos is where it is constructed (file:line, relative to the root).
	Pos string
}

// Series returns the sample names the family is exposed as: the name
// itself, and _bucket, _sum and _count for histograms (_sum and _count for
// summaries).
func (m Metric) Series() []string {
	switch m.Type {
	case "histogram":
		return []string{m.Name + "_bucket", m.Name + "_sum", m.Name + "_count"}
	case "summary":
		return []string{m.Name, m.Name + "_sum", m.Name + "_count"}
	}
	return []string{m.Name}
}

// HasLabel reports whether a sample of series s of this family can carry
// label l (le is on histogram buckets, quantile on summaries).
func (m Metric) HasLabel(series, l string) bool {
	if (l == "le" && series == m.Name+"_bucket") || (l == "quantile" && m.Type == "summary" && series == m.Name) {
		return true
	}
	for _, x := range m.Labels {
		if x == l {
			return true
		}
	}
	return false
}

// constructors maps prometheus.New* to the metric type and whether its
// second argument is the variable label names.
var constructors = map[string]struct {
	typ string
	vec bool
}{
	"NewCounter": {"counter", false}, "NewCounterVec": {"counter", true}, "NewCounterFunc": {"counter", false},
	"NewGauge": {"gauge", false}, "NewGaugeVec": {"gauge", true}, "NewGaugeFunc": {"gauge", false},
	"NewHistogram": {"histogram", false}, "NewHistogramVec": {"histogram", true},
	"NewSummary": {"summary", false}, "NewSummaryVec": {"summary", true},
	"NewUntypedFunc": {"untyped", false},
}

// notMetrics are prometheus.New* functions that construct no metric family
// of the product's own.
var notMetrics = map[string]bool{"NewRegistry": true, "NewPedanticRegistry": true}

// skipDirs are directories of the root that hold no product code: other
// modules (deploy/...), development stand-ins and tooling.
var skipDirs = map[string]bool{"deploy": true, "testdata": true, "vendor": true, "node_modules": true}

// Metrics reads every metric the Go module at root constructs, by name. It
// fails on a constructor call it cannot read, and on one name constructed
// twice with different types or labels.
func Metrics(root string) (map[string]Metric, error) {
	fset := token.NewFileSet()
	out := map[string]Metric{}
	consts := map[string]map[string]string{}
	var errs []error
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		ms, ferrs := fileMetrics(fset, f, rel, packageConsts(consts, filepath.Dir(path), fset))
		errs = append(errs, ferrs...)
		for _, m := range ms {
			if prev, ok := out[m.Name]; ok && (prev.Type != m.Type || strings.Join(prev.Labels, ",") != strings.Join(m.Labels, ",")) {
				errs = append(errs, fmt.Errorf("%s: %s constructed again with another type or labels (first at %s)", m.Pos, m.Name, prev.Pos))
				continue
			}
			out[m.Name] = m
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	return out, nil
}

// packageConsts returns the string constants declared in the package in
// dir, so that Name: SomeConst resolves; cache holds them per directory.
func packageConsts(cache map[string]map[string]string, dir string, fset *token.FileSet) map[string]string {
	if c, ok := cache[dir]; ok {
		return c
	}
	c := map[string]string{}
	entries, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, p := range entries {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if s, ok := stringLit(vs.Values[i]); ok {
							c[n.Name] = s
						}
					}
				}
			}
		}
	}
	cache[dir] = c
	return c
}

func fileMetrics(fset *token.FileSet, f *ast.File, rel string, consts map[string]string) ([]Metric, []error) {
	alias := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == promPath {
			alias = "prometheus"
			if imp.Name != nil {
				alias = imp.Name.Name
			}
		}
	}
	if alias == "" {
		return nil, nil
	}
	labelVars := labelVariables(f, alias, consts)
	var out []Metric
	var errs []error
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != alias || !strings.HasPrefix(sel.Sel.Name, "New") || notMetrics[sel.Sel.Name] {
			return true
		}
		pos := fmt.Sprintf("%s:%d", filepath.ToSlash(rel), fset.Position(call.Pos()).Line)
		ctor, known := constructors[sel.Sel.Name]
		if !known {
			if strings.HasSuffix(sel.Sel.Name, "Opts") || sel.Sel.Name == "NewDesc" || strings.HasPrefix(sel.Sel.Name, "New") && strings.Contains(sel.Sel.Name, "Collector") {
				errs = append(errs, fmt.Errorf("%s: prometheus.%s is not read by package inventory; extend it", pos, sel.Sel.Name))
			}
			return true
		}
		m, err := readMetric(call, ctor.typ, ctor.vec, consts, labelVars)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: prometheus.%s: %w", pos, sel.Sel.Name, err))
			return true
		}
		m.Pos = pos
		out = append(out, m)
		return true
	})
	return out, errs
}

func readMetric(call *ast.CallExpr, typ string, vec bool, consts map[string]string, labelVars map[string][]string) (Metric, error) {
	m := Metric{Type: typ}
	if len(call.Args) == 0 {
		return m, errors.New("no options")
	}
	opts := call.Args[0]
	if u, ok := opts.(*ast.UnaryExpr); ok {
		opts = u.X
	}
	lit, ok := opts.(*ast.CompositeLit)
	if !ok {
		return m, errors.New("options are not a literal")
	}
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			return m, errors.New("options literal without field names")
		}
		key, _ := kv.Key.(*ast.Ident)
		if key == nil {
			continue
		}
		switch key.Name {
		case "Name":
			s, ok := stringValue(kv.Value, consts)
			if !ok {
				return m, errors.New("the Name field is not a string constant")
			}
			m.Name = s
		case "Namespace", "Subsystem":
			return m, fmt.Errorf("%s prefixes are not read; write the full Name", key.Name)
		case "ConstLabels":
			ls, ok := mapKeys(kv.Value, consts)
			if id, isIdent := kv.Value.(*ast.Ident); !ok && isIdent {
				ls, ok = labelVars[id.Name]
			}
			if !ok {
				return m, errors.New("ConstLabels is neither a literal nor a prometheus.Labels variable of this file")
			}
			m.Labels = append(m.Labels, ls...)
		}
	}
	if m.Name == "" {
		return m, errors.New("no Name")
	}
	if vec {
		if len(call.Args) < 2 {
			return m, errors.New("no label names")
		}
		ls, ok := stringSlice(call.Args[1], consts)
		if !ok {
			return m, errors.New("label names are not a []string literal")
		}
		m.Labels = append(m.Labels, ls...)
	}
	sort.Strings(m.Labels)
	return m, nil
}

// labelVariables finds `x := prometheus.Labels{...}` (and var x = ...) in
// f, by name, with their literal keys; a name bound twice to different keys
// is left out, so that a use of it is an error rather than a guess.
func labelVariables(f *ast.File, alias string, consts map[string]string) map[string][]string {
	out := map[string][]string{}
	bad := map[string]bool{}
	bind := func(name string, value ast.Expr) {
		lit, ok := value.(*ast.CompositeLit)
		if !ok {
			return
		}
		sel, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Labels" {
			return
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != alias {
			return
		}
		keys, ok := mapKeys(lit, consts)
		if prev, seen := out[name]; !ok || (seen && strings.Join(prev, ",") != strings.Join(keys, ",")) {
			bad[name] = true
			return
		}
		out[name] = keys
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok && i < len(n.Rhs) {
					bind(id.Name, n.Rhs[i])
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if i < len(n.Values) {
					bind(id.Name, n.Values[i])
				}
			}
		}
		return true
	})
	for name := range bad {
		delete(out, name)
	}
	return out
}

func stringLit(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	if s, ok := stringLit(e); ok {
		return s, true
	}
	if id, ok := e.(*ast.Ident); ok {
		s, ok := consts[id.Name]
		return s, ok
	}
	return "", false
}

func stringSlice(e ast.Expr, consts map[string]string) ([]string, bool) {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	var out []string
	for _, el := range lit.Elts {
		s, ok := stringValue(el, consts)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func mapKeys(e ast.Expr, consts map[string]string) ([]string, bool) {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	var out []string
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			return nil, false
		}
		s, ok := stringValue(kv.Key, consts)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}
