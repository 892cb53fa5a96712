package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/chatguard/chatguard/cmd/internal/cli/helptest"
)

// TestHelpIsUnchanged pins every flag's name, variable, default and text.
func TestHelpIsUnchanged(t *testing.T) {
	helptest.Check(t, func(args []string, stdout, stderr *bytes.Buffer) int {
		return run(context.Background(), args, func(string) string { return "" }, stdout, stderr)
	})
}
