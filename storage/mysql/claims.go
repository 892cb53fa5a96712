package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
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
	clk clock.Clock
}

// NewClaims returns the claim table over db (opened by OpenDB) on the clock
// c (nil: the wall clock).
func NewClaims(db *sql.DB, c clock.Clock) *Claims {
	return &Claims{db: db, clk: clock.Or(c)}
}

// Claim implements pipeline.ReviewClaims. One upsert, atomic under the
// row's lock, creates the claim when there is none and takes it when it is
// expired or already ours; its affected-row count says whether it did (1
// inserted, 2 updated), so the common case is one round trip. Only when the
// row was left as it was (0: another live holder, or a renewal within the
// same microsecond) is the claim read back to name its holder. Two claimers
// racing for a free or expired claim cannot both win: the loser's upsert
// sees the winner's new expiry. Errors are *pipeline.RetryableError.
//
// The ON DUPLICATE KEY UPDATE assignments are applied left to right and a
// later one reads the columns an earlier one set: claimed_at and owner are
// decided on the old owner and expiry, then expires_at on the new owner.
// VALUES() rather than MySQL 8's row alias keeps it valid on MariaDB.
func (c *Claims) Claim(ctx context.Context, k pipeline.ReviewKey, owner string, ttl time.Duration) (pipeline.Claim, error) {
	now := dbTime(c.clk.Now())
	exp := dbTime(now.Add(ttl))
	ws, we := dbTime(k.WindowStart), dbTime(k.WindowEnd)
	res, err := c.db.ExecContext(ctx, `INSERT INTO review_claims
		(room_id, window_start, window_end, pipeline_version, owner, expires_at, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE
		claimed_at = IF(owner <> VALUES(owner) AND expires_at <= VALUES(claimed_at), VALUES(claimed_at), claimed_at),
		owner = IF(expires_at <= VALUES(claimed_at), VALUES(owner), owner),
		expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)`,
		k.RoomID, ws, we, k.PipelineVersion, owner, exp, now)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err == nil && n > 0 {
		return pipeline.Claim{Held: true, Owner: owner, Expires: exp.UTC()}, nil
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
	if err := releaseClaim(ctx, c.db, k, owner); err != nil {
		return classify(err)
	}
	return nil
}

// releaseClaim deletes owner's claim on k, alone or inside a verdict's
// save (Store.SaveReleasing).
func releaseClaim(ctx context.Context, db execer, k pipeline.ReviewKey, owner string) error {
	_, err := db.ExecContext(ctx, `DELETE FROM review_claims
		WHERE room_id = ? AND window_start = ? AND window_end = ? AND pipeline_version = ? AND owner = ?`,
		k.RoomID, dbTime(k.WindowStart), dbTime(k.WindowEnd), k.PipelineVersion, owner)
	if err != nil {
		return fmt.Errorf("mysql: release review claim: %w", err)
	}
	return nil
}
