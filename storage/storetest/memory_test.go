package storetest

import (
	"testing"

	"github.com/chatguard/chatguard/pipeline"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	RunVerdictStoreConformance(t, func(t *testing.T) pipeline.VerdictStore { return NewMemory() })
}

func TestMemoryOutboxConformance(t *testing.T) {
	t.Parallel()
	RunOutboxConformance(t, func(t *testing.T) OutboxVerdictStore { return NewMemory() })
}
