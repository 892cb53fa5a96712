package moderation

import (
	"context"

	"github.com/chatguard/chatguard/pipeline"
)

// Verdicts is what the console reads and writes of verdicts themselves:
// a verdict by the row id its pages link with, the id of a key, and the
// save of an on-demand review. Safe for concurrent use; every method
// returns an error wrapping ctx's when ctx ends first.
type Verdicts interface {
	// Revise is pipeline.VerdictReviser's: it stores an on-demand review
	// as a new revision of its key, so that the verdict moderators decided
	// on stays as they saw it, with v.Actions (the planner's) each rebound
	// to that revision (pipeline.ActionRecord.AtRevision); an action that
	// is not valid is a *pipeline.PermanentError and nothing is written.
	Revise(ctx context.Context, v pipeline.Verdict) (revision int, committed bool, err error)
	// VerdictByID returns the verdict with id with its stage results, or
	// an error wrapping pipeline.ErrVerdictNotFound.
	VerdictByID(ctx context.Context, id uint64) (pipeline.Verdict, error)
	// VerdictID returns the id of the verdict under key, or an error
	// wrapping pipeline.ErrVerdictNotFound.
	VerdictID(ctx context.Context, key pipeline.ReviewKey) (uint64, error)
	// Ping reports whether the store answers (the console's readiness).
	Ping(ctx context.Context) error
}

// Store is every port the console needs, as one store implements them
// (storage/mysql's Store; moderationtest's Memory).
type Store interface {
	Verdicts
	Queue
	Decisions
	Takes
	Accounts
	FeedbackOutbox
	ActionLog
	ActionHistory
}
