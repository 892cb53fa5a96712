package integration_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
)

func TestMySQLUpsertRoundTrip(t *testing.T) {
	t.Parallel()
	db, _ := stacktest.MySQL(t)
	ctx := ctxFor(t, 30*time.Second)
	_, err := db.ExecContext(ctx, `CREATE TABLE verdicts (
		room_id VARCHAR(64) NOT NULL,
		window_start DATETIME(6) NOT NULL,
		label VARCHAR(16) NOT NULL,
		attempts INT NOT NULL,
		updated_at DATETIME(6) NOT NULL,
		PRIMARY KEY (room_id, window_start))`)
	require.NoError(t, err)

	const upsert = `INSERT INTO verdicts (room_id, window_start, label, attempts, updated_at) VALUES (?, ?, ?, 1, ?)
		ON DUPLICATE KEY UPDATE label = VALUES(label), attempts = attempts + 1, updated_at = VALUES(updated_at)`
	ws := time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)
	t1 := time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC)
	_, err = db.ExecContext(ctx, upsert, "room-1", ws, "suspicious", t1)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, upsert, "room-1", ws, "abusive", t1.Add(time.Second))
	require.NoError(t, err)

	var label string
	var attempts int
	var updated time.Time
	err = db.QueryRowContext(ctx, `SELECT label, attempts, updated_at FROM verdicts WHERE room_id = ? AND window_start = ?`, "room-1", ws).Scan(&label, &attempts, &updated)
	require.NoError(t, err)
	require.Equal(t, "abusive", label)
	require.Equal(t, 2, attempts)
	require.True(t, t1.Add(time.Second).Equal(updated.UTC()), "microseconds survive: %s", updated)

	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM verdicts`).Scan(&n))
	require.Equal(t, 1, n)
}

func TestMySQLStackDatabaseExists(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("mysql", stacktest.Get(t, "CHATGUARD_MYSQL_DSN"))
	require.NoError(t, err)
	defer db.Close()
	var name string
	require.NoError(t, db.QueryRowContext(ctxFor(t, 10*time.Second), "SELECT DATABASE()").Scan(&name))
	require.Equal(t, "chatguard", name)
}

func TestRedisPublishSubscribe(t *testing.T) {
	t.Parallel()
	c := stacktest.Redis(t)
	ctx := ctxFor(t, 30*time.Second)
	channel := stacktest.Unique("it-stop")
	sub := c.Subscribe(ctx, channel)
	defer sub.Close()
	// Receive returns the subscription confirmation once the server has
	// registered it, so the publish below cannot be lost.
	_, err := sub.Receive(ctx)
	require.NoError(t, err)

	n, err := c.Publish(ctx, channel, "stop:room-1").Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "one subscriber")
	msg, err := sub.ReceiveMessage(ctx)
	require.NoError(t, err)
	require.Equal(t, channel, msg.Channel)
	require.Equal(t, "stop:room-1", msg.Payload)

	// The stop signal's TTL key travels the same connection kind.
	require.NoError(t, c.Set(ctx, channel+":key", "1", time.Minute).Err())
	ttl, err := c.TTL(ctx, channel+":key").Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Duration(0))
}
