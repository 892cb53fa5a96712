package storetest_test

import (
	"testing"

	"github.com/chatguard/chatguard/storage/storetest"
)

func TestMemoryActionStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.RunActionStoreConformance(t, func(*testing.T) storetest.ActionOutboxStore { return storetest.NewMemory() })
}
