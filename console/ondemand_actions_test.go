package console

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/policy"
	"github.com/chatguard/chatguard/pipeline/protect"
)

// An on-demand verdict that a rule matches gets its actions through the
// workers' planner, written in its revision's transaction: each row under
// the revision's own key, source on_demand, the `on` one with its outbox
// message; a second re-review of the window acts under keys of its own.
func TestAnOnDemandVerdictWritesItsActionsWithItsRevision(t *testing.T) {
	e := newTakeEnv(t)
	ctx := testCtx(t)
	pol, err := policy.Parse([]byte(strings.Replace(policyOnDemandOnly, "SOURCES", `"on_demand"`, 1)))
	require.NoError(t, err)
	rv := &reviews{store: e.db, log: slog.New(slog.DiscardHandler), clock: e.clock, ctx: ctx,
		planner: protect.New(pol, e.db, e.clock, nil, nil)}
	ws := window.Add(-5 * time.Hour)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: "room-od-1", WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1"},
		RunID: "ondemand:m:1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
		Confidence: 0.95, Attempts: 1, PublishedAt: ws, StartedAt: ws, FinishedAt: ws.Add(time.Hour),
		Subjects: []string{"seller-od"}, OffenderRole: pipeline.RoleSeller}
	first := rv.save(context.Background(), "r1", v, pipeline.ActionSourceOnDemand)
	require.Equal(t, 1, first.Revision)
	second := rv.save(context.Background(), "r2", v, pipeline.ActionSourceOnDemand)
	require.Equal(t, 2, second.Revision)

	type row struct {
		key, action, mode, source string
		rev                       int
	}
	rows, err := e.db.DB().QueryContext(ctx, `SELECT idempotency_key, action, mode, source, verdict_revision FROM protective_actions
		WHERE room_id = 'room-od-1' ORDER BY id`)
	require.NoError(t, err)
	var got []row
	for rows.Next() {
		var r row
		require.NoError(t, rows.Scan(&r.key, &r.action, &r.mode, &r.source, &r.rev))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	// Per revision: a counterpart notice (on; the second suppressed by the
	// first's period) and an escalation (dry run).
	require.Equal(t, []row{
		{pipeline.ForwardActionKey(v.Key, 1, "od_notice", pipeline.ActionWarnCounterpart, "seller-od"), "warn_counterpart", "on", "on_demand", 1},
		{pipeline.ForwardActionKey(v.Key, 1, "od_notice", pipeline.ActionEscalate, ""), "escalate", "dry_run", "on_demand", 1},
		{pipeline.ForwardActionKey(v.Key, 2, "od_notice", pipeline.ActionEscalate, ""), "escalate", "dry_run", "on_demand", 2},
	}, got)
	var outbox int
	require.NoError(t, e.db.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE destination = ? AND event_id = ?",
		string(pipeline.OutboxActions), got[0].key).Scan(&outbox))
	require.Equal(t, 1, outbox, "the on action's message is in the outbox")
	require.NoError(t, e.db.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE destination = ?",
		string(pipeline.OutboxActions)).Scan(&outbox))
	require.Equal(t, 1, outbox, "dry-run actions send nothing")

	// A rule for other sources does not match an on-demand verdict.
	other, err := policy.Parse([]byte(strings.Replace(policyOnDemandOnly, "SOURCES", `"realtime", "batch", "sweep"`, 1)))
	require.NoError(t, err)
	rv.planner = protect.New(other, e.db, e.clock, nil, nil)
	v.Key.RoomID = "room-od-2"
	require.Equal(t, 1, rv.save(context.Background(), "r3", v, pipeline.ActionSourceOnDemand).Revision)
	var n int
	require.NoError(t, e.db.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM protective_actions WHERE room_id = 'room-od-2'").Scan(&n))
	require.Zero(t, n)
}

// policyOnDemandOnly is a policy of one rule whose sources are SOURCES.
const policyOnDemandOnly = `{"version": "t-ondemand",
 "defaults": {"locale": "ko", "suppress_notices": "24h", "action_ttl": "1h", "restrict_for": "24h", "cleared_for": "720h",
   "heavy_per_account_daily": 1, "heavy_min_campaign_rooms": 3, "heavy_min_history_rooms": 1},
 "rules": [{"id": "od_notice", "name": "On demand", "daily_cap": 100,
   "match": {"labels": ["abusive"], "sources": [SOURCES]},
   "actions": [{"action": "warn_counterpart", "mode": "on"}, {"action": "escalate", "mode": "dry_run"}]}]}`
