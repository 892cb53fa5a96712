package pipeline

import (
	"context"
	"time"
)

// Claim is the state of a review's claim after a Claim call: who holds it
// and until when. Held is true when the caller is the holder.
type Claim struct {
	Held    bool
	Owner   string
	Expires time.Time
}

// ReviewClaims is the cross-process claim on a review, taken before its
// first model call so that a duplicate delivery on another pod waits for the
// holder (or acknowledges the verdict it wrote) instead of paying for the
// models a second time. A claim expires: a holder that dies (SIGKILL, a lost
// lease) blocks the review for at most the claim's TTL, after which anyone
// may take it over. Owners are opaque strings unique per job attempt.
type ReviewClaims interface {
	// Claim takes the review for owner until now+ttl when it is free, expired
	// or already owner's (a renewal), and reports the claim as it stands
	// after the call: Held false names the other holder and its expiry. An
	// error means the state is unknown (treat it as a dependency failure);
	// a cancelled ctx ends the call with ctx's error.
	Claim(ctx context.Context, k ReviewKey, owner string, ttl time.Duration) (Claim, error)
	// Release drops owner's claim on the review; releasing a claim owner
	// does not hold (expired and taken over) is not an error.
	Release(ctx context.Context, k ReviewKey, owner string) error
}

// ReleasingSaver is a VerdictStore that keeps the review claims in its own
// database, so that it can release a review's claim in the transaction that
// saves the review's verdict: one statement and one commit fewer per review
// than Save followed by ReviewClaims.Release, and at the worker's concurrency
// round trips are most of a job's time outside the models.
type ReleasingSaver interface {
	// SaveReleasing is Save, and in the same transaction it drops the
	// claim on v.Key if owner still holds it (a claim taken over by
	// another owner is left alone), whether or not the done-guard kept
	// the stored verdict. committed and errors are Save's; after an error
	// neither the verdict nor the claim has changed.
	SaveReleasing(ctx context.Context, v Verdict, owner string) (committed bool, err error)
}
