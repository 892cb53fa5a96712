package moderation

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Take is who holds a queue item: a moderator takes an item so that the
// team does not decide it twice.
type Take struct {
	VerdictID uint64
	// Moderator is the console's pseudonymous moderator id.
	Moderator string
	TakenAt   time.Time
	// ActiveAt is the taker's last action on the item; a take whose
	// ActiveAt is before the caller's stale cut-off no longer holds.
	ActiveAt time.Time
}

// ErrTaken is wrapped by a *TakenError.
var ErrTaken = errors.New("taken by another moderator")

// TakenError says that another moderator holds the item.
type TakenError struct{ Holder Take }

func (e *TakenError) Error() string {
	return fmt.Sprintf("verdict %d is taken by %s (active %s)", e.Holder.VerdictID, e.Holder.Moderator,
		e.Holder.ActiveAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrTaken) true.
func (e *TakenError) Is(target error) bool { return target == ErrTaken }

// CampaignTakes is what taking a whole campaign left: how many of its open
// rooms (verdicts carrying the mark that no moderator has decided) the
// taker holds, and who holds the others.
type CampaignTakes struct {
	// Mine counts the open rooms the taker holds now (taken by this call,
	// or theirs already).
	Mine int
	// Others maps each other moderator whose live take was left alone to
	// the number of the campaign's open rooms they hold.
	Others map[string]int
}

// Takes is queue assignment. There is at most one holder per verdict at
// any time, whatever number of console replicas call at once: each
// change is atomic in the store, so callers hold no lock of their own.
// Every method is safe for concurrent use and returns an error wrapping
// ctx's when ctx ends first; times are kept in UTC at microsecond
// precision.
type Takes interface {
	// TakeItem makes moderator the holder of verdictID at now and returns
	// the take. It succeeds when nobody holds the item, when moderator
	// already does (its ActiveAt renewed, its TakenAt kept), when the
	// holder's last activity is before staleBefore, or when force is set
	// (an override the caller has audited). Otherwise it returns a
	// *TakenError naming the holder. A verdict id no verdict has, an empty
	// moderator or one over 128 bytes, or a zero now is a
	// *pipeline.PermanentError (the first wrapping
	// pipeline.ErrVerdictNotFound).
	TakeItem(ctx context.Context, verdictID uint64, moderator string, now, staleBefore time.Time, force bool) (Take, error)
	// TakeOf returns the take of verdictID, stale or not, and whether
	// there is one.
	TakeOf(ctx context.Context, verdictID uint64) (Take, bool, error)
	// TouchTake renews moderator's take of verdictID at now (never moving
	// ActiveAt back) and reports whether moderator holds it; a stale take
	// of theirs is renewed too: it is theirs until someone else takes it.
	TouchTake(ctx context.Context, verdictID uint64, moderator string, now time.Time) (bool, error)
	// ReleaseItem ends moderator's take of verdictID and reports whether
	// there was one: nobody releases another moderator's take (they
	// override it by taking it with force).
	ReleaseItem(ctx context.Context, verdictID uint64, moderator string) (bool, error)
	// CountOpenCampaignRooms returns the number of verdicts carrying mark
	// that no moderator has decided: what TakeCampaign would try to take.
	CountOpenCampaignRooms(ctx context.Context, mark string) (int, error)
	// TakeCampaign makes moderator the holder, at now, of every open room
	// of mark, except those another moderator holds with activity at or
	// after staleBefore: those are left to them and counted in the
	// result. It is atomic: replicas taking overlapping campaigns or
	// single items at once agree on one holder per room. A mark no room
	// carries takes nothing. A mark of 0 or over 40 bytes, a moderator of
	// 0 or over 128 bytes or a zero now is a *pipeline.PermanentError.
	TakeCampaign(ctx context.Context, mark, moderator string, now, staleBefore time.Time) (CampaignTakes, error)
	// ReleaseCampaign ends moderator's takes of the rooms carrying mark
	// and returns how many it ended; nobody else's take is touched.
	ReleaseCampaign(ctx context.Context, mark, moderator string) (int, error)
}
