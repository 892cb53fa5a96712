package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The transactional outbox. A message that a producer owes a queue because
// of something it commits to MySQL (a verdict's lake event; later a
// protective action, a moderator's feedback) is written as an outbox row in
// that same transaction, and a relay (package pipeline/outbox) sends it
// afterwards and marks it sent once the queue accepted it. A process killed
// anywhere between its commit and the queue's acceptance therefore loses
// nothing: the row waits for the next relay. The price is at-least-once
// delivery (a relay killed after the queue accepted and before its mark
// sends again), which every consumer absorbs by deduplicating on the
// message's EventID.

// OutboxDestination names the queue an outbox message goes to, by the
// queue's role; a relay sends only the destinations it has a queue for.
type OutboxDestination string

// The outbox destinations.
const (
	// OutboxFeedback is the lake's queue ("feedback"): lake events.
	OutboxFeedback OutboxDestination = "feedback"
	// OutboxActions is the protective actions' queue ("actions"): the
	// bodies of ProtectiveAction, for the chat and payment services.
	OutboxActions OutboxDestination = "actions"
)

// MaxOutboxEventID bounds an outbox message's EventID (the column's
// width).
const MaxOutboxEventID = 128

// OutboxMessage is one message written to the outbox: where it goes, the
// id its consumer deduplicates by (unique per destination: writing the
// same id twice keeps the first message), and the message as the queue
// will receive it.
type OutboxMessage struct {
	Destination OutboxDestination
	EventID     string
	Body        []byte
	// Attributes ride along as the queue's message attributes (a trace
	// context, a routing hint); nil for none.
	Attributes map[string]Attribute
}

// Validate reports what makes m unwritable.
func (m OutboxMessage) Validate() error {
	var errs []error
	if m.Destination == "" {
		errs = append(errs, errors.New("outbox message has no destination"))
	}
	if m.EventID == "" || len(m.EventID) > MaxOutboxEventID {
		errs = append(errs, fmt.Errorf("outbox message event id must be 1 to %d bytes", MaxOutboxEventID))
	}
	if len(m.Body) == 0 {
		errs = append(errs, errors.New("outbox message has no body"))
	}
	return errors.Join(errs...)
}

// LakeOutboxMessage encodes a lake event as the outbox message that sends
// it to the feedback queue, under its event id.
func LakeOutboxMessage(ev LakeEvent) (OutboxMessage, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return OutboxMessage{}, fmt.Errorf("outbox: encode %s event: %w", ev.EventType, err)
	}
	return OutboxMessage{Destination: OutboxFeedback, EventID: ev.EventID, Body: b}, nil
}

// OutboxRow is an outbox message a relay has claimed: the message, its row
// id, when it was written, and how many sends it has had, this one
// included.
type OutboxRow struct {
	ID int64
	OutboxMessage
	CreatedAt time.Time
	Attempts  int
}

// OutboxFailure is a claimed row whose send failed: it is not taken again
// before RetryAt, and Error (the queue's answer, never the payload) is
// kept with it.
type OutboxFailure struct {
	ID      int64
	RetryAt time.Time
	Error   string
}

// OutboxBacklog is the outbox's pending part for one destination.
type OutboxBacklog struct {
	// Pending counts the messages the queue has not accepted yet; Oldest
	// is when the oldest of them was written (zero when none).
	Pending int
	Oldest  time.Time
}

// OutboxStore is the outbox as a relay uses it. Times are the relay's
// clock (now), passed in so that every relay and test agrees on one; the
// store keeps them at microsecond precision. Every method honours ctx and
// wraps its errors with the adapter's prefix.
type OutboxStore interface {
	// Enqueue writes msgs, available at once, in a transaction of their
	// own: for a producer with nothing else to commit with them (one that
	// has, such as a verdict's save, writes them in its own
	// transaction). A message whose EventID its destination already holds
	// is not written again. A message that fails Validate fails the call
	// with a *PermanentError and nothing is written.
	Enqueue(ctx context.Context, now time.Time, msgs []OutboxMessage) error
	// Claim takes up to max pending rows of dests that are available at
	// now (written, or their lease or backoff over), oldest available
	// first, and leases them until now+lease: another Claim does not
	// take them before then, so concurrent relays take distinct rows,
	// and a relay that dies mid-send leaves them to another after the
	// lease. Each taken row's Attempts grows by one. None, nil when
	// nothing is due.
	Claim(ctx context.Context, dests []OutboxDestination, now time.Time, lease time.Duration, max int) ([]OutboxRow, error)
	// MarkSent records that the queue accepted the rows ids at now; a
	// row already marked keeps its first time, and an unknown id (purged)
	// is ignored.
	MarkSent(ctx context.Context, now time.Time, ids []int64) error
	// MarkFailed defers each failed row to its RetryAt and keeps its
	// error; a row marked sent meanwhile stays sent.
	MarkFailed(ctx context.Context, failures []OutboxFailure) error
	// Backlog reads the pending rows of every destination that has any.
	Backlog(ctx context.Context) (map[OutboxDestination]OutboxBacklog, error)
	// PurgeSent deletes up to limit rows sent before cutoff and returns
	// how many it deleted. Pending rows are never purged.
	PurgeSent(ctx context.Context, cutoff time.Time, limit int) (int, error)
}
