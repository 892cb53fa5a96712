package console

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// decidedVerdict is what recording a decision needs of its verdict: the
// row id, the key and what the pipeline said (the feedback event carries
// both sides).
type decidedVerdict struct {
	ID       uint64
	Key      pipeline.ReviewKey
	Label    pipeline.Label
	Category pipeline.Category
	Action   pipeline.Action
}

// pendingDecision is one decision to record: D on Verdict. Audited is
// true when the caller has recorded its decide audit row already (a single
// item's decision is audited before its take); record audits the others
// before it saves them.
type pendingDecision struct {
	Verdict decidedVerdict
	D       moderation.Decision
	Audited bool
}

// decideRecord is the audit record of decision d on verdict id in room.
func decideRecord(who Who, id uint64, room string, d moderation.Decision) moderation.AuditRecord {
	return moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionDecide, VerdictID: id, RoomID: room,
		Decision: d.Decision, Label: d.Label, Category: d.Category}
}

// recorded is what record did.
type recorded struct {
	// Decisions are the rows saved, with their ids, in the order given.
	Decisions []moderation.Decision
	// Queued counts the saved decisions whose feedback event SQS did not
	// accept now: the outbox sweeper resends them.
	Queued int
}

// record is the one path by which the console records decisions, a single
// item's or a campaign's bulk: for each, its "decide" audit row (unless
// the caller wrote it), then the decision row (the queue's state, and the
// outbox of its moderator_feedback event), and the take released; then the events of every saved row
// in one send to the feedback queue (the lake), and feedback_sent_at on
// the rows SQS accepted. A send that fails leaves its rows unmarked and the
// outbox sweeper resends them with the event id derived from the row id,
// so the lake keeps one of each. The caller has claimed the items (and
// audited any override).
//
// It stops at the first row it cannot audit or save and returns that error
// (wrapping errAudit when the audit row could not be written; a
// *pipeline.PermanentError for an invalid decision) with what it saved
// before: those rows are committed and their events still sent.
func (s *server) record(ctx context.Context, who Who, items []pendingDecision) (recorded, error) {
	var (
		res     recorded
		events  []pipeline.OutMessage
		ids     []uint64
		saveErr error
	)
	for _, it := range items {
		d := it.D
		// Decided here, not by the form: whatever page the decision came
		// from, a sampled clean verdict's decision is an audit decision
		// (only done verdicts carry a label).
		d.Audit = it.Verdict.Label == pipeline.LabelClean &&
			moderation.IsAuditItem(it.Verdict.Key, pipeline.StatusDone, it.Verdict.Label, s.cfg.AuditShare)
		if !it.Audited {
			if err := s.audit(ctx, decideRecord(who, it.Verdict.ID, it.Verdict.Key.RoomID, d)); err != nil {
				saveErr = err
				break
			}
		}
		id, err := s.store.AddDecision(ctx, d)
		if err != nil {
			saveErr = err
			break
		}
		d.ID = id
		v := it.Verdict
		if d.Decision == moderation.DecisionOverturn {
			s.reverseActions(ctx, v.Key, d)
		}
		s.log.Info("console: decided", "moderator", who.ID, "decision", d.Decision, "verdict_id", v.ID,
			"decision_id", id, "room_id", v.Key.RoomID, "label", d.Label, "category", d.Category, "audit", d.Audit)
		// Decided, the item leaves the queue: its take ends with it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if _, err := s.store.ReleaseItem(rctx, v.ID, who.ID); err != nil {
			s.log.Warn("console: decided but the take not released; it goes stale after --take-timeout", "verdict_id", v.ID, "err", err)
		}
		cancel()
		res.Decisions = append(res.Decisions, d)
		events = append(events, pipeline.OutMessage{Body: feedbackBody(feedbackEvent(d, v.Key, v.Label, v.Category, v.Action))})
		ids = append(ids, id)
	}
	if len(events) == 0 {
		return res, saveErr
	}
	res.Queued = s.deliverFeedback(ctx, ids, events)
	return res, saveErr
}

// deliverFeedback sends the events of the saved decision rows ids (one
// each, in order), marks the rows SQS accepted and returns how many it did
// not: the outbox sweeper resends those.
func (s *server) deliverFeedback(ctx context.Context, ids []uint64, events []pipeline.OutMessage) int {
	sent := s.sendFeedback(ctx, ids, events)
	if len(sent) > 0 {
		// Detached: SQS holds the events whether or not the moderator waits.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.store.MarkFeedbackSent(mctx, s.clock.Now(), sent...); err != nil {
			s.log.Warn("console: feedback sent but not marked; the sweeper resends it with the same event id", "decision_ids", sent, "err", err)
		}
	}
	return len(ids) - len(sent)
}

// sendFeedback sends the events of decision rows ids (one each, in order)
// and returns the ids whose event SQS accepted.
func (s *server) sendFeedback(ctx context.Context, ids []uint64, events []pipeline.OutMessage) []uint64 {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := s.feedback.Send(sctx, events)
	var be *pipeline.BatchError
	if err != nil && !(errors.As(err, &be) && len(be.Errs) == len(ids)) {
		be = &pipeline.BatchError{Errs: make([]error, len(ids))}
		for i := range be.Errs {
			be.Errs[i] = err
		}
	}
	var sent []uint64
	for i, id := range ids {
		if be != nil && be.Errs[i] != nil {
			s.count("failed")
			s.log.Warn("console: feedback event not sent; the outbox sweeper resends it", "decision_id", id,
				"event_id", feedbackEventID(id), "err", fmt.Errorf("send feedback: %w", be.Errs[i]))
			continue
		}
		s.count("sent")
		sent = append(sent, id)
	}
	return sent
}

// count counts one request-path feedback send by outcome (sent, failed).
func (s *server) count(outcome string) {
	if s.fbm == nil {
		return
	}
	if outcome == "sent" {
		s.fbm.sent.WithLabelValues("decide").Inc()
	} else {
		s.fbm.failed.WithLabelValues("decide").Inc()
	}
}
