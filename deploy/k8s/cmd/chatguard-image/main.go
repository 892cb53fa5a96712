// Command chatguard-image builds chatguard's container image without a
// container daemon (package image): it compiles the binaries from the
// repository, lays them on a base, and writes an OCI layout, a docker
// tarball, or pushes to a registry.
//
//	cd deploy/k8s && go run ./cmd/chatguard-image \
//	    --root ../.. --version v1.4.0 --revision "$(git rev-parse HEAD)" \
//	    --base gcr.io/distroless/static-debian12:nonroot@sha256:<digest> \
//	    --push registry.example.com/chatguard:v1.4.0
//
// --base REF@sha256:... pulls the base from its registry (a tag alone is
// refused); --base-layout DIR reads one
// pulled earlier (crane pull --format=oci); with neither, the base is
// image.MinimalBase, which has no CA certificates and is for tests only.
//
// Exit status: 0 on success, 1 on a failed build or push, 2 on bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/chatguard/chatguard/deploy/k8s/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	root, binDir, arch     string
	stamp                  image.Stamp
	base, baseLayout       string
	layoutDir, tarballPath string
	push, tag              string
	sbom                   string
	created                int64
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("chatguard-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.root, "root", "../..", "the chatguard repository (the Go module with cmd/)")
	fs.StringVar(&o.binDir, "bin-dir", "", "use binaries already built here (by the same flags) instead of building them")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "target architecture (linux/ARCH)")
	fs.StringVar(&o.stamp.Version, "version", "", "release version stamped into the binaries and labels (required)")
	fs.StringVar(&o.stamp.Revision, "revision", "", "source revision, e.g. git rev-parse HEAD (required)")
	fs.StringVar(&o.base, "base", "", "base image to pull, pinned by digest: gcr.io/distroless/static-debian12:nonroot@sha256:...")
	fs.StringVar(&o.baseLayout, "base-layout", "", "OCI layout holding the base image (crane pull --format=oci)")
	fs.StringVar(&o.layoutDir, "layout", "", "write the image as an OCI layout into this new directory")
	fs.StringVar(&o.tarballPath, "tarball", "", "write the image as a docker-load tarball to this file (needs --tag)")
	fs.StringVar(&o.push, "push", "", "push the image to this reference (REGISTRY/REPO:TAG)")
	fs.StringVar(&o.sbom, "sbom", "", "write the image's SBOM (CycloneDX JSON: each binary's Go modules) to this file")
	fs.StringVar(&o.tag, "tag", "chatguard:dev", "reference name recorded in the layout and the tarball")
	fs.Int64Var(&o.created, "created", envInt("SOURCE_DATE_EPOCH"), "creation time, Unix seconds (default $SOURCE_DATE_EPOCH, else 0) for a reproducible digest")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var errs []error
	if err := o.stamp.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.base != "" && o.baseLayout != "" {
		errs = append(errs, errors.New("--base and --base-layout exclude each other"))
	}
	if o.base != "" && !strings.Contains(o.base, "@sha256:") {
		errs = append(errs, fmt.Errorf("--base %q: pin the base by digest (REF@sha256:...), a tag can change under the same name", o.base))
	}
	if o.layoutDir == "" && o.tarballPath == "" && o.push == "" {
		errs = append(errs, errors.New("say where the image goes: --layout, --tarball or --push"))
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(stderr, "chatguard-image: %v\n", err)
		return 2
	}
	if err := build(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "chatguard-image: %v\n", err)
		return 1
	}
	return 0
}

func build(ctx context.Context, o options, stdout, stderr io.Writer) error {
	created := time.Unix(o.created, 0).UTC()
	binDir := o.binDir
	if binDir == "" {
		tmp, err := os.MkdirTemp("", "chatguard-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		fmt.Fprintf(stderr, "building %v for linux/%s\n", image.Binaries, o.arch)
		if err := image.BuildBinaries(ctx, o.root, tmp, o.arch, o.stamp); err != nil {
			return err
		}
		binDir = tmp
	}
	var base v1.Image
	var err error
	switch {
	case o.base != "":
		base, err = image.Pull(ctx, o.base, o.arch)
	case o.baseLayout != "":
		base, err = image.ReadLayout(o.baseLayout)
	default:
		fmt.Fprintln(stderr, "warning: no --base: using the minimal test base (no CA certificates)")
		base, err = image.MinimalBase(o.arch, created)
	}
	if err != nil {
		return err
	}
	img, err := image.Assemble(base, binDir, o.stamp, created)
	if err != nil {
		return err
	}
	if o.sbom != "" {
		b, err := image.SBOM(binDir, o.stamp)
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.sbom, b, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "sbom %s\n", o.sbom)
	}
	if o.layoutDir != "" {
		d, err := image.WriteLayout(o.layoutDir, img, o.tag)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "oci layout %s: %s\n", o.layoutDir, d)
	}
	if o.tarballPath != "" {
		if err := image.WriteTarball(o.tarballPath, o.tag, img); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "tarball %s: %s\n", o.tarballPath, o.tag)
	}
	if o.push != "" {
		ref, err := image.Push(ctx, o.push, img)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pushed %s\n", ref)
	}
	return nil
}

func envInt(key string) int64 {
	n, _ := strconv.ParseInt(os.Getenv(key), 10, 64)
	return n
}
