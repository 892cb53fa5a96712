package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// HistoryAccount is one participant of the room under review whose
// earlier verdicts are asked about: a sender id and the role it has in
// this room (an account can be a buyer in one room and a seller in
// another; its history counts every room it was a subject in).
type HistoryAccount struct {
	SenderID string
	Role     SenderRole
}

// HistoryQuery asks for the account history of a room's participants.
type HistoryQuery struct {
	// Accounts are the participants, at most MaxHistoryAccounts, each
	// with a buyer or seller role.
	Accounts []HistoryAccount
	// ExcludeRoom is the room under review: its own earlier verdicts
	// (real-time windows review a room many times) are not history, or
	// a room would count itself.
	ExcludeRoom string
	// Since is the start of the lookback window (decided_at >= Since).
	Since time.Time
}

// HistoryCount is one line of an account history: the distinct rooms,
// other than the one under review, in which earlier verdicts with this
// label and category were about any participant with Role. Overturned
// counts the rooms whose verdict a moderator overturned (the newest
// decision stands); those rooms are not in the line without it, so
// abusive counts never include them.
type HistoryCount struct {
	Role       SenderRole `json:"role"`
	Label      Label      `json:"label"`
	Category   Category   `json:"category"`
	Overturned bool       `json:"overturned,omitempty"`
	Rooms      int        `json:"rooms"`
}

// MaxHistoryAccounts bounds the accounts one history lookup asks about: a
// room's participants, with room to spare.
const MaxHistoryAccounts = 16

// MaxHistoryLines bounds the lines one history answer holds (roles ×
// labels × categories × overturned is far below it).
const MaxHistoryLines = 64

// AccountHistory summarises earlier verdicts about a room's participants
// (their subjects) in one bounded, indexed query. Rooms are counted, not
// verdicts: real-time windows review one room many times.
//
// AccountHistory returns the lines sorted by rooms, most first, at most
// MaxHistoryLines; none (nil) for no accounts. It fails for more than
// MaxHistoryAccounts accounts or a role other than buyer or seller, and
// with ctx's error when ctx ends first; errors carry the adapter's prefix.
type AccountHistory interface {
	AccountHistory(ctx context.Context, q HistoryQuery) ([]HistoryCount, error)
}

// Validate reports every problem with a query at once: too many
// accounts, an empty or over-long sender id, a role that is neither buyer
// nor seller.
func (q HistoryQuery) Validate() error {
	var errs []error
	if len(q.Accounts) > MaxHistoryAccounts {
		errs = append(errs, fmt.Errorf("%d accounts, at most %d", len(q.Accounts), MaxHistoryAccounts))
	}
	for _, a := range q.Accounts {
		if a.SenderID == "" || len(a.SenderID) > 128 {
			errs = append(errs, errors.New("a sender id is empty or longer than 128 bytes"))
			break
		}
	}
	for _, a := range q.Accounts {
		if a.Role != RoleBuyer && a.Role != RoleSeller {
			errs = append(errs, fmt.Errorf("role %q is neither buyer nor seller", a.Role))
			break
		}
	}
	return errors.Join(errs...)
}

// HistoryStatus says how a review's account-history lookup ended.
type HistoryStatus string

// The history lookup outcomes a verdict records.
const (
	// HistoryOK: the lines are the history (none when there is none).
	HistoryOK HistoryStatus = "ok"
	// HistoryTimeout and HistoryError: the lookup did not answer in time
	// or failed; the review went on without history.
	HistoryTimeout HistoryStatus = "timeout"
	HistoryError   HistoryStatus = "error"
)

// HistorySeen is the account history one review was given, recorded with
// its verdict so that a moderator and an analyst can see what the models
// saw. It holds roles and counts only, never a sender id.
type HistorySeen struct {
	Status HistoryStatus `json:"status"`
	// Days is the lookback window.
	Days int `json:"days"`
	// Lines are the history, most rooms first, at most MaxHistoryLines.
	Lines []HistoryCount `json:"lines"`
	// AccountsLeftOut counts participants beyond MaxHistoryAccounts that
	// were not asked about.
	AccountsLeftOut int `json:"accounts_left_out,omitempty"`
}

// HistoryOutputKey is the member of the first stage's stored output that
// records the account history the review was given (review's
// recordHistory writes it; RecordedHistory reads it back).
const HistoryOutputKey = "account_history"

// RecordedHistory is the account history a verdict's stages were shown,
// read from the first stage's stored output: nil when there is none (the
// history was off, no stage ran, the room had no message, or the verdict
// predates it). It reads stored verdicts too, so a verdict event sent
// again from MySQL carries the same history as the first copy.
func RecordedHistory(stages []StageResult) *HistorySeen {
	if len(stages) == 0 || len(stages[0].Output) == 0 {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(stages[0].Output, &obj) != nil {
		return nil
	}
	raw, ok := obj[HistoryOutputKey]
	if !ok {
		return nil
	}
	var seen HistorySeen
	if json.Unmarshal(raw, &seen) != nil || seen.Status == "" {
		return nil
	}
	return &seen
}

// checkHistorySeen bounds a verdict event's account history: a known
// status, a plausible window, at most MaxHistoryLines lines of a buyer or
// seller role, a known label and category and no negative count. Its
// fields are roles and counts only, so nothing in it can carry an id.
func checkHistorySeen(h *HistorySeen) []string {
	if h == nil {
		return nil
	}
	var probs []string
	switch h.Status {
	case HistoryOK, HistoryTimeout, HistoryError:
	default:
		probs = append(probs, fmt.Sprintf("payload.account_history.status %q is unknown", clip(string(h.Status))))
	}
	if h.Days < 0 || h.Days > 3660 || h.AccountsLeftOut < 0 {
		probs = append(probs, "payload.account_history has a negative or implausible days or accounts_left_out")
	}
	if len(h.Lines) > MaxHistoryLines {
		return append(probs, fmt.Sprintf("payload.account_history has %d lines, at most %d", len(h.Lines), MaxHistoryLines))
	}
	for _, l := range h.Lines {
		switch {
		case l.Role != RoleBuyer && l.Role != RoleSeller:
			return append(probs, fmt.Sprintf("payload.account_history has a role %q that is neither buyer nor seller", clip(string(l.Role))))
		case l.Rooms < 0:
			return append(probs, "payload.account_history holds a negative count")
		}
		if p := checkLabel("payload.account_history label", l.Label, true); p != nil {
			return append(probs, p...)
		}
		if p := checkCategory("payload.account_history category", l.Category); p != nil {
			return append(probs, p...)
		}
	}
	return probs
}
