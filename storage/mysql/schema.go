package mysql

import (
	"errors"
	"fmt"
	"slices"

	"github.com/chatguard/chatguard/pipeline"
)

// closedSets are the values the schema's CHECK constraints accept
// (migrations/sql/00004_closed_sets.sql), checked here too so that an
// unknown value fails the save before any round trip, with the field named.
// "" is the store's "not applicable" (no label on a failed verdict, no pool
// when no pool answered a stage). A test compares these lists with the
// constraints in the database and with pipeline's constants.
var closedSets = struct {
	statuses, labels, actions, stages, pools []string
}{
	statuses: []string{string(pipeline.StatusDone), string(pipeline.StatusExpired), string(pipeline.StatusStopped), string(pipeline.StatusFailed)},
	labels:   []string{"", string(pipeline.LabelAbusive), string(pipeline.LabelSuspicious), string(pipeline.LabelClean)},
	actions:  []string{"", string(pipeline.ActionNone), string(pipeline.ActionWarn), string(pipeline.ActionRestrict), string(pipeline.ActionBan)},
	stages:   []string{string(pipeline.StageTriage), string(pipeline.StageExtract), string(pipeline.StageVision), string(pipeline.StageJudge)},
	pools:    []string{"", string(pipeline.PoolPrimary), string(pipeline.PoolFallback)},
}

// checkClosedSets reports every label, action, stage or pool of v outside
// the schema's closed sets (the status is checked by checkVerdict).
func checkClosedSets(v pipeline.Verdict) error {
	var errs []error
	if !slices.Contains(closedSets.labels, string(v.Label)) {
		errs = append(errs, fmt.Errorf("unknown label %q", v.Label))
	}
	if !slices.Contains(closedSets.actions, string(v.Action)) {
		errs = append(errs, fmt.Errorf("unknown action %q", v.Action))
	}
	for _, st := range v.Stages {
		if st.Stage != "" && !slices.Contains(closedSets.stages, string(st.Stage)) {
			errs = append(errs, fmt.Errorf("unknown stage %q", st.Stage))
		}
		if !slices.Contains(closedSets.pools, string(st.Pool)) {
			errs = append(errs, fmt.Errorf("stage %q: unknown pool %q", st.Stage, st.Pool))
		}
	}
	return errors.Join(errs...)
}
