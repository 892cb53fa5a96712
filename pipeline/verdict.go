package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Label is the judge's overall finding for a review window.
type Label string

// The verdict labels.
const (
	LabelAbusive    Label = "abusive"
	LabelSuspicious Label = "suspicious"
	LabelClean      Label = "clean"
)

// Category is the kind of abuse a verdict or a piece of evidence names.
type Category string

// The abuse categories of DESIGN.md; CategoryClean when there is none.
const (
	CategoryPhishingLink    Category = "phishing_link"
	CategoryOffPlatform     Category = "off_platform"
	CategoryExternalPayment Category = "external_payment"
	CategoryTriangleFraud   Category = "triangle_fraud"
	CategoryFakeProof       Category = "fake_proof"
	CategoryPersonalInfo    Category = "personal_info"
	CategoryHarassment      Category = "harassment"
	CategoryProhibitedItem  Category = "prohibited_item"
	CategorySpam            Category = "spam"
	CategoryClean           Category = "clean"
)

// AbuseCategories lists every category except CategoryClean, in a fixed
// order used by schemas, prompts and reports.
var AbuseCategories = []Category{
	CategoryPhishingLink, CategoryOffPlatform, CategoryExternalPayment, CategoryTriangleFraud,
	CategoryFakeProof, CategoryPersonalInfo, CategoryHarassment, CategoryProhibitedItem, CategorySpam,
}

// Valid reports whether c is a known category (including clean).
func (c Category) Valid() bool {
	if c == CategoryClean {
		return true
	}
	for _, k := range AbuseCategories {
		if c == k {
			return true
		}
	}
	return false
}

// Action is the moderation action the judge recommends.
type Action string

// The recommended actions.
const (
	ActionNone     Action = "none"
	ActionWarn     Action = "warn"
	ActionRestrict Action = "restrict"
	ActionBan      Action = "ban"
)

// Status is the lifecycle outcome stored with a verdict row.
type Status string

// The verdict statuses.
const (
	StatusDone    Status = "done"
	StatusExpired Status = "expired"
	StatusStopped Status = "stopped"
	StatusFailed  Status = "failed"
)

// Pool names which model pool answered a stage.
type Pool string

// The model pools.
const (
	PoolPrimary  Pool = "primary"
	PoolFallback Pool = "fallback"
)

// StageName names one of the four pipeline stages.
type StageName string

// The pipeline stages, in the order they run.
const (
	StageTriage  StageName = "triage"
	StageExtract StageName = "extract"
	StageVision  StageName = "vision"
	StageJudge   StageName = "judge"
)

// Stages lists the stages in the order they run.
var Stages = []StageName{StageTriage, StageExtract, StageVision, StageJudge}

// StageResult records one stage of one review: who answered, how long it
// took and what it said (the validated structured output, never chat text).
type StageResult struct {
	Stage     StageName     `json:"stage"`
	Pool      Pool          `json:"pool"`
	Model     string        `json:"model"`
	Attempts  int           `json:"attempts"`
	TTFT      time.Duration `json:"ttft"`
	Latency   time.Duration `json:"latency"`
	TokensIn  int           `json:"tokens_in"`
	TokensOut int           `json:"tokens_out"`
	// TokensCached are prompt tokens the server served from its prefix
	// cache (part of TokensIn); CostUSD is the stage's cost at the
	// answering pool's prices.
	TokensCached int             `json:"tokens_cached,omitempty"`
	CostUSD      float64         `json:"cost_usd,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
	Error        string          `json:"error,omitempty"`
}

// Verdict is the outcome of one review: the row the verdict store keeps
// under Key. Only a StatusDone verdict carries a meaningful label.
type Verdict struct {
	Key              ReviewKey
	RunID            string
	Status           Status
	Label            Label
	Category         Category
	Severity         int
	Confidence       float64
	Action           Action
	Rationale        string
	EvidenceIDs      []string
	EarlyExit        bool
	InjectionFlagged bool
	// OffenderRole is the judge's answer to whom the verdict is about
	// (buyer or seller; empty when no one, and on verdicts from before the
	// judge was asked).
	OffenderRole SenderRole
	// Subjects are the sender ids the verdict is about: the senders with
	// OffenderRole whose messages are among EvidenceIDs, sorted, at most
	// MaxSubjects. Never the victim; empty for a clean verdict. They are
	// raw ids: they go to MySQL, and to the lake only as keyed pseudonyms.
	Subjects []string
	// Participants are the room's buyer and seller accounts among the
	// messages reviewed (sender id and side), the most active first, at
	// most MaxParticipants: every account that took part, whether or not
	// the verdict is about it, so that an account's rooms can be listed
	// in full. Raw ids, for MySQL only: they never go to the lake. Empty
	// on verdicts from before they were recorded.
	Participants []HistoryAccount
	// Campaigns are the campaign signals the review was given: marks of
	// the room's risky messages seen fleet-wide in many rooms from few
	// senders, with their counts when counted (at most MaxCampaigns, most
	// rooms first). Keyed pseudonyms only; empty when counting was off,
	// failed or found none, and on every verdict from before it existed.
	Campaigns []CampaignCount
	// Sightings are the marks the review counted that were not campaign
	// signals (below the threshold: a script's first rooms), with their
	// counts, at most MaxSightings: when one of them later joins a
	// campaign, the campaign join links this room to it (retro-linking).
	// Keyed pseudonyms only; never shown to the stages.
	Sightings []CampaignCount
	// Aliases pair the legacy form of each keyed pseudonym the verdict
	// carries (its subjects' and its campaign marks') with the current
	// one, while the reviewer computes the legacy forms
	// (--legacy-pseudonyms): the store records them and re-keys rows
	// stored in the legacy form. Not read back.
	Aliases []PseudonymAlias
	// Error is the last error of a failed review or the reason of a stopped
	// one; empty otherwise.
	Error string
	// Attempts is how many times the review message was received.
	Attempts    int
	Stages      []StageResult
	PublishedAt time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	// OldestMessageAt and NewestMessageAt are the sent_at of the oldest
	// and the newest message of the window the review ran on (MessageSpan),
	// what its freshness is measured from; zero when unknown (no message,
	// a verdict that never read the chat, or one saved before they were
	// kept).
	OldestMessageAt time.Time
	NewestMessageAt time.Time
	// Outbox are the messages owed because of this verdict (its lake
	// event): a store that keeps an outbox (OutboxStore) writes them in
	// the verdict's own transaction when Save commits v, and writes none
	// when the done-guard keeps the stored verdict, so that nothing
	// tells others of a save that did not happen. Not read back by Get.
	Outbox []OutboxMessage
	// Revision is the verdict's revision of its key, as the store numbers
	// them (1 for the first verdict of a key, 2 for the first explicit
	// re-review, …); 0 on a verdict not read from a store. A review from a
	// queue saves over the current revision; only VerdictReviser.Revise
	// writes a new one.
	Revision int
	// SupersededAt is when a later revision replaced this one; zero while
	// it is the current revision of its key.
	SupersededAt time.Time
}

// Freshness is how long after the window's newest message the verdict
// was finished (its FinishedAt, stamped just before the save): the
// real-time figure. ok is false when either time is unknown. A producer
// clock ahead of the worker's can make it negative; it is reported as 0.
func (v Verdict) Freshness() (d time.Duration, ok bool) {
	return sinceMessage(v.NewestMessageAt, v.FinishedAt)
}

// FreshnessOldest is Freshness measured from the window's oldest message:
// how long the longest-waiting message of the window waited.
func (v Verdict) FreshnessOldest() (d time.Duration, ok bool) {
	return sinceMessage(v.OldestMessageAt, v.FinishedAt)
}

func sinceMessage(sent, done time.Time) (time.Duration, bool) {
	if sent.IsZero() || done.IsZero() {
		return 0, false
	}
	return max(done.Sub(sent), 0), true
}

// MessageSpan returns the sent_at of the oldest and the newest chat
// message in the half-open window [from, to), ignoring the notice a
// ChatSource appends for a trimmed history and anything outside the window
// (context from before it is not what the review was asked about). Both
// are zero when the window has no message.
func MessageSpan(msgs []ChatMessage, from, to time.Time) (oldest, newest time.Time) {
	for _, m := range msgs {
		if m.MessageID == TrimNoticeID || m.SentAt.IsZero() || m.SentAt.Before(from) || !m.SentAt.Before(to) {
			continue
		}
		if oldest.IsZero() || m.SentAt.Before(oldest) {
			oldest = m.SentAt
		}
		if newest.IsZero() || m.SentAt.After(newest) {
			newest = m.SentAt
		}
	}
	return oldest.UTC(), newest.UTC()
}

// MaxSubjects bounds a verdict's subjects: a room has two sides, and a
// side is rarely more than a handful of accounts.
const MaxSubjects = 8

// MaxParticipants bounds the accounts a verdict records as having taken
// part: a room's two sides, with room for a shared account or a few more.
const MaxParticipants = 16

// ErrVerdictNotFound is returned by VerdictStore.Get when no row has the key.
var ErrVerdictNotFound = errors.New("verdict not found")

// VerdictStore keeps verdicts and their stage results.
//
// Get returns ErrVerdictNotFound when no verdict has the key. Save writes
// the verdict and all its stage results atomically, replacing any earlier
// row with the same key (an upsert), so a redelivered review is harmless; a
// stored done verdict is never replaced by one that is not done (the
// done-guard). Save reports whether v is what the store holds after it:
// false, with a nil error, when the done-guard kept the stored verdict and
// nothing changed. Whatever tells others about a save (a verdict event)
// goes by that answer, so that it never contradicts the store; a store
// that is also an OutboxStore writes v.Outbox in the save's transaction
// under the same rule. Both honour
// ctx; errors are wrapped with the adapter's prefix, and committed is false
// with an error.
//
// A store that keeps revisions (VerdictReviser) reads and writes the
// current revision of the key: Get returns it with its Revision, and Save
// updates it in place (the idempotency key of a review from a queue stays
// the review key). Save keeps a stored done revision above 1 whatever v
// is: an explicit re-review stands against a late or redelivered review
// from a queue.
type VerdictStore interface {
	Get(ctx context.Context, key ReviewKey) (Verdict, error)
	Save(ctx context.Context, v Verdict) (committed bool, err error)
}

// VerdictReviser is a VerdictStore that keeps the history of a review key:
// an explicit re-review of a window (the console's on-demand review) writes
// a new revision instead of overwriting the verdict that moderators may
// already have decided on. Exactly one revision of a key is current.
type VerdictReviser interface {
	VerdictStore
	// Revise writes v as a new revision of v.Key and makes it current:
	// revision 1 when the key has none, else the current revision's number
	// plus one, the earlier one kept unchanged and marked superseded.
	// The done-guard holds here too: when v is not done and the current
	// revision is, nothing is written and committed is false. revision is
	// the number of the key's current revision after the call (0 with an
	// error). Concurrent calls for one key write distinct revisions. It
	// honours ctx; errors are wrapped with the adapter's prefix, and a
	// verdict the store cannot hold is a *PermanentError.
	Revise(ctx context.Context, v Verdict) (revision int, committed bool, err error)
	// Revisions returns every revision of key, oldest first, each with its
	// stage results, Revision and SupersededAt; an error wrapping
	// ErrVerdictNotFound when the key has none. It honours ctx.
	Revisions(ctx context.Context, key ReviewKey) ([]Verdict, error)
}

// PseudonymAlias is one keyed pseudonym in its legacy form (made before
// per-purpose keys: "hmac:", "mod-") and its current form ("hmac2:",
// "mod2-"), for the same raw value: what lets rows and lake events stored
// in the legacy form be matched after the change, since neither form can
// be recomputed from the other without the raw value.
type PseudonymAlias struct {
	// Purpose is what the pseudonym is of: AliasSubject, AliasCampaign or
	// AliasModerator.
	Purpose string
	Legacy  string
	Current string
}

// The purposes of a PseudonymAlias.
const (
	AliasSubject   = "subject"
	AliasCampaign  = "campaign"
	AliasModerator = "moderator"
)

// MaxAliases bounds a verdict's aliases: its subjects and campaign marks.
const MaxAliases = MaxSubjects + MaxCampaigns
