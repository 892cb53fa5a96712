package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/chatguard/chatguard/cmd/internal/cli/helptest"
)

// TestHelpIsUnchanged pins every flag's name, variable, default and text:
// moving a flag's declaration must not change what an operator sees.
func TestHelpIsUnchanged(t *testing.T) {
	run := func(args []string, stdout, stderr *bytes.Buffer) int {
		return run(context.Background(), args, func(string) string { return "" }, stdout, stderr)
	}
	for _, sub := range []string{"", "migrate", "purge", "stop", "eval", "eval build-set"} {
		t.Run("cmd="+sub, func(t *testing.T) {
			if sub == "" {
				helptest.Check(t, run)
				return
			}
			helptest.Check(t, run, strings.Fields(sub)...)
		})
	}
}
