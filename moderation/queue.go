package moderation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// QueueFilter selects the verdicts of the review queue: current revisions
// only (a re-reviewed window shows its newest verdict). The zero value is
// the default queue: done verdicts labelled abusive or suspicious that no
// moderator has decided yet, DefaultQueueLimit a page.
type QueueFilter struct {
	// Status of the verdicts (default done). Verdicts other than done carry
	// no label, so Labels is ignored for them.
	Status pipeline.Status
	// Labels to show, in queue order (default abusive, then suspicious).
	Labels []pipeline.Label
	// Category, when set, keeps only verdicts of that category.
	Category pipeline.Category
	// MinSeverity, when positive, keeps verdicts of at least that severity.
	MinSeverity int
	// From and To, when set, keep verdicts whose window starts in
	// [From, To).
	From, To time.Time
	// RunID, when set, keeps the verdicts of one batch run.
	RunID string
	// IncludeDecided also lists verdicts a moderator has decided on
	// (QueueItem.Decided says which).
	IncludeDecided bool
	// TakenBy, when set, keeps only the items that moderator holds (a
	// moderator's "my items"; whether a take is stale is the console's to
	// judge).
	TakenBy string
	// Limit is the page size (default DefaultQueueLimit, at most
	// MaxQueueLimit).
	Limit int
}

// MaxQueueLimit bounds a queue page.
const MaxQueueLimit = 500

// DefaultQueueLimit is the page size when the filter does not say.
const DefaultQueueLimit = 50

// QueueItem is one verdict of the review queue.
type QueueItem struct {
	// ID is the verdict's row id; decisions and takes refer to it.
	ID         uint64
	Key        pipeline.ReviewKey
	RunID      string
	Status     pipeline.Status
	Label      pipeline.Label
	Category   pipeline.Category
	Severity   int
	Confidence float64
	Action     pipeline.Action
	Rationale  string
	// Snippet is the first evidence quote the extract stage found, as
	// stored (masked by the worker); "" when there is none.
	Snippet          string
	EarlyExit        bool
	InjectionFlagged bool
	FinishedAt       time.Time
	// NewestMessageAt is the sent_at of the window's newest message (zero
	// when unknown): the item's freshness is FinishedAt minus it.
	NewestMessageAt time.Time
	// Decided is true when a moderator has decided on the verdict (only
	// possible with QueueFilter.IncludeDecided).
	Decided bool
	// TakenBy is the moderator holding the item ("" when nobody does) and
	// TakenActiveAt their last activity on it; whether the take is stale
	// is the console's to judge (its --take-timeout).
	TakenBy       string
	TakenActiveAt time.Time
	// Audit is true for an audit item (Queue.ListAudit): a sampled clean
	// verdict shown so that a moderator confirms or overturns it.
	Audit bool
}

// QueuePage is one page of the review queue.
type QueuePage struct {
	Items []QueueItem
	// Next is the cursor of the following page, "" on the last page.
	Next string
}

// QueueCounts is the size of the open queue (done verdicts labelled abusive
// or suspicious that no moderator has decided) by category and by how long
// its items have waited, for the queue page's header.
type QueueCounts struct {
	// ByCategory maps each category with open items to their number.
	ByCategory map[pipeline.Category]int
	// Under1h, Under24h and Older count the items that entered the queue
	// (their verdict finished) less than an hour, less than a day, and a
	// day or more before now.
	Under1h, Under24h, Older int
}

// Total is the number of open items.
func (c QueueCounts) Total() int { return c.Under1h + c.Under24h + c.Older }

// ErrBadCursor is wrapped by every problem with a page cursor (the queue's,
// an account's, a campaign's): the caller asked for a page that is not there.
var ErrBadCursor = errors.New("bad cursor")

// Queue is the review queue as moderators read it. Every method only
// reads, is safe for concurrent use, and returns an error wrapping ctx's
// when ctx ends first.
type Queue interface {
	// ListQueue returns one page of the queue under f, ordered by label in
	// the filter's order, then severity descending, then the newest window
	// first, then id descending, starting after cursor ("" for the first
	// page; otherwise a QueuePage.Next read with the same filter). Rows
	// saved between pages neither repeat nor shift a page. An invalid
	// filter is an error naming every problem; a malformed cursor, or one
	// read with another filter, wraps ErrBadCursor.
	ListQueue(ctx context.Context, f QueueFilter, cursor string) (QueuePage, error)
	// ListAudit returns up to limit undecided audit items at share (0..1),
	// in bucket order (random with respect to the chats, stable between
	// reads; IsAuditItem), each with Audit set. A share of 0 or a limit
	// below 1 reads nothing.
	ListAudit(ctx context.Context, share float64, limit int) ([]QueueItem, error)
	// CountQueue returns the open queue's counts at now.
	CountQueue(ctx context.Context, now time.Time) (QueueCounts, error)
}

// queueStatuses and queueLabels are the statuses and labels a filter may
// name.
var (
	queueStatuses = []pipeline.Status{pipeline.StatusDone, pipeline.StatusExpired, pipeline.StatusStopped, pipeline.StatusFailed}
	queueLabels   = []pipeline.Label{pipeline.LabelAbusive, pipeline.LabelSuspicious, pipeline.LabelClean}
)

// Normalize returns f with its defaults filled in (status done, the
// labels abusive then suspicious, DefaultQueueLimit) and an error naming
// every problem with it.
func (f QueueFilter) Normalize() (QueueFilter, error) {
	var errs []error
	if f.Status == "" {
		f.Status = pipeline.StatusDone
	}
	if !slices.Contains(queueStatuses, f.Status) {
		errs = append(errs, fmt.Errorf("unknown status %q", f.Status))
	}
	switch {
	case f.Status != pipeline.StatusDone:
		f.Labels = []pipeline.Label{""}
	case len(f.Labels) == 0:
		f.Labels = []pipeline.Label{pipeline.LabelAbusive, pipeline.LabelSuspicious}
	default:
		f.Labels = slices.Clone(f.Labels)
		for i, l := range f.Labels {
			if !slices.Contains(queueLabels, l) {
				errs = append(errs, fmt.Errorf("unknown label %q", l))
			}
			if slices.Contains(f.Labels[:i], l) {
				errs = append(errs, fmt.Errorf("label %q given twice", l))
			}
		}
	}
	if f.Category != "" && !f.Category.Valid() {
		errs = append(errs, fmt.Errorf("unknown category %q", f.Category))
	}
	if f.MinSeverity < 0 || f.MinSeverity > 5 {
		errs = append(errs, fmt.Errorf("min severity %d is not in 0..5", f.MinSeverity))
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		errs = append(errs, errors.New("from must be before to"))
	}
	if len(f.RunID) > 128 || len(f.TakenBy) > 128 {
		errs = append(errs, errors.New("run id or taker is longer than 128 bytes"))
	}
	if f.Limit == 0 {
		f.Limit = DefaultQueueLimit
	}
	if f.Limit < 1 || f.Limit > MaxQueueLimit {
		errs = append(errs, fmt.Errorf("limit %d is not in 1..%d", f.Limit, MaxQueueLimit))
	}
	return f, errors.Join(errs...)
}
