//go:build race

package e2e

// raceEnabled: the binaries under test are built with -race too, which
// also reuses the test build's cache.
const raceEnabled = true
