package moderation

import (
	"context"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// A decision is the outbox of its moderator_feedback lake event: it is
// marked sent once SQS has accepted the event, and the console's sweeper
// resends the decisions still unmarked after a grace period.

// UnsentFeedback is a decision whose moderator_feedback event SQS has not
// accepted yet, with what of its verdict the event carries.
type UnsentFeedback struct {
	Decision Decision
	// Key, VerdictLabel, VerdictCategory and Action are the verdict's as
	// they are now (a re-review between the decision and the resend shows
	// in the resent event).
	Key             pipeline.ReviewKey
	VerdictLabel    pipeline.Label
	VerdictCategory pipeline.Category
	Action          pipeline.Action
	// Attempts is how many sends of the event failed transiently so far.
	Attempts int
}

// FeedbackSend is what became of one taken decision's event, as the send
// function of FeedbackOutbox.SweepUnsentFeedback reports it.
type FeedbackSend struct {
	// Sent: SQS accepted the event; the decision is marked sent.
	Sent bool
	// Rejected, when not empty, is why SQS refused the event itself (its
	// answer, never the event's content): the decision is marked rejected
	// with it and is not taken again.
	Rejected string
	// RetryAt: a decision neither sent nor rejected is not taken again
	// before it (zero: at the next sweep); its failed attempts are
	// counted.
	RetryAt time.Time
}

// FeedbackSweep counts what one sweep did with the decisions it took.
type FeedbackSweep struct {
	Taken, Sent, Rejected, Deferred int
}

// MaxRejectReason bounds a rejection's reason; a longer one is stored cut.
const MaxRejectReason = 500

// FeedbackBacklog is the state of the feedback outbox over every console.
type FeedbackBacklog struct {
	// Unsent counts decisions whose feedback SQS has not accepted yet and
	// has not refused; Oldest is when the oldest of them was decided (zero
	// when none).
	Unsent int
	Oldest time.Time
	// Rejected counts decisions whose feedback SQS refused: marked, not
	// resent, waiting for an operator.
	Rejected int
}

// FeedbackOutbox is the resend side of the decisions' feedback. Safe for
// concurrent use by several consoles: a decision taken by one sweep is
// not taken by another until the first has marked it.
type FeedbackOutbox interface {
	// SweepUnsentFeedback takes up to limit (at least 1, else a
	// *pipeline.PermanentError) decisions decided before now-grace whose
	// feedback is unsent, not rejected and not deferred past now, oldest
	// first, and hands them to send, which returns one FeedbackSend per
	// decision, in order. Sent decisions are marked sent at now, rejected
	// ones rejected at now with their reason, and the others get one more
	// failed attempt and their RetryAt. send should be bounded by its
	// context; its results are applied even when it also returns an error
	// (a partial batch). A result list of the wrong length marks nothing.
	// A ctx that ends before the marks are stored leaves them unstored
	// (the events are sent again later, with the same ids), so callers
	// that stop pass a context that outlives one send. It returns what it
	// did and the error of send (as is) or of the store (wrapped).
	SweepUnsentFeedback(ctx context.Context, now time.Time, grace time.Duration, limit int,
		send func(ctx context.Context, rows []UnsentFeedback) ([]FeedbackSend, error)) (FeedbackSweep, error)
	// FeedbackBacklog reads the outbox's state.
	FeedbackBacklog(ctx context.Context) (FeedbackBacklog, error)
}
