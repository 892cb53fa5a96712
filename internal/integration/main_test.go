package integration_test

import (
	"testing"

	"github.com/chatguard/chatguard/internal/standin"
)

// TestMain removes the stand-ins built for the tests (standin.Build).
func TestMain(m *testing.M) { standin.Main(m) }
