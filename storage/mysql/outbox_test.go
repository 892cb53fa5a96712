package mysql_test

import (
	"testing"

	"github.com/chatguard/chatguard/storage/storetest"
)

func TestOutboxConformance(t *testing.T) {
	t.Parallel()
	storetest.RunOutboxConformance(t, func(t *testing.T) storetest.OutboxVerdictStore { return setup(t) })
}
