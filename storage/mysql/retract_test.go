package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/moderation/moderationtest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// A new policy file that removes a rule (or takes an action off `on`)
// reverses the live actions it took, audited first under the policy's
// actor, bounded per run; the hash is recorded once nothing is left, and
// a start on a recorded hash does nothing.
func TestAPolicyChangeRetractsTheLiveActionsOfItsRemovedRules(t *testing.T) {
	db, s := setupDB(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	seed := func(room, acct, rule string, kind pipeline.ActionKind, mode pipeline.ActionMode, at time.Time) pipeline.ActionRecord {
		r := moderationtest.SeedAction(room, acct, rule, kind, mode, at)
		v := pipeline.Verdict{Key: r.Key, RunID: "run", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment,
			Severity: 4, Attempts: 1, PublishedAt: at, StartedAt: at, FinishedAt: at, Subjects: []string{acct}, OffenderRole: pipeline.RoleSeller,
			Actions: []pipeline.ActionRecord{r}}
		storetest.MustSave(t, ctx, s, v)
		return r
	}
	kept := seed("room-r1", "s1", "notice", pipeline.ActionWarnCounterpart, pipeline.ModeOn, now.Add(-time.Hour))
	gone1 := seed("room-r2", "s2", "heavy", pipeline.ActionRestrictSender, pipeline.ModeOn, now.Add(-2*time.Hour))
	gone2 := seed("room-r3", "s3", "notice", pipeline.ActionWarnSender, pipeline.ModeOn, now.Add(-time.Hour))
	dry := seed("room-r4", "s4", "heavy", pipeline.ActionHoldTransaction, pipeline.ModeDryRun, now.Add(-time.Hour))
	old := seed("room-r5", "s5", "heavy", pipeline.ActionRestrictSender, pipeline.ModeOn, now.Add(-40*24*time.Hour))

	// The new file keeps notice's warn_counterpart on; heavy is gone and
	// notice's warn_sender is dry run now.
	view := moderation.PolicyView{Version: "v2", Hash: "h2", On: []moderation.RuleAction{{Rule: "notice", Action: pipeline.ActionWarnCounterpart}}}
	r := moderation.Retraction{Limit: 1, Lookback: 30 * 24 * time.Hour, TTL: time.Hour}
	res, err := moderation.RetractPolicy(ctx, s, view, r, now)
	require.NoError(t, err)
	require.Equal(t, moderation.RetractResult{Retracted: 1, More: true}, res, "bounded: the oldest first")
	applied, err := s.PolicyApplied(ctx, "h2")
	require.NoError(t, err)
	require.False(t, applied, "cut short, the hash is not recorded")

	r.Limit = 10
	res, err = moderation.RetractPolicy(ctx, s, view, r, now)
	require.NoError(t, err)
	require.Equal(t, moderation.RetractResult{Retracted: 1}, res)
	res, err = moderation.RetractPolicy(ctx, s, view, r, now)
	require.NoError(t, err)
	require.Equal(t, moderation.RetractResult{Skipped: true}, res, "a recorded hash has nothing to retract")

	state := func(key string) string {
		var st string
		require.NoError(t, db.QueryRowContext(ctx, "SELECT state FROM protective_actions WHERE idempotency_key = ?", key).Scan(&st))
		return st
	}
	require.Equal(t, "written", state(kept.IdempotencyKey))
	require.Equal(t, "reversed", state(gone1.IdempotencyKey))
	require.Equal(t, "reversed", state(gone2.IdempotencyKey))
	require.Equal(t, "written", state(dry.IdempotencyKey), "a dry run sent nothing to retract")
	require.Equal(t, "written", state(old.IdempotencyKey), "past the lookback")
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM protective_actions p JOIN outbox o ON o.event_id = p.idempotency_key
		WHERE p.source = 'policy' AND ((p.action = 'lift_restriction' AND p.reverses = ?) OR (p.action = 'retract_notice' AND p.reverses = ?))`,
		gone1.IdempotencyKey, gone2.IdempotencyKey).Scan(&n))
	require.Equal(t, 2, n, "each reversal with its outbox message, source policy")
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM moderation_actions WHERE action = 'reverse_action' AND moderator = 'policy:v2'
		AND detail LIKE CONCAT('key ', ?, '%')`, gone1.IdempotencyKey).Scan(&n))
	require.Equal(t, 1, n, "audited under the policy's actor")
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM action_clearances").Scan(&n))
	require.Zero(t, n, "the rule was wrong, not the account: nothing cleared")
}
