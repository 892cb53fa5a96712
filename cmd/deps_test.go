package cmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
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
