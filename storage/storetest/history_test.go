package storetest_test

import (
	"testing"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// TestFakeHistoryConforms: the fake the reviewer's unit tests use answers
// as the MySQL adapter does.
func TestFakeHistoryConforms(t *testing.T) {
	t.Parallel()
	storetest.RunAccountHistoryConformance(t, func(t *testing.T) (pipeline.AccountHistory, func(storetest.HistoryRecord)) {
		h := &storetest.History{}
		return h, h.Add
	})
}
