package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// MaxReceive is the most messages one Receive may ask for (SQS's limit).
const MaxReceive = 10

// Message is one delivery of a queue message. A message delivered again
// (its visibility ran out, or it was handed back) is a new delivery with
// the same ID, a higher ReceiveCount and a new ReceiptHandle.
type Message struct {
	// ID is the queue's id of the message, the same on every delivery.
	ID string
	// ReceiptHandle names this delivery; Acker calls take it, and only the
	// latest delivery's handle is sure to work.
	ReceiptHandle string
	Body          []byte
	// ReceiveCount is how many times the message has been delivered, this
	// delivery included (SQS's ApproximateReceiveCount): 1 the first time.
	ReceiveCount int
	// SentAt is when the message entered the queue (zero if unknown).
	SentAt time.Time
	// Attributes are the message attributes it was sent with.
	Attributes map[string]Attribute
}

// AttributeType is the data type of a message attribute.
type AttributeType string

// The attribute types chatguard uses (SQS's String and Number).
const (
	AttributeString AttributeType = "String"
	AttributeNumber AttributeType = "Number"
)

// Attribute is a typed message attribute. Attributes let consumers and
// operators route or inspect a message without parsing its body.
type Attribute struct {
	Type  AttributeType
	Value string
}

// StringAttribute returns a String attribute.
func StringAttribute(v string) Attribute { return Attribute{Type: AttributeString, Value: v} }

// NumberAttribute returns a Number attribute.
func NumberAttribute(n int64) Attribute {
	return Attribute{Type: AttributeNumber, Value: strconv.FormatInt(n, 10)}
}

// MaxMessageAttributes is how many message attributes SQS takes on one
// message.
const MaxMessageAttributes = 10

// DeadLetterAttributes returns the attributes of a message's copy to a
// dead-letter queue: the DLQ's own (the reason, the source message) over
// the message's, which the copy keeps (its trace context first, then the
// others by name) while they fit in MaxMessageAttributes. So a
// dead-lettered message still leads to the trace it was sent in.
func DeadLetterAttributes(orig, dlq map[string]Attribute) map[string]Attribute {
	out := make(map[string]Attribute, MaxMessageAttributes)
	for k, a := range dlq {
		out[k] = a
	}
	names := make([]string, 0, len(orig))
	for k := range orig {
		if _, taken := out[k]; !taken {
			names = append(names, k)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(traceRank(a), traceRank(b)), cmp.Compare(a, b))
	})
	for _, k := range names {
		if len(out) >= MaxMessageAttributes {
			break
		}
		out[k] = orig[k]
	}
	return out
}

// traceRank orders the trace context's attributes first.
func traceRank(name string) int {
	switch name {
	case TraceParentAttribute:
		return 0
	case traceStateAttribute:
		return 1
	}
	return 2
}

// OutMessage is a message to send.
type OutMessage struct {
	Body       []byte
	Attributes map[string]Attribute
}

// ReceiveRequest is one long poll.
type ReceiveRequest struct {
	// Max is the most messages to return, 1..MaxReceive: the free slots
	// of the caller, so that it holds only what it can process.
	Max int
	// Wait is how long to wait for a first message (a long poll; SQS
	// allows up to 20 s). Zero returns at once.
	Wait time.Duration
	// Visibility hides the returned messages from other receivers for
	// this long (whole seconds); zero keeps the queue's default.
	Visibility time.Duration
}

// Receiver long-polls a queue.
type Receiver interface {
	// Receive returns up to req.Max messages, waiting up to req.Wait for
	// the first; none and a nil error when the wait ended empty. It
	// returns an error wrapping ctx's when ctx ends during the poll.
	Receive(ctx context.Context, req ReceiveRequest) ([]Message, error)
}

// Acker settles received messages by their receipt handles. Both calls
// take any number of receipts and return nil when every entry succeeded,
// a *BatchError naming the entries that failed otherwise, or (for a call
// that could not be tried at all, such as an ended ctx) another error that
// applies to every entry. EntryErrors reads all three alike. An entry the
// queue refuses for itself (an invalid or stale receipt handle) fails with
// a *PermanentError.
type Acker interface {
	// Delete deletes the messages: they are never delivered again.
	Delete(ctx context.Context, receipts []string) error
	// ChangeVisibility hides the messages for visibility from now on;
	// zero makes them visible at once (a hand-back).
	ChangeVisibility(ctx context.Context, receipts []string, visibility time.Duration) error
}

// Sender sends messages to a queue. Send takes any number of messages and
// reports failures like Acker's calls do. An entry the queue refuses for
// itself (contents it does not accept, over its size limit) fails with a
// *PermanentError: sending it again cannot succeed. Any other failure may
// pass.
type Sender interface {
	Send(ctx context.Context, msgs []OutMessage) error
}

// Inbox is a queue as a consuming engine uses it: receive, then settle.
type Inbox interface {
	Receiver
	Acker
}

// Queue is every queue operation; the queue adapters and the in-memory
// fake implement it, and one conformance suite holds them to the same
// behaviour.
type Queue interface {
	Inbox
	Sender
}

// BatchError reports the entries of a batched queue call that failed.
type BatchError struct {
	// Errs has one error per entry of the call, in order; nil for an
	// entry that succeeded.
	Errs []error
}

// Error says how many entries failed and why the first did.
func (e *BatchError) Error() string {
	n := 0
	var first error
	for _, err := range e.Errs {
		if err != nil {
			n++
			if first == nil {
				first = err
			}
		}
	}
	if first == nil {
		return fmt.Sprintf("0 of %d entries failed", len(e.Errs))
	}
	return fmt.Sprintf("%d of %d entries failed: %v", n, len(e.Errs), first)
}

// Unwrap returns the entries' errors, so that errors.Is and errors.As see
// every cause.
func (e *BatchError) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// EntryErrors spreads the error of a batched call over its n entries: nil
// when err is nil, the entries' own errors for a *BatchError, and err for
// every entry otherwise.
func EntryErrors(err error, n int) []error {
	out := make([]error, n)
	if err == nil {
		return out
	}
	var be *BatchError
	if errors.As(err, &be) && len(be.Errs) == n {
		copy(out, be.Errs)
		return out
	}
	for i := range out {
		out[i] = err
	}
	return out
}
