package mysql

import (
	"errors"
	"regexp"
	"slices"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

// TestClosedSetsMatchTheConstraints keeps the Go lists and the database's
// CHECK constraints equal, so that a value one accepts the other does too.
func TestClosedSetsMatchTheConstraints(t *testing.T) {
	t.Parallel()
	db, _ := migrated(t)
	want := map[string][]string{
		"ck_verdicts_status":      closedSets.statuses,
		"ck_verdicts_label":       closedSets.labels,
		"ck_verdicts_action":      closedSets.actions,
		"ck_verdict_stages_stage": closedSets.stages,
		"ck_verdict_stages_pool":  closedSets.pools,
		"ck_stop_signals_outcome": {string(pipeline.StopPending), string(pipeline.StopAccepted), string(pipeline.StopRefused),
			string(pipeline.StopInvalid), string(pipeline.StopFailed)},
	}
	quoted := regexp.MustCompile(`'([^']*)'`)
	for name, values := range want {
		var clause string
		require.NoError(t, db.QueryRowContext(ctxT(t), `SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
			WHERE CONSTRAINT_SCHEMA = DATABASE() AND CONSTRAINT_NAME = ?`, name).Scan(&clause), name)
		var got []string
		for _, m := range quoted.FindAllStringSubmatch(clause, -1) {
			got = append(got, m[1])
		}
		require.ElementsMatch(t, values, got, "%s: %s", name, clause)
	}
}

// TestEveryPipelineValueIsSaved saves every status, label, action, stage
// and pool the pipeline can produce.
func TestEveryPipelineValueIsSaved(t *testing.T) {
	t.Parallel()
	_, s := migrated(t)
	ctx := ctxT(t)
	var vs []pipeline.Verdict
	for _, st := range []pipeline.Status{pipeline.StatusDone, pipeline.StatusExpired, pipeline.StatusStopped, pipeline.StatusFailed} {
		v := storetest.SampleVerdict("room-status-" + string(st))
		v.Status = st
		if st != pipeline.StatusDone {
			v.Label, v.Category, v.Action, v.Stages = "", "", "", nil
		}
		vs = append(vs, v)
	}
	for _, l := range []pipeline.Label{pipeline.LabelAbusive, pipeline.LabelSuspicious, pipeline.LabelClean} {
		v := storetest.SampleVerdict("room-label-" + string(l))
		v.Label = l
		vs = append(vs, v)
	}
	for _, a := range []pipeline.Action{pipeline.ActionNone, pipeline.ActionWarn, pipeline.ActionRestrict, pipeline.ActionBan} {
		v := storetest.SampleVerdict("room-action-" + string(a))
		v.Action = a
		vs = append(vs, v)
	}
	for _, p := range []pipeline.Pool{"", pipeline.PoolPrimary, pipeline.PoolFallback} {
		v := storetest.SampleVerdict("room-pool-" + string(p))
		for i := range v.Stages {
			v.Stages[i].Pool = p
		}
		vs = append(vs, v)
	}
	stages := storetest.SampleVerdict("x").Stages
	for _, st := range stages {
		require.Contains(t, pipeline.Stages, st.Stage, "the sample covers every stage")
	}
	require.Len(t, stages, len(pipeline.Stages))
	for _, v := range vs {
		storetest.MustSave(t, ctx, s, v)
		got, err := s.Get(ctx, v.Key)
		require.NoError(t, err)
		require.Equal(t, v.Status, got.Status)
		require.Equal(t, v.Label, got.Label)
		require.Equal(t, v.Action, got.Action)
		require.Len(t, got.Stages, len(v.Stages))
	}
}

func TestOutOfSetValuesFailTheSave(t *testing.T) {
	t.Parallel()
	_, s := migrated(t)
	tests := []struct {
		name, want string
		mut        func(*pipeline.Verdict)
	}{
		{"label", `unknown label "spam"`, func(v *pipeline.Verdict) { v.Label = "spam" }},
		{"label's case", `unknown label "Abusive"`, func(v *pipeline.Verdict) { v.Label = "Abusive" }},
		{"action", `unknown action "delete"`, func(v *pipeline.Verdict) { v.Action = "delete" }},
		{"stage", `unknown stage "rerank"`, func(v *pipeline.Verdict) { v.Stages[2].Stage = "rerank" }},
		{"pool", `stage "judge": unknown pool "local"`, func(v *pipeline.Verdict) { v.Stages[3].Pool = "local" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := storetest.SampleVerdict("room-bad-" + tc.name)
			tc.mut(&v)
			_, err := s.Save(ctxT(t), v)
			require.ErrorContains(t, err, tc.want)
			d, _ := pipeline.Classify(err)
			require.Equal(t, pipeline.GiveUp, d, "a value the schema refuses is not retried")
			_, err = s.Get(ctxT(t), v.Key)
			require.ErrorIs(t, err, pipeline.ErrVerdictNotFound, "nothing was written")
		})
	}
}

// TestConstraintsHoldWithoutTheStore writes around the store's own checks:
// the database refuses too, and the error names the constraint.
func TestConstraintsHoldWithoutTheStore(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := ctxT(t)
	v := storetest.SampleVerdict("room-ok")
	storetest.MustSave(t, ctx, s, v)
	var id uint64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT id FROM verdicts WHERE room_id = 'room-ok'").Scan(&id))
	tests := []struct{ q, constraint string }{
		{"UPDATE verdicts SET status = 'Done' WHERE id = ?", "ck_verdicts_status"},
		{"UPDATE verdicts SET label = 'spam' WHERE id = ?", "ck_verdicts_label"},
		{"UPDATE verdicts SET action = 'kick' WHERE id = ?", "ck_verdicts_action"},
		{"UPDATE verdict_stages SET stage = 'rerank' WHERE verdict_id = ? AND stage = 'vision'", "ck_verdict_stages_stage"},
		{"UPDATE verdict_stages SET pool = 'local' WHERE verdict_id = ?", "ck_verdict_stages_pool"},
		{"INSERT INTO moderator_decisions (verdict_id, moderator, decision, label, decided_at) VALUES (?, 'm', 'maybe', 'clean', NOW())", "ck_moderator_decisions_decision"},
		{"INSERT INTO moderator_decisions (verdict_id, moderator, decision, label, decided_at) VALUES (?, 'm', 'confirm', '', NOW())", "ck_moderator_decisions_label"},
	}
	for _, tc := range tests {
		_, err := db.ExecContext(ctx, tc.q, id)
		require.ErrorContains(t, err, tc.constraint, tc.q)
		var me *mysql.MySQLError
		require.True(t, errors.As(err, &me))
		require.True(t, slices.Contains([]uint16{3819, 4025}, me.Number), "CHECK failure: %v", err)
		d, _ := pipeline.Classify(classify(err))
		require.Equal(t, pipeline.GiveUp, d)
	}
	// A decision on a verdict that does not exist is refused too.
	_, err := db.ExecContext(ctx, "INSERT INTO moderator_decisions (verdict_id, moderator, decision, label, decided_at) VALUES (?, 'm', 'confirm', 'clean', NOW())", id+1000)
	require.ErrorContains(t, err, "fk_moderator_decisions_verdict")
}
