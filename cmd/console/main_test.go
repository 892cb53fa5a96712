package main

import (
	"testing"

	"github.com/chatguard/chatguard/internal/standin"
)

// TestMain removes the stand-ins (model simulators, chat API) built for
// the tests.
func TestMain(m *testing.M) { standin.Main(m) }
