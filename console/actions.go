package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/chatguard/chatguard/moderation"
)

// Every console action is recorded in the moderation side's audit record
// (moderation.ActionLog: MySQL's moderation_actions) before it acts, and
// refused when the record cannot be written: an effect on the queue
// without its audit row is never possible, a row without an effect is (a
// refused take, a crash between the two).

// auditTimeout bounds the audit write; the action waits for it.
const auditTimeout = 5 * time.Second

// errNotAudited is what a moderator is told when an action was refused
// because its audit row could not be written.
const errNotAudited = "the action could not be recorded in the audit log, so nothing was done; try again"

// errAudit is wrapped by every error of audit: the action was not
// recorded, so it must not act.
var errAudit = errors.New("not audited")

// audit records r, at the clock's now, before its action acts, and logs
// the same line. A non-nil error (wrapping errAudit) means nothing was
// recorded: the caller must not act (answering with refuseUnaudited).
func (s *server) audit(ctx context.Context, r moderation.AuditRecord) error {
	r.At = s.clock.Now().UTC().Truncate(time.Microsecond)
	actx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	id, err := s.store.RecordAction(actx, r)
	if err != nil {
		return fmt.Errorf("console: audit %s: %w: %w", r.Action, errAudit, err)
	}
	attrs := []any{"action", string(r.Action), "moderator", r.Moderator}
	for _, a := range []struct {
		k   string
		v   any
		set bool
	}{
		{"verdict_id", r.VerdictID, r.VerdictID != 0}, {"room_id", r.RoomID, r.RoomID != ""}, {"mark", r.Mark, r.Mark != ""},
		{"decision", r.Decision, r.Decision != ""}, {"label", string(r.Label), r.Label != ""}, {"category", string(r.Category), r.Category != ""},
		{"override", r.Override, r.Override}, {"holder", r.Holder, r.Holder != ""}, {"decision_id", r.DecisionID, r.DecisionID != 0},
		{"rooms", r.Rooms, r.Rooms != 0 || r.Action == moderation.ActionBulkDecide || r.Action == moderation.ActionTakeCampaign},
		{"detail", r.Detail, r.Detail != ""},
	} {
		if a.set {
			attrs = append(attrs, a.k, a.v)
		}
	}
	s.log.Info("console: audit", append(attrs, "audit_id", id)...)
	return nil
}

// refuseUnaudited answers an action refused because audit failed.
func (s *server) refuseUnaudited(w http.ResponseWriter, r *http.Request, err error) {
	s.fail(w, r, http.StatusServiceUnavailable, errNotAudited, err)
}
