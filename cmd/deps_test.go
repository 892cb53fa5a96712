package cmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const module = "github.com/chatguard/chatguard"

// standIns are import-path prefixes of the development stand-ins: none may
// be linked into a production binary (they are large, and a stand-in that
// answered in production would hide an outage).
var standIns = []string{
	"github.com/duckdb/",
	"github.com/dolthub/",
	"github.com/johannesboyne/gofakes3",
	"github.com/alicebob/miniredis",
	module + "/deploy/local",
	module + "/internal/stacktest",
	module + "/internal/standin",
}

// standInModules are module-path prefixes that the production module's
// graph (go.mod, GOWORK=off) must not hold at all: the stand-ins and what
// only they need. deploy/local is a module of its own, so that a build of
// the production module downloads, vets and scans none of it.
var standInModules = []string{
	"github.com/duckdb/",
	"github.com/dolthub/",
	"github.com/johannesboyne/gofakes3",
	"github.com/alicebob/miniredis",
	"github.com/sirupsen/logrus",
	"github.com/spf13/afero",
	module + "/deploy/local",
	// Deprecated by its makers in favour of feature/s3/transfermanager.
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager",
}

type listedPackage struct {
	ImportPath string
	Imports    []string
}

// deps returns the non-test dependency graph of pkg as `go list -deps` sees
// it for the binary's build.
func deps(t *testing.T, pkg string) []listedPackage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-json=ImportPath,Imports", pkg)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s: %s", pkg, stderr.String())
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestProductionBinariesLinkNoStandIns(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{"batch", "worker", "consumer"} {
		t.Run(bin, func(t *testing.T) {
			t.Parallel()
			pkgs := deps(t, module+"/cmd/"+bin)
			require.NotEmpty(t, pkgs)
			require.Equal(t, module+"/cmd/"+bin, pkgs[len(pkgs)-1].ImportPath, "go list -deps ends with the package itself")
			var bad []string
			for _, p := range pkgs {
				for _, prefix := range standIns {
					if !strings.HasPrefix(p.ImportPath, prefix) {
						continue
					}
					// Name who pulls it in, so the fix is obvious.
					var by []string
					for _, q := range pkgs {
						for _, imp := range q.Imports {
							if imp == p.ImportPath {
								by = append(by, q.ImportPath)
							}
						}
					}
					bad = append(bad, p.ImportPath+" (imported by "+strings.Join(by, ", ")+")")
				}
			}
			require.Empty(t, bad, "cmd/%s links development stand-ins", bin)
		})
	}
}

// TestStandInCheckCatchesTheStack guards the check itself: the stack's own
// entry point links every stand-in, so the same scan must flag it.
func TestStandInCheckCatchesTheStack(t *testing.T) {
	t.Parallel()
	pkgs := deps(t, module+"/deploy/local/cmd/stack")
	found := map[string]bool{}
	for _, p := range pkgs {
		for _, prefix := range standIns {
			if strings.HasPrefix(p.ImportPath, prefix) {
				found[prefix] = true
			}
		}
	}
	for _, want := range []string{"github.com/duckdb/", "github.com/dolthub/", "github.com/johannesboyne/gofakes3", "github.com/alicebob/miniredis", module + "/deploy/local"} {
		require.True(t, found[want], "the scan misses %s in the stack's dependencies", want)
	}
}

// deployImports returns, for the production module's non-test packages
// pkgs, "pkg imports dep" for each import of the deploy tree by a package
// outside it. deploy/ holds what deploys and develops the product
// (manifests, the image, the stand-ins, how to apply the lake's schema);
// what production code reads — the lake's DDL and queries (lake/), MySQL's
// migrations — is part of the product, so a change to a deploy folder never
// changes a binary.
func deployImports(pkgs []listedPackage) []string {
	var bad []string
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if rel == "deploy" || strings.HasPrefix(rel, "deploy/") {
			continue
		}
		for _, imp := range p.Imports {
			if imp == module+"/deploy" || strings.HasPrefix(imp, module+"/deploy/") {
				bad = append(bad, p.ImportPath+" imports "+imp)
			}
		}
	}
	return bad
}

// TestProductionImportsNoDeployTree: no package of the production module
// (GOWORK=off keeps the workspace's other modules out) outside deploy/
// imports a package of the deploy tree.
func TestProductionImportsNoDeployTree(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "list", "-json=ImportPath,Imports", module+"/...")
	cmd.Env = append(cmd.Environ(), "GOWORK=off")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	var paths []string
	for _, p := range pkgs {
		paths = append(paths, p.ImportPath)
	}
	require.Contains(t, paths, module+"/lake", "go list found the module's packages, the lake's schema among them")
	require.Empty(t, deployImports(pkgs), "production code imports the deploy tree; move what it reads into the product (as lake/ and migrations/)")
}

// TestDeployImportCheckCatchesAnImport guards the check itself: the import
// the worker once made of the lake's queries is flagged, imports within
// the deploy tree and of look-alike paths are not.
func TestDeployImportCheckCatchesAnImport(t *testing.T) {
	t.Parallel()
	pkgs := []listedPackage{
		{ImportPath: module + "/cmd/worker", Imports: []string{"context", module + "/lake", module + "/deploy/athena"}},
		{ImportPath: module + "/pipeline/eval", Imports: []string{module + "/deploy"}},
		{ImportPath: module + "/deploy/k8s/verify", Imports: []string{module + "/deploy/k8s/manifest"}},
		{ImportPath: module + "/storage/s3lake", Imports: []string{module + "/deployment", "github.com/other/deploy/x"}},
	}
	require.Equal(t, []string{
		module + "/cmd/worker imports " + module + "/deploy/athena",
		module + "/pipeline/eval imports " + module + "/deploy",
	}, deployImports(pkgs))
}

// goIn runs the go command in dir with the workspace switched off, so that
// it sees one module alone, and returns its stdout.
func goIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), "GOWORK=off")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go %s in %s: %s%s", strings.Join(args, " "), dir, out, stderr.String())
	return string(out)
}

// standInsInGraph returns the modules of `go list -m all` in dir that
// match a prefix of standInModules.
func standInsInGraph(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	for _, line := range strings.Split(goIn(t, dir, "list", "-m", "all"), "\n") {
		path, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		for _, prefix := range standInModules {
			if path != "" && strings.HasPrefix(path, prefix) {
				found = append(found, path)
			}
		}
	}
	return found
}

// TestProductionModuleGraphHasNoStandIns: the production module on its own
// (GOWORK=off) requires none of the stand-ins' modules, and go mod tidy
// would change neither go.mod nor go.sum, so no package or test of it
// imports deploy/local or a stand-in.
func TestProductionModuleGraphHasNoStandIns(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	require.Equal(t, module, strings.TrimSpace(goIn(t, root, "list", "-m")))
	require.Empty(t, standInsInGraph(t, root), "the production module's graph (GOWORK=off go list -m all)")
	// -diff changes nothing and fails, printing the diff, when tidy would.
	goIn(t, root, "mod", "tidy", "-diff")
}

// TestModuleGraphCheckCatchesDeployLocal guards the graph check: the local
// stack's module needs every stand-in, so the same scan must find them.
func TestModuleGraphCheckCatchesDeployLocal(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("..", "deploy", "local"))
	require.NoError(t, err)
	found := strings.Join(standInsInGraph(t, dir), " ")
	for _, want := range []string{"github.com/duckdb/", "github.com/dolthub/", "github.com/johannesboyne/gofakes3", "github.com/alicebob/miniredis"} {
		require.Contains(t, found, want, "the scan misses %s in deploy/local's graph", want)
	}
}

// storageImportAllowed says whether a production package may import an
// adapter under storage/: the mains (which wire adapters to engines) and
// the adapters themselves (which may share types). Engines, web apps and
// domain packages depend on the interfaces pipeline and moderation
// declare, never on an adapter, so that an adapter can be replaced without
// touching them.
func storageImportAllowed(pkg string) bool {
	rel := strings.TrimPrefix(pkg, module+"/")
	return strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "storage/")
}

func TestOnlyMainsAndAdaptersImportStorage(t *testing.T) {
	t.Parallel()
	// Every non-test package of the production module (GOWORK=off keeps the
	// other workspace modules out), with its direct imports.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "list", "-json=ImportPath,Imports", module+"/...")
	cmd.Env = append(cmd.Environ(), "GOWORK=off")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	dec := json.NewDecoder(bytes.NewReader(out))
	var bad []string
	n := 0
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		n++
		if storageImportAllowed(p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"/storage/") {
				bad = append(bad, p.ImportPath+" imports "+imp)
			}
		}
	}
	require.Greater(t, n, 10, "go list found the module's packages")
	require.Empty(t, bad, "only cmd/ and storage/ may import an adapter; declare an interface in pipeline (or moderation) instead")
}

func TestStorageImportRule(t *testing.T) {
	t.Parallel()
	for pkg, want := range map[string]bool{
		module + "/cmd/worker":         true,
		module + "/storage/sqs":        true,
		module + "/consumer":           false,
		module + "/pipeline/jobloop":   false,
		module + "/pipeline/reviewjob": false,
		module + "/internal/retry":     false,
		// The console's web app depends on the moderation core's ports.
		module + "/console":                   false,
		module + "/moderation":                false,
		module + "/moderation/moderationtest": false,
	} {
		require.Equal(t, want, storageImportAllowed(pkg), pkg)
	}
}
