package mysql

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// TestOutboxPlansUseThePendingIndex EXPLAINs the relay's statements over a
// table of mostly sent rows (what retention leaves): the claim walks the
// pending end of ix_outbox_pending in order, with no sort (a sort would
// lock every pending row it read and leave other relays nothing), and the
// backlog and the purge read a range of it, never the table whole.
func TestOutboxPlansUseThePendingIndex(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	t0 := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	for b := range 20 {
		msgs := make([]pipeline.OutboxMessage, 100)
		for i := range msgs {
			n := b*100 + i
			msgs[i] = pipeline.OutboxMessage{Destination: pipeline.OutboxFeedback, EventID: fmt.Sprintf("e-%05d", n), Body: []byte(`{}`)}
		}
		require.NoError(t, s.Enqueue(ctxT(t), t0.Add(time.Duration(b)*time.Minute), msgs))
	}
	_, err := db.ExecContext(ctxT(t), "UPDATE outbox SET sent_at = created_at WHERE id % 20 <> 0")
	require.NoError(t, err)
	_, err = db.ExecContext(ctxT(t), "ANALYZE TABLE outbox")
	require.NoError(t, err)

	keys := []string{"ix_outbox_pending"}
	requirePlan(t, explain(t, db, `SELECT id FROM outbox FORCE INDEX (ix_outbox_pending)
		WHERE sent_at IS NULL AND available_at <= ? AND destination IN (?) ORDER BY available_at LIMIT ? FOR UPDATE SKIP LOCKED`,
		t0.Add(time.Hour), "feedback", 100), "outbox", keys, true)
	requirePlan(t, explain(t, db, "SELECT destination, COUNT(*), MIN(created_at) FROM outbox FORCE INDEX (ix_outbox_pending) WHERE sent_at IS NULL GROUP BY destination"), "outbox", keys, false)
	requirePlan(t, explain(t, db, "DELETE FROM outbox WHERE sent_at < ? ORDER BY sent_at LIMIT ?", t0.Add(10*time.Minute), 1000), "outbox", keys, true)
}
