package moderationtest

import (
	"fmt"
	"testing"

	"github.com/chatguard/chatguard/moderation"
)

func TestMemoryTakesConformance(t *testing.T) {
	t.Parallel()
	RunTakesConformance(t, func(t *testing.T) TakesStore { return NewMemory() })
}

func TestMemoryDecisionsConformance(t *testing.T) {
	t.Parallel()
	RunDecisionsConformance(t, func(t *testing.T) DecisionsStore { return NewMemory() })
}

func TestMemoryActionLogConformance(t *testing.T) {
	t.Parallel()
	RunActionLogConformance(t, func(t *testing.T) (moderation.ActionLog, func(uint64) (moderation.AuditRecord, error)) {
		m := NewMemory()
		return m, func(id uint64) (moderation.AuditRecord, error) {
			all := m.Actions()
			if id < 1 || id > uint64(len(all)) {
				return moderation.AuditRecord{}, fmt.Errorf("no record %d", id)
			}
			return all[id-1], nil
		}
	})
}

func TestMemoryQueueConformance(t *testing.T) {
	t.Parallel()
	RunQueueConformance(t, func(t *testing.T) QueueStore { return NewMemory() })
}

func TestMemoryFeedbackOutboxConformance(t *testing.T) {
	t.Parallel()
	RunFeedbackOutboxConformance(t, func(t *testing.T) OutboxStore { return NewMemory() })
}

func TestMemoryAccountsConformance(t *testing.T) {
	t.Parallel()
	RunAccountsConformance(t, func(t *testing.T) AccountsStore { return NewMemory() })
}

func TestMemoryCampaignJoinConformance(t *testing.T) {
	t.Parallel()
	RunCampaignJoinConformance(t, func(t *testing.T) JoinsStore { return NewMemory() })
}

func TestMemoryVerdictsConformance(t *testing.T) {
	t.Parallel()
	RunVerdictsConformance(t, func(t *testing.T) moderation.Verdicts { return NewMemory() })
}

func TestMemoryTakeHistory(t *testing.T) {
	RunTakeHistoryConformance(t, func(t *testing.T) HistoryStore { return NewMemory() })
}
