package moderationtest

import (
	"fmt"
	"testing"
	"time"

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

func TestMemoryActionHistoryConformance(t *testing.T) {
	t.Parallel()
	RunActionHistoryConformance(t, func(t *testing.T) HistoryHarness {
		m := NewMemory()
		return HistoryHarness{Store: m, Seed: m.SeedAction}
	})
}

func TestMemoryTakeHistory(t *testing.T) {
	RunTakeHistoryConformance(t, func(t *testing.T) HistoryStore { return NewMemory() })
}

func TestMemoryActionControlConformance(t *testing.T) {
	t.Parallel()
	RunActionControlConformance(t, func(t *testing.T) ControlHarness {
		m := NewMemory()
		return ControlHarness{
			Store:   m,
			Seed:    m.SeedAction,
			Pending: func(key string) (bool, error) { return m.PendingAction(key), nil },
			Cleared: func(account, rule string, at time.Time) (bool, error) { return m.Cleared(account, rule, at), nil },
		}
	})
}

func TestMemoryPolicyRetractionsConformance(t *testing.T) {
	t.Parallel()
	RunPolicyRetractionsConformance(t, func(t *testing.T) RetractionsHarness {
		m := NewMemory()
		return RetractionsHarness{Store: m, Seed: m.SeedAction}
	})
}

func TestMemoryRevisedActionsConformance(t *testing.T) {
	t.Parallel()
	RunRevisedActionsConformance(t, func(t *testing.T) RevisedStore { return NewMemory() })
}
