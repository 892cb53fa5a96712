// Package image builds chatguard's container image without a container
// daemon: it compiles the three binaries the way the Dockerfile does (static,
// -trimpath, version and revision stamped) and lays them on a base image with
// go-containerregistry, producing an OCI image that can be written as an OCI
// layout, saved as a tarball for `docker load`, or pushed to a registry.
//
// The image is the Dockerfile's: /batch, /worker and /consumer owned by root
// and not writable, user 65532:65532, entrypoint /worker, no shell. The base
// is gcr.io/distroless/static (see the Dockerfile) in production; where no
// registry can be reached, MinimalBase is a scratch filesystem with just the
// passwd and group entries of the nonroot user and a /tmp, which is what the
// tests use. MinimalBase has no CA certificates: an image built on it cannot
// call AWS over TLS, so it is for tests only.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed shape; the Dockerfile at the repository root must agree
// (the tests compare them).
const (
	// User is the numeric user and group every process runs as: distroless'
	// "nonroot".
	User = "65532:65532"
	// UID is User's user id.
	UID = 65532
	// VersionVar and RevisionVar are the linker symbols of
	// internal/buildinfo that -X stamps.
	VersionVar  = "github.com/chatguard/chatguard/internal/buildinfo.version"
	RevisionVar = "github.com/chatguard/chatguard/internal/buildinfo.revision"
	// Source is the org.opencontainers.image.source label.
	Source = "https://github.com/chatguard/chatguard"
)

// Binaries are the commands in the image, each at /<name>, built from
// ./cmd/<name>.
var Binaries = []string{"batch", "worker", "consumer", "console", "trigger"}

// Entrypoint is the image's default command; pods name theirs explicitly.
var Entrypoint = []string{"/worker"}

// Stamp is what the linker writes into internal/buildinfo.
type Stamp struct {
	Version  string // e.g. v1.4.0
	Revision string // e.g. the git commit
}

// Validate reports a stamp that would make the image unidentifiable.
func (s Stamp) Validate() error {
	var errs []error
	if strings.TrimSpace(s.Version) == "" || strings.ContainsAny(s.Version, " \t\n'\"") {
		errs = append(errs, fmt.Errorf("version %q must be a non-empty word", s.Version))
	}
	if strings.TrimSpace(s.Revision) == "" || strings.ContainsAny(s.Revision, " \t\n'\"") {
		errs = append(errs, fmt.Errorf("revision %q must be a non-empty word", s.Revision))
	}
	return errors.Join(errs...)
}

// LDFlags returns the linker flags of a release build: symbols and DWARF
// stripped (smaller image; profiles still symbolise from the Go runtime's
// own tables), version and revision stamped.
func (s Stamp) LDFlags() string {
	return fmt.Sprintf("-s -w -X %s=%s -X %s=%s", VersionVar, s.Version, RevisionVar, s.Revision)
}

// BuildBinaries compiles Binaries from the Go module at root into dir for
// linux/arch, with the Dockerfile's flags: CGO_ENABLED=0 (static), -trimpath,
// -buildvcs=false and GOWORK=off (the product is built from its own go.mod
// alone, never with the versions a workspace would pick). It returns the go
// command's output with the error when the build fails, and stops the build
// when ctx ends.
func BuildBinaries(ctx context.Context, root, dir, arch string, s Stamp) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", s.LDFlags(), "-o", dir + string(filepath.Separator)}
	for _, b := range Binaries {
		args = append(args, "./cmd/"+b)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOOS=linux", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("image: go build: %w\n%s", err, out)
	}
	return nil
}

// MinimalBase is a scratch base for places without a registry (tests): the
// passwd and group entries of root and of the nonroot user 65532, its home,
// and a world-writable sticky /tmp. It has no shell, no CA certificates and
// no time zones; production images use distroless static instead.
func MinimalBase(arch string, created time.Time) (v1.Image, error) {
	files := []tarEntry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, body: "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
		{name: "etc/group", mode: 0o644, body: "root:x:0:\nnonroot:x:65532:\n"},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: UID, gid: UID},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	layer, err := tarLayer(files, created)
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "chatguard image.MinimalBase: /etc/passwd, /etc/group, /home/nonroot, /tmp", Comment: "test base"},
	})
	if err != nil {
		return nil, fmt.Errorf("image: minimal base: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: minimal base: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	return mutate.ConfigFile(mutate.ConfigMediaType(img, types.OCIConfigJSON), cf)
}

// Assemble lays the binaries found in binDir (named as in Binaries) on base
// as one layer, and sets the user, the entrypoint and the OCI labels. created
// is the image's creation time: pass a fixed one (the commit time) for a
// reproducible digest.
func Assemble(base v1.Image, binDir string, s Stamp, created time.Time) (v1.Image, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	var files []tarEntry
	for _, b := range Binaries {
		body, err := os.ReadFile(filepath.Join(binDir, b))
		if err != nil {
			return nil, fmt.Errorf("image: %w", err)
		}
		// Owned by root and read-only: the process (65532) cannot replace
		// its own binary even where the root filesystem is writable.
		files = append(files, tarEntry{name: b, mode: 0o555, body: string(body)})
	}
	layer, err := tarLayer(files, created)
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "chatguard image.Assemble: /" + strings.Join(Binaries, " /")},
	})
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.Config.User = User
	cf.Config.Entrypoint = append([]string(nil), Entrypoint...)
	cf.Config.Cmd = nil
	cf.Config.WorkingDir = "/"
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	for k, v := range Labels(s) {
		cf.Config.Labels[k] = v
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return mutate.Annotations(img, Labels(s)).(v1.Image), nil
}

// Labels are the OCI labels (and manifest annotations) of an image.
func Labels(s Stamp) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "chatguard",
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.revision": s.Revision,
		"org.opencontainers.image.source":   Source,
	}
}

type tarEntry struct {
	name     string
	mode     int64
	dir      bool
	uid, gid int
	body     string
}

// tarLayer builds a gzip-compressed OCI layer from entries, in order, with
// fixed times and owners so that the same input gives the same digest.
func tarLayer(entries []tarEntry, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: created, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: layer %s: %w", e.name, err)
		}
		if !e.dir {
			if _, err := io.WriteString(tw, e.body); err != nil {
				return nil, fmt.Errorf("image: layer %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return layer, nil
}
