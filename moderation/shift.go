package moderation

import (
	"context"
	"errors"
	"slices"
	"time"
)

// TakeEvent names a change of a take kept in the take history.
type TakeEvent string

// The take history's events. A decision ends a take too; it is in the
// decisions.
const (
	// TakeStarted: the moderator became the item's holder.
	TakeStarted TakeEvent = "take"
	// TakeReleased: the moderator let the item go without deciding it.
	TakeReleased TakeEvent = "release"
)

// TakeRecord is one row of the take history.
type TakeRecord struct {
	At        time.Time
	VerdictID uint64
	Moderator string
	Event     TakeEvent
}

// Validate reports every problem that makes r unrecordable.
func (r TakeRecord) Validate() error {
	var errs []error
	if r.At.IsZero() {
		errs = append(errs, errors.New("a time is required"))
	}
	if r.VerdictID == 0 {
		errs = append(errs, errors.New("a verdict id is required"))
	}
	if r.Moderator == "" || len(r.Moderator) > 128 {
		errs = append(errs, errors.New("moderator must be 1..128 bytes"))
	}
	if r.Event != TakeStarted && r.Event != TakeReleased {
		errs = append(errs, errors.New("event must be take or release"))
	}
	return errors.Join(errs...)
}

// HandledItem is one decision of a shift with the times around it.
type HandledItem struct {
	VerdictID uint64
	Moderator string
	Decision  string
	// QueuedAt is when the item entered the queue (its verdict finished).
	QueuedAt time.Time
	// PickedAt is the item's first take by anyone at or before the
	// decision (zero: none recorded).
	PickedAt time.Time
	// TakenAt is the deciding moderator's latest take of the item at or
	// before the decision (zero: none recorded).
	TakenAt   time.Time
	DecidedAt time.Time
}

// TakeHistory keeps when takes started and ended, for the shift's
// numbers: per-moderator counts, handle time and pick-up time. Every
// method is safe for concurrent use and returns an error wrapping ctx's
// when ctx ends first; times are kept in UTC at microsecond precision.
type TakeHistory interface {
	// RecordTake appends r. An invalid r (TakeRecord.Validate) is a
	// *pipeline.PermanentError.
	RecordTake(ctx context.Context, r TakeRecord) error
	// HandledItems returns every decision made in [from, to), oldest
	// first, with its item's queued and picked-up times and the deciding
	// moderator's take.
	HandledItems(ctx context.Context, from, to time.Time) ([]HandledItem, error)
	// PurgeTakeHistory deletes up to limit rows recorded before cutoff
	// and returns how many it deleted.
	PurgeTakeHistory(ctx context.Context, cutoff time.Time, limit int) (int, error)
}

// ShiftNumbers are one moderator's (or the team's) numbers over a shift.
type ShiftNumbers struct {
	// Moderator is "" for the team's totals.
	Moderator string
	Decisions int
	Overturns int
	// Handled counts the decisions with a take of the decider's before
	// them; HandleTotal sums their take-to-decision times.
	Handled     int
	HandleTotal time.Duration
	// PickedUp counts the decisions whose item has a recorded first take;
	// PickupTotal sums their queued-to-first-take times.
	PickedUp    int
	PickupTotal time.Duration
}

// MeanHandle is the mean take-to-decision time (0 when none).
func (n ShiftNumbers) MeanHandle() time.Duration {
	if n.Handled == 0 {
		return 0
	}
	return n.HandleTotal / time.Duration(n.Handled)
}

// MeanPickup is the mean queued-to-first-take time (0 when none).
func (n ShiftNumbers) MeanPickup() time.Duration {
	if n.PickedUp == 0 {
		return 0
	}
	return n.PickupTotal / time.Duration(n.PickedUp)
}

func (n *ShiftNumbers) add(it HandledItem) {
	n.Decisions++
	if it.Decision == DecisionOverturn {
		n.Overturns++
	}
	if !it.TakenAt.IsZero() && !it.DecidedAt.Before(it.TakenAt) {
		n.Handled++
		n.HandleTotal += it.DecidedAt.Sub(it.TakenAt)
	}
	if !it.PickedAt.IsZero() && !it.QueuedAt.IsZero() && !it.PickedAt.Before(it.QueuedAt) {
		n.PickedUp++
		n.PickupTotal += it.PickedAt.Sub(it.QueuedAt)
	}
}

// Merge adds o's counts and totals to n (a team's numbers from its
// moderators').
func (n *ShiftNumbers) Merge(o ShiftNumbers) {
	n.Decisions += o.Decisions
	n.Overturns += o.Overturns
	n.Handled += o.Handled
	n.HandleTotal += o.HandleTotal
	n.PickedUp += o.PickedUp
	n.PickupTotal += o.PickupTotal
}

// ShiftReport is a shift's numbers per moderator (by id) and the team's.
type ShiftReport struct {
	Moderators []ShiftNumbers
	Team       ShiftNumbers
}

// Summarize adds up a shift's handled items.
func Summarize(items []HandledItem) ShiftReport {
	by := map[string]*ShiftNumbers{}
	var r ShiftReport
	for _, it := range items {
		n := by[it.Moderator]
		if n == nil {
			n = &ShiftNumbers{Moderator: it.Moderator}
			by[it.Moderator] = n
		}
		n.add(it)
		r.Team.add(it)
	}
	for _, n := range by {
		r.Moderators = append(r.Moderators, *n)
	}
	slices.SortFunc(r.Moderators, func(a, b ShiftNumbers) int {
		if a.Moderator < b.Moderator {
			return -1
		}
		if a.Moderator > b.Moderator {
			return 1
		}
		return 0
	})
	return r
}
