package moderation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// A policy change retracts: when a new policy file removes a rule, or
// takes one of its actions off `on`, the live actions that rule took
// under the old file (forward, `on`, not reversed, not expired, with an
// undo) are reversed, each audited first under the policy's own actor
// (PolicyActor); no cleared state is recorded (the rule, not the account,
// was wrong). A process runs the step when it starts on a policy whose
// hash the store has not recorded as applied; the step is bounded per run
// and records the hash only once nothing is left, so a cut-short run is
// finished by the next start.

// PolicyRetractions is the store's side of the retraction. Safe for
// concurrent use; methods return an error wrapping ctx's when ctx ends.
type PolicyRetractions interface {
	ActionControl
	ActionLog
	// PolicyApplied reports whether the retraction step of the policy
	// with hash has run to its end.
	PolicyApplied(ctx context.Context, hash string) (bool, error)
	// RecordPolicyApplied records that it has, with what it reversed.
	RecordPolicyApplied(ctx context.Context, hash, version string, at time.Time, retracted int) error
	// LiveActions returns at most limit forward actions in mode on that
	// are not reversed, were decided after since and can be undone,
	// oldest first, whose (rule, action) is not in keep.
	LiveActions(ctx context.Context, since time.Time, keep []RuleAction, limit int) ([]RoomAction, error)
}

// RuleAction is one rule's action as a policy names it.
type RuleAction struct {
	Rule   string
	Action pipeline.ActionKind
}

// PolicyView is what the retraction needs of the loaded policy: its
// identity and the (rule, action) pairs it keeps `on`.
type PolicyView struct {
	Version, Hash string
	// On lists every rule's action whose mode is on.
	On []RuleAction
}

// Retraction bounds one run of the step.
type Retraction struct {
	// Limit bounds the actions one run reverses.
	Limit int
	// Lookback is how far back an action counts as live: a notice stays
	// in its room, a hold until it is released, a restriction until its
	// until (the policy's restrict_for), so the delivery expiry of the
	// action (expires_at) does not end its effect.
	Lookback time.Duration
	// TTL is the reversals' time to live after now (their expires_at).
	TTL time.Duration
}

// RetractResult is what one run did.
type RetractResult struct {
	// Skipped: the policy's hash was applied already.
	Skipped bool
	// Retracted counts the actions reversed; More says that the bound cut
	// the run short (the hash is then not recorded).
	Retracted int
	More      bool
}

// RetractPolicy runs the retraction step of pol at now over st.
func RetractPolicy(ctx context.Context, st PolicyRetractions, pol PolicyView, r Retraction, now time.Time) (RetractResult, error) {
	applied, err := st.PolicyApplied(ctx, pol.Hash)
	if err != nil || applied {
		return RetractResult{Skipped: applied}, wrapRetract(err)
	}
	live, err := st.LiveActions(ctx, now.Add(-r.Lookback), pol.On, r.Limit+1)
	if err != nil {
		return RetractResult{}, wrapRetract(err)
	}
	res := RetractResult{More: len(live) > r.Limit}
	if res.More {
		live = live[:r.Limit]
	}
	actor := PolicyActor(pol.Version)
	for _, a := range live {
		if _, err := st.RecordAction(ctx, AuditRecord{At: now, Moderator: actor, Action: ActionReverseAction, RoomID: a.Verdict.RoomID,
			Detail: fmt.Sprintf("key %s; rule %s: %s no longer on", a.Key, a.Rule, a.Action)}); err != nil {
			return res, wrapRetract(err)
		}
		done, err := st.ReverseAction(ctx, KeyReversal{RoomID: a.Verdict.RoomID, Key: a.Key, At: now, ExpiresAt: now.Add(r.TTL),
			Source: pipeline.ActionSourcePolicy})
		if err != nil && !errors.Is(err, ErrActionNotFound) {
			return res, wrapRetract(err)
		}
		if done.Reversed {
			res.Retracted++
		}
	}
	if res.More {
		return res, nil
	}
	return res, wrapRetract(st.RecordPolicyApplied(ctx, pol.Hash, pol.Version, now, res.Retracted))
}

func wrapRetract(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("retract policy: %w", err)
}
