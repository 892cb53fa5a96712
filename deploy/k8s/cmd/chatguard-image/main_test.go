package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/k8s/image"
)

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"no version":          {"--revision", "abc", "--layout", "x"},
		"no destination":      {"--version", "v1", "--revision", "abc"},
		"two bases":           {"--version", "v1", "--revision", "abc", "--layout", "x", "--base", "a", "--base-layout", "b"},
		"stray argument":      {"--version", "v1", "--revision", "abc", "--layout", "x", "extra"},
		"unknown flag":        {"--nope"},
		"version with spaces": {"--version", "v 1", "--revision", "abc", "--layout", "x"},
		"base by tag":         {"--version", "v1", "--revision", "abc", "--layout", "x", "--base", "gcr.io/distroless/static-debian12:nonroot"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			require.Equal(t, 2, run(context.Background(), args, &stdout, &stderr), stderr.String())
			require.NotEmpty(t, stderr.String())
		})
	}
}

// TestLayoutAndTarballFromBuiltBinaries runs the command on binaries already
// built (stand-in files: the builder only copies them) and reads the layout
// back.
func TestLayoutAndTarballFromBuiltBinaries(t *testing.T) {
	t.Parallel()
	bins := t.TempDir()
	for _, b := range image.Binaries {
		require.NoError(t, os.WriteFile(filepath.Join(bins, b), []byte("#!"+b), 0o755))
	}
	out := t.TempDir()
	layout, tb := filepath.Join(out, "layout"), filepath.Join(out, "image.tar")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{
		"--bin-dir", bins, "--version", "v1.2.3", "--revision", "abc", "--created", "1700000000",
		"--layout", layout, "--tarball", tb, "--tag", "registry.example.com/chatguard:v1.2.3",
	}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.Contains(t, stderr.String(), "minimal test base")
	require.True(t, strings.HasPrefix(stdout.String(), "oci layout "+layout+": sha256:"), stdout.String())
	img, err := image.ReadLayout(layout)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "v1.2.3", cf.Config.Labels["org.opencontainers.image.version"])
	require.Equal(t, int64(1700000000), cf.Created.Unix())
	st, err := os.Stat(tb)
	require.NoError(t, err)
	require.Positive(t, st.Size())

	// A missing binary fails the build.
	require.NoError(t, os.Remove(filepath.Join(bins, "worker")))
	require.Equal(t, 1, run(context.Background(), []string{"--bin-dir", bins, "--version", "v1", "--revision", "a", "--layout", filepath.Join(out, "l2")}, &stdout, &stderr))
}
