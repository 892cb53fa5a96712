package image

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// WriteLayout writes img as a new OCI image layout in dir (which must not
// hold one yet), naming it refName (org.opencontainers.image.ref.name), and
// returns the image's digest. `skopeo copy oci:DIR docker://REF` or
// `crane push DIR REF` push such a layout.
func WriteLayout(dir string, img v1.Image, refName string) (v1.Hash, error) {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image: layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": refName})); err != nil {
		return v1.Hash{}, fmt.Errorf("image: layout %s: %w", dir, err)
	}
	d, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image: layout %s: %w", dir, err)
	}
	return d, nil
}

// ReadLayout returns the only image of the OCI layout in dir, e.g. a base
// pulled with `crane pull --format=oci REF DIR`.
func ReadLayout(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image: layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image: layout %s: %w", dir, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("image: layout %s holds %d manifests; want exactly one image", dir, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("image: layout %s: %w (an index? pull one platform)", dir, err)
	}
	return img, nil
}

// WriteTarball writes img as a `docker load`-able tarball tagged ref.
func WriteTarball(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image: tarball tag: %w", err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("image: tarball %s: %w", path, err)
	}
	return nil
}

// Pull fetches the image ref for linux/arch from its registry with the
// credentials of the local Docker config (or a cloud credential helper).
func Pull(ctx context.Context, ref, arch string, opts ...remote.Option) (v1.Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image: pull %s: %w", ref, err)
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: arch})}, opts...)
	img, err := remote.Image(r, opts...)
	if err != nil {
		return nil, fmt.Errorf("image: pull %s: %w", ref, err)
	}
	return img, nil
}

// Push uploads img to its registry as ref and returns the digest reference
// (REPO@sha256:...) to pin in the Kustomize overlays and the Airflow
// variable. It stops when ctx ends.
func Push(ctx context.Context, ref string, img v1.Image, opts ...remote.Option) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("image: push %s: %w", ref, err)
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.Write(r, img, opts...); err != nil {
		return "", fmt.Errorf("image: push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("image: push %s: %w", ref, err)
	}
	return r.Context().Digest(d.String()).String(), nil
}
