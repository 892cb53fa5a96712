// Package golden keeps generated test files in step with their
// generators: a test regenerates a checked-in file's content and either
// compares it with the file or, when asked to update, rewrites it. A
// generator that changed without its file fails the test, so the corpora a
// suite reads are the ones its code describes.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Check compares got with the file at path, failing t with the command
// that rewrites it; with update it writes got to path instead (creating its
// directory).
func Check(t testing.TB, path string, got []byte, update bool, rewrite string) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("golden: %v", err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("golden: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden: %v (generate it with: %s)", err, rewrite)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("golden: %s differs from what its generator writes now; rewrite it with: %s", path, rewrite)
	}
}
