package pipeline

import (
	"context"
	"time"
)

// CampaignKind says what a campaign mark marks.
type CampaignKind string

// The campaign mark kinds (the kind column of verdict_campaigns).
const (
	// CampaignScript marks a near-duplicate fingerprint of a risky
	// message's normalised text (one LSH band of it).
	CampaignScript CampaignKind = "script"
	// CampaignContact marks a contact value a risky message carried: a
	// messenger id, phone number, account number, e-mail address or
	// look-alike payment host.
	CampaignContact CampaignKind = "contact"
)

// CampaignSighting is one mark one room's review saw: Mark and Sender are
// keyed pseudonyms ('hmac:<24 hex>'), never text, contact values or ids.
type CampaignSighting struct {
	Kind      CampaignKind
	Mark      string
	MessageID string
	Sender    string
}

// CampaignCount is a mark with how far it has spread fleet-wide: the
// distinct rooms and senders that carried it in the sliding window when
// the review counted it (exact up to the counter's cap, estimated above).
type CampaignCount struct {
	Kind      CampaignKind `json:"kind"`
	Mark      string       `json:"mark"`
	MessageID string       `json:"message_id"`
	Rooms     int          `json:"rooms"`
	Senders   int          `json:"senders"`
	// RepeatSender says the mark is one account repeating its own
	// greeting or contact (a shop's auto-greeting, a seller's saved
	// phrase), not a campaign: fewer senders than a campaign needs, from
	// an account that is verified or has an established clean history.
	// The judge is told so, and no campaign view, bulk action or
	// campaign query counts it.
	RepeatSender bool `json:"repeat_sender,omitempty"`
}

// SenderStanding is what a review knows of the one account behind a
// mark: whether the operator verified it as a business, and its account
// history (earlier rooms, other than the one under review, within the
// history window) as the account-history lookup gave it.
type SenderStanding struct {
	// Verified says the account is on the operator's list of verified
	// business accounts.
	Verified bool
	// CleanRooms counts earlier rooms judged clean.
	CleanRooms int
	// OverturnedRooms counts earlier rooms whose flag a moderator
	// overturned.
	OverturnedRooms int
	// FlaggedRooms counts earlier rooms judged suspicious or abusive whose
	// flag stands.
	FlaggedRooms int
}

// MaxCampaigns bounds the campaign signals a verdict records.
const MaxCampaigns = 16

// MaxSightings bounds the marks below the campaign threshold a verdict
// records (Verdict.Sightings): a risky message's four script bands and
// its contacts, for a few messages.
const MaxSightings = 32

// CampaignClass says what a recorded mark is (the class column of
// verdict_campaigns).
type CampaignClass string

// The classes.
const (
	// ClassCampaign is a campaign signal.
	ClassCampaign CampaignClass = "campaign"
	// ClassRepeatSender is a signal that is one account repeating itself
	// (CampaignCount.RepeatSender).
	ClassRepeatSender CampaignClass = "repeat_sender"
	// ClassSighting is a mark counted below the campaign threshold.
	ClassSighting CampaignClass = "sighting"
	// ClassLinked is a sighting linked later to the campaign its mark
	// joined (retro-linking).
	ClassLinked CampaignClass = "linked"
)

// CampaignCounter counts campaign marks fleet-wide. Observe records that
// room (a keyed pseudonym) carried the sightings at time at, and returns
// each sighting's counts including this room, in the order given. One
// call is one round trip; it honours ctx, and an error means no counts
// (the review goes on without campaign signals). Errors are wrapped with
// the adapter's prefix.
type CampaignCounter interface {
	Observe(ctx context.Context, room string, sightings []CampaignSighting, at time.Time) ([]CampaignCount, error)
}

// Standing sums the history lines of one role (a room's participants in
// that role, usually the one account behind a mark) into a standing;
// Verified is left to the caller.
func (h HistorySeen) Standing(role SenderRole) SenderStanding {
	var s SenderStanding
	for _, l := range h.Lines {
		switch {
		case l.Role != role:
		case l.Overturned && l.Label != LabelClean:
			s.OverturnedRooms += l.Rooms
		case l.Label == LabelClean && !l.Overturned:
			s.CleanRooms += l.Rooms
		default:
			// A standing flag, or a clean verdict a moderator overturned.
			s.FlaggedRooms += l.Rooms
		}
	}
	return s
}

// CampaignJoinRow is one recorded mark (a verdict_campaigns row other than
// a repeat sender's) as the campaign join reads it: the verdict that
// recorded it, with the verdict's subjects.
type CampaignJoinRow struct {
	VerdictID uint64
	Kind      CampaignKind
	Mark      string
	Class     CampaignClass
	// Senders is the mark's fleet-wide senders when the review counted it.
	Senders int
	// Subjects are the verdict's subjects (the same on each of its rows).
	Subjects []string
	// RoomID, WindowStart and WindowEnd are the verdict's window, Label
	// and RunID its label and run (the same on each of its rows): what a
	// campaign re-review of a linked room needs.
	RoomID      string
	WindowStart time.Time
	WindowEnd   time.Time
	Label       Label
	RunID       string
}

// CampaignLink is one sighting the join links to its mark's campaign.
type CampaignLink struct {
	VerdictID uint64
	Kind      CampaignKind
	Mark      string
}

// CampaignJoin is what one run of the campaign join decided: each mark of
// a campaign with its campaign's id (the smallest campaign-signal mark of
// the campaign), and the sightings to link.
type CampaignJoin struct {
	// At is when the run started: memberships not renewed by it go.
	At      time.Time
	Members map[string]string
	Links   []CampaignLink
}

// CampaignJoins is the store the campaign join reads and writes.
// JoinRows returns the recorded marks of current verdicts decided at or
// after since, newest first, at most limit, repeat senders' left out.
// SaveJoin makes the campaign memberships exactly j.Members (a mark no
// longer in a campaign leaves it) and turns j.Links' sightings into
// linked rows, returning how many it linked (a sighting linked already or
// gone since is not counted). Both honour ctx; errors carry the
// adapter's prefix.
type CampaignJoins interface {
	JoinRows(ctx context.Context, since time.Time, limit int) ([]CampaignJoinRow, error)
	SaveJoin(ctx context.Context, j CampaignJoin) (linked int, err error)
}

// CampaignReReviewRunPrefix begins the run id of a campaign re-review's
// verdict: the campaign join re-reviews no room twice.
const CampaignReReviewRunPrefix = "campaign:"

// CampaignReReviewer re-reviews one room's window with the campaign
// signal, as source campaign (SourceCampaign: an old chat, which takes no
// protective action beyond escalate), saved as a new revision of the
// window's verdict under a run id beginning CampaignReReviewRunPrefix. It
// returns the new revision's label, or an error when the review failed or
// was not saved. It honours ctx.
type CampaignReReviewer interface {
	ReReviewCampaign(ctx context.Context, roomID string, windowStart, windowEnd time.Time) (Label, error)
}
