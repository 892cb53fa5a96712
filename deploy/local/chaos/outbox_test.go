package chaos

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

// A worker SIGKILLed after its verdicts committed and before their events
// left: the events wait in the outbox (written in the verdicts' own
// transactions), and the next worker's relay sends them, so the lake holds
// every done verdict's event once after dedup. The first worker's relay
// polls once an hour, which holds its sends back until the kill: the
// window between the commit and the send, made as wide as the test needs.
func TestVerdictEventsSurviveAKillBetweenCommitAndSend(t *testing.T) {
	const n = 12
	e := newEnv(t, "CHATGUARD_OUTBOX_POLL=1h")
	_, root := newLakeRoot(t)
	consumer := startConsumer(t, e.feedback.URL, root)
	first := e.startWorker()
	e.send(events(t, n))
	e.settle(n, 3*time.Minute)
	require.Equal(t, n, e.outboxPending(), "every verdict's event is in the outbox, none sent yet")
	first.kill()

	e.mu.Lock()
	e.extraEnv = nil // the next worker relays at the usual pace
	e.mu.Unlock()
	e.startWorker()
	deadline := time.Now().Add(2 * time.Minute)
	for e.outboxPending() > 0 || e.depth(e.feedback.URL) != 0 || consumer.metric("chatguard_consumer_buffered_events ") != 0 {
		require.True(t, time.Now().Before(deadline), "the outbox drained into the lake within 2 minutes: %d pending, %d queued",
			e.outboxPending(), e.depth(e.feedback.URL))
		time.Sleep(500 * time.Millisecond) // watching real processes drain
	}

	q := newLakeQuerier(t, stacktest.LakeDir(t), map[string]string{"verdict": root + "/events/event_type=verdict/dt=*/hour=*/*.parquet"})
	r := q.dedup(t, "verdict", "SELECT count(*), count(DISTINCT event_id) FROM verdict_dedup")
	require.Equal(t, []string{strconv.Itoa(n), strconv.Itoa(n)}, r[0], "each verdict event once after dedup")
	present := map[string]bool{}
	for _, row := range q.dedup(t, "verdict", "SELECT event_id FROM verdict_dedup") {
		present[row[0]] = true
	}
	rows, err := e.db.Query("SELECT room_id, window_start, window_end, pipeline_version FROM verdicts WHERE status = 'done'")
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var k pipeline.ReviewKey
		require.NoError(t, rows.Scan(&k.RoomID, &k.WindowStart, &k.WindowEnd, &k.PipelineVersion))
		require.True(t, present[pipeline.VerdictEventID(k, pipeline.StatusDone)], "the event of %s", k)
	}
	require.NoError(t, rows.Err())
	raw := q.dedup(t, "verdict", "SELECT count(*) FROM verdict")[0][0]
	t.Logf("figures: %d verdicts, verdict events raw %s, after dedup %d; %s", n, raw, n, writeVolume(t, e))
}

// writeVolume is what a review writes to MySQL for the lake: the verdict
// event's outbox row, against what the stages' inference logs would add
// (their structured outputs, which the logs carry, and their count).
func writeVolume(t *testing.T, e *env) string {
	t.Helper()
	var event, outputs, stages float64
	require.NoError(t, e.db.QueryRow("SELECT AVG(LENGTH(payload)) FROM outbox").Scan(&event))
	require.NoError(t, e.db.QueryRow(`SELECT COALESCE(SUM(LENGTH(output)), 0) / COUNT(DISTINCT verdict_id), COUNT(*) / COUNT(DISTINCT verdict_id)
		FROM verdict_stages`).Scan(&outputs, &stages))
	return fmt.Sprintf("verdict event %.0f bytes per review; stage outputs %.0f bytes and %.1f stage rows per review", event, outputs, stages)
}
