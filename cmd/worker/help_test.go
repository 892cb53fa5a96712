package main

import (
	"testing"

	"github.com/chatguard/chatguard/cmd/internal/cli/helptest"
)

// TestHelpIsUnchanged pins every flag's name, variable, default and text:
// moving a flag's declaration must not change what an operator sees.
func TestHelpIsUnchanged(t *testing.T) {
	helptest.CheckAll(t, run, "migrate", "purge", "stop", "eval", "eval build-set", "eval shadow", "eval plan", "actions report")
}
