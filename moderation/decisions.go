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
	// Decision is DecisionConfirm, DecisionOverturn or DecisionUndo.
	Decision string
	// Label and Category are what the moderator settled on; an undo's
	// are those of the decision it reverses (the store fills them in).
	Label pipeline.Label
	// Category is "" for a clean label.
	Category pipeline.Category
	// Reverses is, on an undo, the id of the decision it reverses (0 on
	// any other decision).
	Reverses uint64
	// ReversedAt is when an undo reversed this decision: zero while it
	// stands. A reversed decision stays recorded (never deleted) but is
	// no longer in force (InForce).
	ReversedAt time.Time
	// Note is the moderator's note, kept to MaxNoteRunes.
	Note string
	// Audit is true when the decision was made on an audit item (a
	// sampled clean verdict, IsAuditItem): the feedback event carries it so
	// that labelled sets can tell a looked-at clean verdict from any other.
	Audit     bool
	DecidedAt time.Time
	// FeedbackSentAt is when SQS accepted the decision's moderator_feedback
	// event; zero while it is unsent (the console's sweeper resends it).
	// Decisions.AddDecision ignores it. An undo owes an event too (it
	// names the undone decision's, which the lake then leaves out).
	FeedbackSentAt time.Time
}

// The decisions a moderator can make. An undo reverses its moderator's
// decision in force, as a row of its own: the decision before it (or
// none, returning the item to the queue) is in force again.
const (
	DecisionConfirm  = "confirm"
	DecisionOverturn = "overturn"
	DecisionUndo     = "undo"
)

// The refusals of Decisions.AddDecision beyond a malformed decision: each
// is wrapped in a *pipeline.PermanentError, and its message is what the
// console shows the moderator.
var (
	// ErrNoChange: an overturn to the verdict's own label and category
	// changes nothing (and would count as a disagreement).
	ErrNoChange = errors.New("an overturn must change the verdict's label or category; to agree with the verdict, confirm it")
	// ErrConfirmChanged: a confirm records the verdict's label and
	// category; one asking for others is an overturn.
	ErrConfirmChanged = errors.New("a confirm keeps the verdict's label and category; to change them, overturn")
	// ErrCannotUndo: an undo names a decision that is not in force on its
	// verdict, or that another moderator made.
	ErrCannotUndo = errors.New("only your own decision in force can be undone")
)

// MaxNoteRunes bounds a decision's note; a longer one is stored cut.
const MaxNoteRunes = 2000

// Validate reports every problem that makes d unrecordable: an unknown
// decision, label or category, no moderator (or one over 128 bytes), no
// verdict id or decision time, an undo that names no decision or another
// decision that names one. An undo's label and category are not checked
// (the store fills them in).
func (d Decision) Validate() error {
	var errs []error
	switch d.Decision {
	case DecisionConfirm, DecisionOverturn:
		if d.Reverses != 0 {
			errs = append(errs, errors.New("only an undo reverses a decision"))
		}
		if d.Label != pipeline.LabelAbusive && d.Label != pipeline.LabelSuspicious && d.Label != pipeline.LabelClean {
			errs = append(errs, fmt.Errorf("label %q is not abusive, suspicious or clean", d.Label))
		}
	case DecisionUndo:
		if d.Reverses == 0 {
			errs = append(errs, errors.New("an undo must name the decision it reverses"))
		}
	default:
		errs = append(errs, fmt.Errorf("decision %q is not confirm, overturn or undo", d.Decision))
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

// CheckAgainst reports whether a confirm or overturn d means what it
// says about a verdict labelled label and category: a confirm must carry
// them, an overturn must change one of them. A clean label's category is
// not compared (a decision keeps "" for it, a verdict "clean"). It
// returns ErrConfirmChanged or ErrNoChange (unwrapped), nil otherwise and
// for an undo.
func (d Decision) CheckAgainst(label pipeline.Label, category pipeline.Category) error {
	same := d.Label == label && (label == pipeline.LabelClean || d.Category == category)
	switch {
	case d.Decision == DecisionConfirm && !same:
		return ErrConfirmChanged
	case d.Decision == DecisionOverturn && same:
		return ErrNoChange
	}
	return nil
}

// InForce returns the decision in force among ds, a verdict's decisions
// newest first (as Decisions.Decisions returns them): the newest that is
// neither an undo nor reversed by one. false when none is (never decided,
// or every decision undone).
func InForce(ds []Decision) (Decision, bool) {
	for _, d := range ds {
		if d.Decision != DecisionUndo && d.ReversedAt.IsZero() {
			return d, true
		}
	}
	return Decision{}, false
}

// Decisions records moderators' decisions. Its methods are safe for
// concurrent use and return an error wrapping ctx's when ctx ends first.
type Decisions interface {
	// AddDecision records d (its ID, ReversedAt and FeedbackSentAt
	// ignored) with its feedback unsent, and returns its id, greater than
	// every id before it. An invalid d (Decision.Validate), or a verdict
	// id no verdict has, is a *pipeline.PermanentError (the latter
	// wrapping pipeline.ErrVerdictNotFound); so is a confirm or overturn
	// that does not mean what it says about its verdict
	// (Decision.CheckAgainst: wrapping ErrConfirmChanged or ErrNoChange).
	// An undo must name the decision in force on the verdict (InForce),
	// made by the same moderator, else it is a *pipeline.PermanentError
	// wrapping ErrCannotUndo; recorded, it carries that decision's label
	// and category and the reversed decision gets ReversedAt =
	// d.DecidedAt, both at once. An undo is recorded unsent like any
	// decision: its feedback event tells the lake that the undone
	// decision's event no longer counts. Two
	// concurrent confirms or overturns both record: who may decide is the
	// takes' business, not this one's; of two concurrent undos of one
	// decision, one records.
	AddDecision(ctx context.Context, d Decision) (uint64, error)
	// Decisions returns the decisions on verdictID, undos and reversed
	// ones included, newest first (latest DecidedAt, then highest id; the
	// one in force is InForce's), at most limit; none for an unknown
	// verdict.
	Decisions(ctx context.Context, verdictID uint64, limit int) ([]Decision, error)
	// MarkFeedbackSent records that SQS accepted the feedback events of
	// the decisions ids at at. A decision already marked keeps its first
	// time; an unknown id is ignored.
	MarkFeedbackSent(ctx context.Context, at time.Time, ids ...uint64) error
}
