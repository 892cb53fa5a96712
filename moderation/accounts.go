package moderation

import (
	"context"
	"errors"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// MaxAccountLimit bounds a page of an account's or a campaign's verdicts.
const MaxAccountLimit = 200

// MaxMarks bounds the campaign marks one account or verdict lists.
const MaxMarks = 100

// Newest is the moderator decision in force on a verdict: the zero value
// when none was made.
type Newest struct {
	// Decision is DecisionConfirm or DecisionOverturn ("" when none).
	Decision string
	// Label is the label the moderator decided.
	Label pipeline.Label
}

// AccountVerdict is one verdict of a room the account took part in, with
// the decision in force on it.
type AccountVerdict struct {
	VerdictID uint64
	RoomID    string
	// Role is the side the account was on in that room.
	Role pipeline.SenderRole
	// Subject is true when the verdict names the account as a subject
	// (its evidence is the account's messages); false when the account
	// only took part.
	Subject   bool
	Label     pipeline.Label
	Category  pipeline.Category
	DecidedAt time.Time
	Newest    Newest
}

// AccountPage is one page of an account's verdicts.
type AccountPage struct {
	Items []AccountVerdict
	// Next is the cursor of the following page, "" on the last page.
	Next string
}

// CampaignMark is one campaign signal (a mark a verdict carried) as a list
// of marks shows it.
type CampaignMark struct {
	// Kind is "script" or "contact"; Mark the keyed HMAC naming it.
	Kind, Mark string
	// Rooms and Senders are the fleet-wide distinct rooms and senders the
	// review saw with the mark (its newest row's count).
	Rooms, Senders int
	// Here is the number of distinct rooms of the list (an account's
	// verdicts) that carried the mark.
	Here int
	// LastAt is the newest verdict time carrying it.
	LastAt time.Time
	// RepeatSender says the mark is one account repeating its own
	// greeting or contact (every verdict of the list carrying it said
	// so), shown as a line, never as a campaign: its campaign view,
	// bulk take and bulk decision have no rooms.
	RepeatSender bool
}

// CampaignRoom is one verdict carrying a campaign mark, with what the
// campaign view shows and the bulk decision needs of it.
type CampaignRoom struct {
	VerdictID uint64
	Key       pipeline.ReviewKey
	Kind      string
	// MessageID is the room's first message carrying the mark.
	MessageID string
	Label     pipeline.Label
	Category  pipeline.Category
	Action    pipeline.Action
	DecidedAt time.Time
	// TakenBy and TakenActiveAt are the item's take ("" when none);
	// whether it went stale is the console's to judge.
	TakenBy       string
	TakenActiveAt time.Time
	Newest        Newest
}

// CampaignPage is one page of a campaign's rooms.
type CampaignPage struct {
	Items []CampaignRoom
	// Next is the cursor of the following page, "" on the last page.
	Next string
}

// ErrBadMark is wrapped when a mark is not one a campaign can have: 1 to
// 40 bytes.
var ErrBadMark = errors.New("a campaign mark is 1 to 40 bytes")

// Accounts is the account and campaign views: every verdict about one
// sender, the account history the pipeline weighs, the campaign marks
// verdicts carried and every verdict carrying one mark. Long lists are
// paged newest first (by the verdict's time, then id) with cursors, so a
// page costs the same at any depth. Every method only reads, is safe for
// concurrent use and returns an error wrapping ctx's when ctx ends first.
type Accounts interface {
	pipeline.AccountHistory
	// AccountVerdicts returns one page of the verdicts of the rooms
	// senderID took part in, each marked when it names senderID as a
	// subject, newest first, at most limit (1..MaxAccountLimit), after
	// cursor ("" for the first page, else an AccountPage.Next of the same
	// sender). A bad cursor wraps ErrBadCursor; a bad limit is an error.
	AccountVerdicts(ctx context.Context, senderID, cursor string, limit int) (AccountPage, error)
	// AccountCampaigns returns the campaign marks the verdicts naming
	// senderID as a subject carried, the most recent first, at most
	// MaxMarks.
	AccountCampaigns(ctx context.Context, senderID string) ([]CampaignMark, error)
	// VerdictCampaigns returns the campaign marks verdictID carried (Here
	// is 1 for each), by kind then mark, at most MaxMarks.
	VerdictCampaigns(ctx context.Context, verdictID uint64) ([]CampaignMark, error)
	// CampaignRooms returns one page of the verdicts carrying mark, newest
	// first, at most limit (1..MaxAccountLimit), after cursor ("" or a
	// CampaignPage.Next of the same mark), each with its take and the
	// decision in force. A bad mark wraps ErrBadMark, a bad cursor
	// ErrBadCursor; a bad limit is an error.
	CampaignRooms(ctx context.Context, mark, cursor string, limit int) (CampaignPage, error)
}
