package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.ReviewClaims = (*Claims)(nil)

// Claims is the review_claims table: the cross-pod claim a worker takes
// before a review's first model call. It is safe for concurrent use.
//
// Expiries are written from the caller's clock, not the database's: pods'
// clocks are NTP-synchronised far below a claim TTL, and tests can then
// move time instead of sleeping.
type Claims struct {
	db  *sql.DB
	now func() time.Time
}

// NewClaims returns the claim table over db (opened by OpenDB) on the clock
// now (time.Now when nil).
func NewClaims(db *sql.DB, now func() time.Time) *Claims {
	if now == nil {
		now = time.Now
	}
	return &Claims{db: db, now: now}
}

// Claim implements pipeline.ReviewClaims in three single-row statements,
// each atomic under the row's lock: create the claim if there is none, else
// take it if it is expired or ours (claimed_at is set before owner: MySQL
// applies SET assignments left to right), then read who holds it. Two claimers
// racing for a free or expired claim cannot both win: the loser's UPDATE
// sees the winner's new expiry. Errors are *pipeline.RetryableError.
func (c *Claims) Claim(ctx context.Context, k pipeline.ReviewKey, owner string, ttl time.Duration) (pipeline.Claim, error) {
	now := dbTime(c.now())
	exp := now.Add(ttl)
	ws, we := dbTime(k.WindowStart), dbTime(k.WindowEnd)
	_, err := c.db.ExecContext(ctx, `INSERT IGNORE INTO review_claims
		(room_id, window_start, window_end, pipeline_version, owner, expires_at, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.RoomID, ws, we, k.PipelineVersion, owner, exp, now)
	if err == nil {
		_, err = c.db.ExecContext(ctx, `UPDATE review_claims SET claimed_at = IF(owner = ?, claimed_at, ?),
			owner = ?, expires_at = ?
			WHERE room_id = ? AND window_start = ? AND window_end = ? AND pipeline_version = ?
			AND (owner = ? OR expires_at <= ?)`,
			owner, now, owner, exp, k.RoomID, ws, we, k.PipelineVersion, owner, now)
	}
	var got pipeline.Claim
	if err == nil {
		err = c.db.QueryRowContext(ctx, `SELECT owner, expires_at FROM review_claims
			WHERE room_id = ? AND window_start = ? AND window_end = ? AND pipeline_version = ?`,
			k.RoomID, ws, we, k.PipelineVersion).Scan(&got.Owner, &got.Expires)
		if errors.Is(err, sql.ErrNoRows) {
			// Released between our statements: free again, try once more
			// on the next call.
			err = errors.New("claim released while being taken")
		}
	}
	if err != nil {
		return pipeline.Claim{}, fmt.Errorf("mysql: claim review: %w", classify(err))
	}
	got.Expires = got.Expires.UTC()
	got.Held = got.Owner == owner
	return got, nil
}

// Release implements pipeline.ReviewClaims: it deletes the row only if
// owner still holds it. Errors are *pipeline.RetryableError; an unreleased
// claim only delays a duplicate delivery until it expires.
func (c *Claims) Release(ctx context.Context, k pipeline.ReviewKey, owner string) error {
	_, err := c.db.ExecContext(ctx, `DELETE FROM review_claims
		WHERE room_id = ? AND window_start = ? AND window_end = ? AND pipeline_version = ? AND owner = ?`,
		k.RoomID, dbTime(k.WindowStart), dbTime(k.WindowEnd), k.PipelineVersion, owner)
	if err != nil {
		return fmt.Errorf("mysql: release review claim: %w", classify(err))
	}
	return nil
}
