// Command deploy-verify renders an overlay in-process (the Kustomize API)
// and fails, naming each problem, when it is not fit to apply: a
// placeholder left from the template, an image not pinned by digest, the
// console and the workers disagreeing on a shared dependency or on the
// pipeline version, a Secret missing from the deploy docs, a spending cap
// off in prod, identity headers trusted beyond loopback, or egress to the
// metadata service (package verify).
//
//	cd deploy/k8s && go run ./cmd/deploy-verify --overlay overlays/prod
//
// --values FILE renders the overlay with FILE in place of its values.env
// (the tests' filled sample); --dev skips the spending checks.
//
// Exit status: 0 when the render passes, 1 when it has problems or cannot
// be rendered, 2 on bad usage.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/chatguard/chatguard/deploy/k8s/manifest"
	"github.com/chatguard/chatguard/deploy/k8s/verify"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("deploy-verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	overlay := fs.String("overlay", "overlays/prod", "the kustomization to render")
	values := fs.String("values", "", "render with this file in place of the overlay's values.env")
	docs := fs.String("docs", "../README.md", "the deploy docs holding the Secrets table")
	dev := fs.Bool("dev", false, "a development overlay: no spending caps or prices required")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "deploy-verify: unexpected arguments %q\n", fs.Args())
		return 2
	}
	report, err := Verify(*overlay, *values, *docs, !*dev)
	if err != nil {
		fmt.Fprintf(stderr, "deploy-verify: %v\n", err)
		return 1
	}
	if len(report.Problems) > 0 {
		fmt.Fprint(stderr, report.String())
		fmt.Fprintf(stderr, "deploy-verify: %s: %d problems\n", *overlay, len(report.Problems))
		return 1
	}
	fmt.Fprint(stdout, report.String())
	fmt.Fprintf(stdout, "deploy-verify: %s: ok\n", *overlay)
	return 0
}

// Verify renders overlay (with values in place of its values.env when set)
// and checks it against the docs.
func Verify(overlay, values, docs string, prod bool) (verify.Report, error) {
	d, err := os.ReadFile(docs)
	if err != nil {
		return verify.Report{}, err
	}
	var replace map[string][]byte
	if values != "" {
		b, err := os.ReadFile(values)
		if err != nil {
			return verify.Report{}, err
		}
		replace = map[string][]byte{filepath.Join(overlay, "values", "values.env"): b}
	}
	s, err := manifest.RenderWith(overlay, replace)
	if err != nil {
		return verify.Report{}, err
	}
	return verify.Check(s, verify.Options{Prod: prod, Docs: string(d)}), nil
}
