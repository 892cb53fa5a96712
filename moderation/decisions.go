package moderation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Decision is one moderator decision on a verdict.
type Decision struct {
	ID        uint64
	VerdictID uint64
	// Moderator is the console's pseudonymous moderator id, never an e-mail.
	Moderator string
	// Decision is DecisionConfirm or DecisionOverturn.
	Decision string
	Label    pipeline.Label
	// Category is "" for a clean label.
	Category pipeline.Category
	// Note is the moderator's note, kept to MaxNoteRunes.
	Note string
	// Audit is true when the decision was made on an audit item (a
	// sampled clean verdict, IsAuditItem): the feedback event carries it so
	// that labelled sets can tell a looked-at clean verdict from any other.
	Audit     bool
	DecidedAt time.Time
	// FeedbackSentAt is when SQS accepted the decision's moderator_feedback
	// event; zero while it is unsent (the console's sweeper resends it).
	// Decisions.AddDecision ignores it.
	FeedbackSentAt time.Time
}

// The decisions a moderator can make.
const (
	DecisionConfirm  = "confirm"
	DecisionOverturn = "overturn"
)

// MaxNoteRunes bounds a decision's note; a longer one is stored cut.
const MaxNoteRunes = 2000

// Validate reports every problem that makes d unrecordable: an unknown
// decision, label or category, no moderator (or one over 128 bytes), no
// verdict id or decision time.
func (d Decision) Validate() error {
	var errs []error
	if d.Decision != DecisionConfirm && d.Decision != DecisionOverturn {
		errs = append(errs, fmt.Errorf("decision %q is not confirm or overturn", d.Decision))
	}
	if d.Label != pipeline.LabelAbusive && d.Label != pipeline.LabelSuspicious && d.Label != pipeline.LabelClean {
		errs = append(errs, fmt.Errorf("label %q is not abusive, suspicious or clean", d.Label))
	}
	if d.Category != "" && !d.Category.Valid() {
		errs = append(errs, fmt.Errorf("unknown category %q", d.Category))
	}
	if d.Moderator == "" || len(d.Moderator) > 128 {
		errs = append(errs, errors.New("moderator must be 1..128 bytes"))
	}
	if d.VerdictID == 0 || d.DecidedAt.IsZero() {
		errs = append(errs, errors.New("verdict id and decided_at are required"))
	}
	return errors.Join(errs...)
}

// Decisions records moderators' decisions. Its methods are safe for
// concurrent use and return an error wrapping ctx's when ctx ends first.
type Decisions interface {
	// AddDecision records d (its ID and FeedbackSentAt ignored) with its
	// feedback unsent, and returns its id, greater than every id before
	// it. An invalid d (Decision.Validate), or a verdict id no verdict
	// has, is a *pipeline.PermanentError (the latter wrapping
	// pipeline.ErrVerdictNotFound). Two concurrent calls both record:
	// who may decide is the takes' business, not this one's.
	AddDecision(ctx context.Context, d Decision) (uint64, error)
	// Decisions returns the decisions on verdictID, newest first (the
	// first is the one in force: latest DecidedAt, then highest id), at
	// most limit; none for an unknown verdict.
	Decisions(ctx context.Context, verdictID uint64, limit int) ([]Decision, error)
	// MarkFeedbackSent records that SQS accepted the feedback events of
	// the decisions ids at at. A decision already marked keeps its first
	// time; an unknown id is ignored.
	MarkFeedbackSent(ctx context.Context, at time.Time, ids ...uint64) error
}
