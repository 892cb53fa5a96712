package k8s_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/k8s/image"
	"github.com/chatguard/chatguard/deploy/k8s/manifest"
)

// created is a fixed creation time, so that digests are reproducible.
var created = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func buildImage(t *testing.T) v1.Image {
	t.Helper()
	base, err := image.MinimalBase(runtime.GOARCH, created)
	require.NoError(t, err)
	img, err := image.Assemble(base, binaries(t), stamp, created)
	require.NoError(t, err)
	return img
}

// fileInImage is one regular file or directory of the flattened image.
type fileInImage struct {
	hdr  *tar.Header
	body []byte
}

func flatten(t *testing.T, img v1.Image) map[string]fileInImage {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]fileInImage{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		out[path.Clean("/"+h.Name)] = fileInImage{hdr: h, body: body}
	}
	return out
}

// TestImage builds the image as the tests' daemonless builder does, writes
// it as an OCI layout, reads it back, unpacks it and checks what a pod will
// run: the entrypoint, the user, static binaries that start.
func TestImage(t *testing.T) {
	t.Parallel()
	img := buildImage(t)

	dir := filepath.Join(t.TempDir(), "layout")
	digest, err := image.WriteLayout(dir, img, "chatguard:"+stamp.Version)
	require.NoError(t, err)
	back, err := image.ReadLayout(dir)
	require.NoError(t, err)
	backDigest, err := back.Digest()
	require.NoError(t, err)
	require.Equal(t, digest, backDigest, "the layout must hold the image that was built")

	cf, err := back.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "65532:65532", cf.Config.User)
	require.Equal(t, []string{"/worker"}, cf.Config.Entrypoint)
	require.Empty(t, cf.Config.Cmd)
	require.Equal(t, "linux", cf.OS)
	require.Equal(t, runtime.GOARCH, cf.Architecture)
	require.Equal(t, stamp.Version, cf.Config.Labels["org.opencontainers.image.version"])
	require.Equal(t, stamp.Revision, cf.Config.Labels["org.opencontainers.image.revision"])
	m, err := back.Manifest()
	require.NoError(t, err)
	require.Equal(t, stamp.Revision, m.Annotations["org.opencontainers.image.revision"])

	files := flatten(t, back)
	passwd := string(files["/etc/passwd"].body)
	require.Regexp(t, regexp.MustCompile(`(?m)^nonroot:x:65532:65532:`), passwd, "user 65532 must have a passwd entry")
	for _, shell := range []string{"/bin/sh", "/bin/bash", "/bin/ash", "/bin/busybox", "/usr/bin/sh"} {
		require.NotContains(t, files, shell, "the image must have no shell")
	}

	// Not t.TempDir: its parent is private to the user running the tests,
	// and the binaries run as 65532.
	run, err := os.MkdirTemp("", "chatguard-image-run-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(run) })
	require.NoError(t, os.Chmod(run, 0o755))
	var compressed int64
	layers, err := back.Layers()
	require.NoError(t, err)
	for _, l := range layers {
		n, err := l.Size()
		require.NoError(t, err)
		compressed += n
	}
	var uncompressed int64
	for _, b := range image.Binaries {
		f, ok := files["/"+b]
		require.True(t, ok, "/%s missing from the image", b)
		require.Equal(t, byte(tar.TypeReg), f.hdr.Typeflag)
		require.Equal(t, int64(0o555), f.hdr.Mode&0o7777, "/%s must be read-only and executable by all", b)
		require.Zero(t, f.hdr.Uid, "/%s must belong to root, not to the user that runs it", b)
		uncompressed += int64(len(f.body))
		requireStatic(t, b, f.body)

		p := filepath.Join(run, b)
		require.NoError(t, os.WriteFile(p, f.body, 0o555))
		out, err := asNonroot(exec.Command(p, "--help")).CombinedOutput()
		require.NoError(t, err, "/%s --help: %s", b, out)
		require.Contains(t, string(out), "Usage: "+b)
		out, err = asNonroot(exec.Command(p, "--version")).CombinedOutput()
		require.NoError(t, err, "/%s --version: %s", b, out)
		require.Equal(t, b+" version "+stamp.Version+", revision "+stamp.Revision+", "+runtime.Version()+"\n", string(out))
	}
	t.Logf("image %s: %d layers, %.1f MiB compressed, binaries %.1f MiB", digest, len(layers), float64(compressed)/(1<<20), float64(uncompressed)/(1<<20))
}

// requireStatic fails unless the ELF binary needs no dynamic loader: no
// PT_INTERP and no dynamic section, so the distroless static base (no libc)
// can run it.
func requireStatic(t *testing.T, name string, body []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(body))
	require.NoError(t, err, "%s is not an ELF binary", name)
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "%s asks for a dynamic loader", name)
		require.NotEqual(t, elf.PT_DYNAMIC, p.Type, "%s has a dynamic segment", name)
	}
	require.Nil(t, f.Section(".dynamic"), "%s has a .dynamic section", name)
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	require.Empty(t, libs, "%s links shared libraries", name)
}

// asNonroot runs cmd as the image's user when the tests run as root, as a
// pod would; otherwise as the current user.
func asNonroot(cmd *exec.Cmd) *exec.Cmd {
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: image.UID, Gid: image.UID}}
	}
	cmd.Env = []string{"HOME=/home/nonroot"}
	return cmd
}

// TestImageIsReproducible: the same binaries and stamp give the same digest,
// so a rebuild of a release can be checked against what runs.
func TestImageIsReproducible(t *testing.T) {
	t.Parallel()
	a, err := buildImage(t).Digest()
	require.NoError(t, err)
	b, err := buildImage(t).Digest()
	require.NoError(t, err)
	require.Equal(t, a, b)
}

// TestImagePushAndTarball sends the image to an in-process registry and to
// a docker tarball, and reads both back.
func TestImagePushAndTarball(t *testing.T) {
	t.Parallel()
	img := buildImage(t)
	want, err := img.Digest()
	require.NoError(t, err)

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pinned, err := image.Push(ctx, host+"/chatguard:"+stamp.Version, img)
	require.NoError(t, err)
	require.Equal(t, host+"/chatguard@"+want.String(), pinned)
	pulled, err := image.Pull(ctx, pinned, runtime.GOARCH)
	require.NoError(t, err)
	got, err := pulled.Digest()
	require.NoError(t, err)
	require.Equal(t, want, got)

	tb := filepath.Join(t.TempDir(), "chatguard.tar")
	require.NoError(t, image.WriteTarball(tb, "registry.example.com/chatguard:"+stamp.Version, img))
	tag, err := name.NewTag("registry.example.com/chatguard:" + stamp.Version)
	require.NoError(t, err)
	loaded, err := tarball.ImageFromPath(tb, &tag)
	require.NoError(t, err)
	cf, err := loaded.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, image.User, cf.Config.User)
}

// TestDockerfileMatchesTheBuilder keeps the Dockerfile (what production
// builds) and package image (what the tests build) describing one image.
func TestDockerfileMatchesTheBuilder(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	df := string(b)
	for _, want := range []string{
		"CGO_ENABLED=0", "GOWORK=off", "go build -trimpath",
		"-X " + image.VersionVar + "=${VERSION}",
		"-X " + image.RevisionVar + "=${REVISION}",
		"-s -w",
		"gcr.io/distroless/static",
		"\nUSER " + image.User + "\n",
		`ENTRYPOINT ["` + strings.Join(image.Entrypoint, `", "`) + `"]`,
		"--chmod=0555",
		"--chown=0:0",
		"org.opencontainers.image.source=\"" + image.Source + "\"",
	} {
		require.Contains(t, df, want, "the Dockerfile lost %q", want)
	}
	for _, b := range image.Binaries {
		require.Contains(t, df, "./cmd/"+b, "the Dockerfile does not build %s", b)
		require.Contains(t, df, "/out/"+b, "the Dockerfile does not copy %s", b)
	}
	require.NotRegexp(t, `(?m)^FROM .*:latest`, df)
}

// TestSBOMListsTheModules: the SBOM written beside the daemonless image
// names each binary and every Go module it was linked from, as the
// binary's own build information records them.
func TestSBOMListsTheModules(t *testing.T) {
	t.Parallel()
	dir := binaries(t)
	b, err := image.SBOM(dir, stamp)
	require.NoError(t, err)
	var bom image.CycloneDX
	require.NoError(t, manifest.DecodeStrict(b, &bom), "the SBOM is exactly the CycloneDX fields written")
	require.Equal(t, "CycloneDX", bom.BOMFormat)
	require.Equal(t, "1.5", bom.SpecVersion)
	require.Equal(t, stamp.Version, bom.Metadata.Component.Version)
	purls := map[string]bool{}
	for _, c := range bom.Components {
		if c.Type == "library" {
			require.Equal(t, "pkg:golang/"+c.Name+"@"+c.Version, c.PURL)
			purls[c.PURL] = true
		}
	}
	deps := map[string][]string{}
	for _, d := range bom.Dependencies {
		deps[d.Ref] = d.DependsOn
	}
	require.Len(t, deps["chatguard"], len(image.Binaries))
	for _, name := range image.Binaries {
		bi, err := buildinfo.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NotEmpty(t, bi.Deps, name)
		require.Len(t, deps["binary:"+name], len(bi.Deps), name)
		for _, m := range bi.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			purl := "pkg:golang/" + m.Path + "@" + m.Version
			require.True(t, purls[purl], "%s links %s, missing from the SBOM", name, purl)
			require.Contains(t, deps["binary:"+name], purl)
		}
	}
	// The worker talks to MySQL: its driver is listed.
	found := false
	for p := range purls {
		found = found || strings.HasPrefix(p, "pkg:golang/github.com/go-sql-driver/mysql@")
	}
	require.True(t, found, "the MySQL driver is missing from the SBOM")
	again, err := image.SBOM(dir, stamp)
	require.NoError(t, err)
	require.Equal(t, b, again, "the same binaries give the same SBOM")
}
