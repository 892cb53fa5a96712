package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// The outbox table (migration 00020): messages owed to a queue, written in
// the transaction of what owes them and sent by a relay (pipeline/outbox).

var _ pipeline.OutboxStore = (*Store)(nil)

// maxOutboxError bounds outbox.last_error (VARCHAR(500)).
const maxOutboxError = 500

// outboxAttr is a message attribute as the attributes column keeps it.
type outboxAttr struct {
	Type  pipeline.AttributeType `json:"type"`
	Value string                 `json:"value"`
}

// checkOutbox reports the first message of msgs that cannot be written,
// as a *pipeline.PermanentError.
func checkOutbox(msgs []pipeline.OutboxMessage) error {
	for _, m := range msgs {
		if err := m.Validate(); err != nil {
			return pipeline.Permanent(fmt.Errorf("outbox: %w", err))
		}
	}
	return nil
}

// insertOutbox writes msgs (checked by checkOutbox) available at at (the database's time when at is
// zero), keeping the row a destination already holds under the same
// event id. It runs on db, a *sql.DB or the transaction of what owes the
// messages.
func insertOutbox(ctx context.Context, db execer, at time.Time, msgs []pipeline.OutboxMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("INSERT INTO outbox (destination, event_id, payload, attributes, created_at, available_at) VALUES ")
	args := make([]any, 0, len(msgs)*6)
	when := "COALESCE(?, UTC_TIMESTAMP(6))"
	for i, m := range msgs {
		attrs, err := encodeAttributes(m.Attributes)
		if err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, " + when + ", " + when + ")")
		args = append(args, string(m.Destination), m.EventID, m.Body, attrs, nullTime(at), nullTime(at))
	}
	// The first copy of an event is the one that may have left already:
	// a second write of its id keeps it, sent or not.
	b.WriteString(" ON DUPLICATE KEY UPDATE id = id")
	if _, err := db.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("outbox: insert: %w", err)
	}
	return nil
}

func encodeAttributes(attrs map[string]pipeline.Attribute) (any, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	m := make(map[string]outboxAttr, len(attrs))
	for k, a := range attrs {
		m[k] = outboxAttr{Type: a.Type, Value: a.Value}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("attributes: %w", err)
	}
	return string(b), nil
}

func decodeAttributes(b []byte) (map[string]pipeline.Attribute, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var m map[string]outboxAttr
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("attributes: %w", err)
	}
	out := make(map[string]pipeline.Attribute, len(m))
	for k, a := range m {
		out[k] = pipeline.Attribute{Type: a.Type, Value: a.Value}
	}
	return out, nil
}

// Enqueue implements pipeline.OutboxStore.
func (s *Store) Enqueue(ctx context.Context, now time.Time, msgs []pipeline.OutboxMessage) error {
	if now.IsZero() {
		return pipeline.Permanent(errors.New("mysql: outbox: enqueue: no time"))
	}
	if err := checkOutbox(msgs); err != nil {
		return fmt.Errorf("mysql: enqueue: %w", err)
	}
	if err := insertOutbox(ctx, s.db, now, msgs); err != nil {
		return classify(fmt.Errorf("mysql: %w", err))
	}
	return nil
}

// outboxTx runs at READ COMMITTED, like the verdict's save: a claim takes
// no gap locks, so a save inserting a row never waits for a relay.
var outboxTx = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// Claim implements pipeline.OutboxStore. The pending end of
// ix_outbox_pending is walked in available_at order and stopped at max
// (FOR UPDATE SKIP LOCKED): only the rows taken are locked, and a second
// relay claiming at the same moment takes the next ones instead of
// waiting. The lease is written and the transaction committed before any
// send, so no lock or connection is held across a queue call.
func (s *Store) Claim(ctx context.Context, dests []pipeline.OutboxDestination, now time.Time, lease time.Duration, limit int) ([]pipeline.OutboxRow, error) {
	if limit < 1 || len(dests) == 0 || lease <= 0 {
		return nil, pipeline.Permanent(errors.New("mysql: outbox: claim: needs destinations, a positive lease and limit"))
	}
	tx, err := s.db.BeginTx(ctx, outboxTx)
	if err != nil {
		return nil, classify(fmt.Errorf("mysql: outbox: claim: begin: %w", err))
	}
	defer func() { _ = tx.Rollback() }()
	args := []any{dbTime(now)}
	for _, d := range dests {
		args = append(args, string(d))
	}
	args = append(args, limit)
	ids, err := queryIDs(ctx, tx, `SELECT id FROM outbox FORCE INDEX (ix_outbox_pending)
		WHERE sent_at IS NULL AND available_at <= ? AND destination IN (?`+strings.Repeat(", ?", len(dests)-1)+`)
		ORDER BY available_at LIMIT ? FOR UPDATE SKIP LOCKED`, args...)
	if err != nil {
		return nil, classify(err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	in := "(?" + strings.Repeat(", ?", len(ids)-1) + ")"
	if _, err := tx.ExecContext(ctx, "UPDATE outbox SET available_at = ?, attempts = attempts + 1 WHERE id IN "+in,
		append([]any{dbTime(now.Add(lease))}, ids...)...); err != nil {
		return nil, classify(fmt.Errorf("mysql: outbox: claim: lease: %w", err))
	}
	out, err := claimedRows(ctx, tx, in, ids)
	if err != nil {
		return nil, classify(err)
	}
	if err := tx.Commit(); err != nil {
		return nil, classify(fmt.Errorf("mysql: outbox: claim: commit: %w", err))
	}
	return out, nil
}

// queryIDs runs a query of one id column.
func queryIDs(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]any, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("mysql: outbox: claim: %w", err)
	}
	defer rows.Close()
	var ids []any
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("mysql: outbox: claim: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: outbox: claim: %w", err)
	}
	return ids, nil
}

// claimedRows reads the claimed rows, oldest first.
func claimedRows(ctx context.Context, tx *sql.Tx, in string, ids []any) ([]pipeline.OutboxRow, error) {
	rows, err := tx.QueryContext(ctx, "SELECT id, destination, event_id, payload, attributes, created_at, attempts FROM outbox WHERE id IN "+in+" ORDER BY id", ids...)
	if err != nil {
		return nil, fmt.Errorf("mysql: outbox: claim: read: %w", err)
	}
	defer rows.Close()
	var out []pipeline.OutboxRow
	for rows.Next() {
		var (
			r     pipeline.OutboxRow
			dest  string
			attrs []byte
		)
		if err := rows.Scan(&r.ID, &dest, &r.EventID, &r.Body, &attrs, &r.CreatedAt, &r.Attempts); err != nil {
			return nil, fmt.Errorf("mysql: outbox: claim: read: %w", err)
		}
		r.Destination, r.CreatedAt = pipeline.OutboxDestination(dest), r.CreatedAt.UTC()
		if r.Attributes, err = decodeAttributes(attrs); err != nil {
			return nil, fmt.Errorf("mysql: outbox: claim: row %d: %w", r.ID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: outbox: claim: read: %w", err)
	}
	return out, nil
}

// MarkSent implements pipeline.OutboxStore.
func (s *Store) MarkSent(ctx context.Context, now time.Time, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, dbTime(now))
	for _, id := range ids {
		args = append(args, id)
	}
	if _, err := s.db.ExecContext(ctx, "UPDATE outbox SET sent_at = ? WHERE sent_at IS NULL AND id IN (?"+strings.Repeat(", ?", len(ids)-1)+")", args...); err != nil {
		return classify(fmt.Errorf("mysql: outbox: mark sent: %w", err))
	}
	return nil
}

// MarkFailed implements pipeline.OutboxStore, in one transaction.
func (s *Store) MarkFailed(ctx context.Context, failures []pipeline.OutboxFailure) error {
	if len(failures) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, outboxTx)
	if err != nil {
		return classify(fmt.Errorf("mysql: outbox: mark failed: begin: %w", err))
	}
	defer func() { _ = tx.Rollback() }()
	for _, f := range failures {
		if _, err := tx.ExecContext(ctx, "UPDATE outbox SET available_at = ?, last_error = ? WHERE id = ? AND sent_at IS NULL",
			dbTime(f.RetryAt), nullString(pipeline.ClipRunes(f.Error, maxOutboxError)), f.ID); err != nil {
			return classify(fmt.Errorf("mysql: outbox: mark failed: %w", err))
		}
	}
	if err := tx.Commit(); err != nil {
		return classify(fmt.Errorf("mysql: outbox: mark failed: commit: %w", err))
	}
	return nil
}

// Backlog implements pipeline.OutboxStore; it reads the pending end of
// ix_outbox_pending (forced: for the GROUP BY the optimizer would rather
// walk ux_outbox_event whole, sent rows and all).
func (s *Store) Backlog(ctx context.Context) (map[pipeline.OutboxDestination]pipeline.OutboxBacklog, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT destination, COUNT(*), MIN(created_at) FROM outbox FORCE INDEX (ix_outbox_pending) WHERE sent_at IS NULL GROUP BY destination")
	if err != nil {
		return nil, classify(fmt.Errorf("mysql: outbox: backlog: %w", err))
	}
	defer rows.Close()
	out := map[pipeline.OutboxDestination]pipeline.OutboxBacklog{}
	for rows.Next() {
		var (
			dest   string
			b      pipeline.OutboxBacklog
			oldest time.Time
		)
		if err := rows.Scan(&dest, &b.Pending, &oldest); err != nil {
			return nil, classify(fmt.Errorf("mysql: outbox: backlog: %w", err))
		}
		b.Oldest = oldest.UTC()
		out[pipeline.OutboxDestination(dest)] = b
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("mysql: outbox: backlog: %w", err))
	}
	return out, nil
}

// PurgeSent implements pipeline.OutboxStore: a range of the sent end of
// ix_outbox_pending, oldest first.
func (s *Store) PurgeSent(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, pipeline.Permanent(errors.New("mysql: outbox: purge: limit must be positive"))
	}
	res, err := s.db.ExecContext(ctx, "DELETE FROM outbox WHERE sent_at < ? ORDER BY sent_at LIMIT ?", dbTime(cutoff), limit)
	if err != nil {
		return 0, classify(fmt.Errorf("mysql: outbox: purge: %w", err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, classify(fmt.Errorf("mysql: outbox: purge: %w", err))
	}
	return int(n), nil
}
