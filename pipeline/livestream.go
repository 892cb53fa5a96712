package pipeline

import (
	"context"
	"errors"
	"time"
)

// LiveEventType names an event of an on-demand review's stream (the SSE
// "event:" field).
type LiveEventType string

// The live event types. A stream ends with exactly one of verdict, error
// or stopped; reconnect is never stored (it tells one connection to come
// back elsewhere while the review goes on).
const (
	LiveStage     LiveEventType = "stage"
	LiveToken     LiveEventType = "token"
	LiveVerdict   LiveEventType = "verdict"
	LiveError     LiveEventType = "error"
	LiveStopped   LiveEventType = "stopped"
	LiveReconnect LiveEventType = "reconnect"
)

// Final reports whether t ends a review's stream.
func (t LiveEventType) Final() bool {
	return t == LiveVerdict || t == LiveError || t == LiveStopped
}

// LiveEvent is one event of an on-demand review: Seq counts from 1 within
// the review, Data is its JSON.
type LiveEvent struct {
	Seq  uint64
	Type LiveEventType
	Data []byte
}

// ErrLiveGone is wrapped by LiveLog.Read when the events after the asked
// position are no longer kept (expired, trimmed, or never written): the
// client cannot resume and must start a new review.
var ErrLiveGone = errors.New("live events are no longer kept")

// LiveLog keeps the recent events of on-demand reviews, bounded in length
// and age, so that a client that lost its connection resumes on any pod
// without a second model call.
type LiveLog interface {
	// Append stores evs (ascending Seq) of review id. An error means some
	// were not stored; resumes past them may then end in ErrLiveGone.
	Append(ctx context.Context, id string, evs []LiveEvent) error
	// Read returns review id's events with Seq > after, in order, waiting
	// up to wait for the first when none is there yet (an empty result:
	// none arrived). It returns an error wrapping ErrLiveGone when the
	// events after `after` are not kept, and ctx's error when it ends.
	Read(ctx context.Context, id string, after uint64, wait time.Duration) ([]LiveEvent, error)
}
