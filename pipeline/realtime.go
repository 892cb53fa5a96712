package pipeline

import (
	"context"
	"errors"
	"time"
)

// RecordOutcome is what recording one chat event did to its room's state.
type RecordOutcome string

// The record outcomes.
const (
	// RecordNew: a message the room had not seen; it will be in a window.
	RecordNew RecordOutcome = "new"
	// RecordDuplicate: the message id was seen before; nothing changed.
	RecordDuplicate RecordOutcome = "duplicate"
	// RecordPending: a message sent inside the window being published
	// right now; that window's review fetches it, so nothing changes.
	RecordPending RecordOutcome = "pending"
	// RecordLate: sent before the room's watermark, or before the window
	// being published (a late delivery or a producer clock behind): what
	// the room's windows cover is behind its sent_at, so the trigger
	// publishes a window of its own for it, and the room's next window
	// does not reach back over what is covered. A redelivery of a late
	// event is late again (its own window is published again, the same
	// window), not a duplicate.
	RecordLate RecordOutcome = "late"
)

// FireReason says why a room's window fired.
type FireReason string

// The fire reasons.
const (
	// FireQuiet: the room was quiet for the quiet period.
	FireQuiet FireReason = "quiet"
	// FireMaxDelay: the room kept talking for the maximum delay since its
	// first unreviewed message.
	FireMaxDelay FireReason = "max_delay"
)

// RoomWindow is a window of one room claimed for publishing. Start and End
// come from the trigger's clock (End is the fire time), widened back only
// to cover late messages and never longer than the worker's max window.
type RoomWindow struct {
	RoomID string
	Start  time.Time
	End    time.Time
	Reason FireReason
	// Messages is how many new messages the window was recorded with.
	Messages int
	// DoubleCovered is how many messages the store knows an earlier
	// window covered and this one covers again: those sent between this
	// window's start and the watermark, when a late message pulled the
	// start back, less the late messages themselves. The store counts only
	// the messages it recorded and still remembers (none lost to a flush,
	// none evicted from its bounded seen set); a republished window
	// answers its first claim's count.
	DoubleCovered int
	// Republish: the window was claimed before by a replica that did not
	// acknowledge it (a crash, a failed publish); it is published again
	// unchanged so the worker's idempotency key dedupes it.
	Republish bool
	// Token identifies the claim; Ack needs it.
	Token string
}

// ReviewEvent is the real-time review event of the window, published at
// now.
func (w RoomWindow) ReviewEvent(now time.Time) ReviewEvent {
	return ReviewEvent{RoomID: w.RoomID, WindowStart: w.Start.UTC(), WindowEnd: w.End.UTC(), RunID: RealtimeRunID(w.End),
		PublishedAt: now.UTC(), SchemaVersion: ReviewSchemaVersion, Source: SourceRealtime}
}

// ErrRoomStateLost is a room's debounce state found gone while the room
// was due or claimed: evicted by a Redis that may evict, or lost in an
// asynchronous failover. The messages it knew and that no window covered
// are reviewed only by the hourly sweep.
var ErrRoomStateLost = errors.New("room state lost")

// RoomActivity is the shared per-room debounce state of the real-time
// trigger: any number of trigger replicas record chat events into it and
// claim due rooms from it; a due room is claimed by exactly one of them.
type RoomActivity interface {
	// Record records chat events, returning one outcome per event in
	// order. On error nothing may be assumed recorded: the caller keeps
	// the events (they are idempotent) and tries again.
	Record(ctx context.Context, evs []ChatEvent) ([]RecordOutcome, error)
	// Due returns up to limit rooms of one shard whose window is due.
	Due(ctx context.Context, shard, limit int) ([]string, error)
	// Shards is the fixed number of shards Due takes.
	Shards() int
	// Claim claims a due room and records its window as pending before
	// anything is published; ok is false when the room is not due or
	// another replica holds it. It returns ErrRoomStateLost (wrapped) when
	// the room was due but its state was gone; the room leaves the due
	// set, and only the sweep covers the messages it knew.
	Claim(ctx context.Context, roomID string) (w RoomWindow, ok bool, err error)
	// Pending counts the rooms with unreviewed messages or a window
	// being published, for the rooms-pending gauge.
	Pending(ctx context.Context) (int64, error)
	// Ack advances the room's watermark to the window's end once the
	// review event was accepted by the queue; ok is false when the claim
	// was lost to another replica (which publishes the same window). It
	// returns ErrRoomStateLost (wrapped) when the room's state was gone:
	// the published window stands, but the room starts again from nothing
	// (its next window has no watermark to start from).
	Ack(ctx context.Context, w RoomWindow) (ok bool, err error)
}
