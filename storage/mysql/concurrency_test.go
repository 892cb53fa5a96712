package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

// TestConcurrentSavesOfManyVerdicts reproduces the end-to-end demo's load:
// many workers saving verdicts of different rooms at once, mixed with
// redeliveries of the same keys (identical done copies and late failed
// attempts). Every save must succeed on its own; a deadlock that outlasts
// the store's retries sends a paid-for review back through the queue.
func TestConcurrentSavesOfManyVerdicts(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.DB().SetMaxOpenConns(64)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const (
		workers  = 64
		verdicts = 400
	)
	done := make([]pipeline.Verdict, verdicts)
	var jobs []pipeline.Verdict
	for i := range done {
		v := storetest.SampleVerdict(fmt.Sprintf("room-load-%03d", i))
		v.Attempts = 1 + i%5
		done[i] = v
		jobs = append(jobs, v)
		switch i % 4 {
		case 0: // a redelivery that finished the same way
			jobs = append(jobs, v)
		case 1: // a late attempt that failed, racing the one that finished
			jobs = append(jobs, pipeline.Verdict{
				Key: v.Key, RunID: "run-late", Status: pipeline.StatusFailed, Error: "late attempt",
				Attempts: 9, PublishedAt: v.PublishedAt,
				Stages: []pipeline.StageResult{{Stage: pipeline.StageTriage, Pool: pipeline.PoolPrimary, Error: "timeout", Attempts: 3}},
			})
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })

	feed := make(chan pipeline.Verdict)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range feed {
				if _, err := s.Save(ctx, v); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s %s: %w", v.Key.RoomID, v.Status, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, v := range jobs {
		feed <- v
	}
	close(feed)
	wg.Wait()
	require.Zero(t, len(errs), "%d of %d saves failed; first ones: %v", len(errs), len(jobs), errors.Join(errs[:min(3, len(errs))]...))

	var nv, ns int
	require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM verdicts").Scan(&nv))
	require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM verdict_stages").Scan(&ns))
	require.Equal(t, verdicts, nv)
	require.Equal(t, verdicts*len(pipeline.Stages), ns)
	for _, want := range done {
		got, err := s.Get(ctx, want.Key)
		require.NoError(t, err)
		require.Equal(t, pipeline.StatusDone, got.Status, "room %s", want.Key.RoomID)
		require.Equal(t, want.Attempts, got.Attempts, "room %s", want.Key.RoomID)
		require.Len(t, got.Stages, len(want.Stages), "room %s", want.Key.RoomID)
		for i, st := range got.Stages {
			require.Equal(t, want.Stages[i].Stage, st.Stage)
			require.Empty(t, st.Error, "room %s stage %s", want.Key.RoomID, st.Stage)
			require.JSONEq(t, string(want.Stages[i].Output), string(st.Output))
		}
	}
}

// TestSaveRetriesALockWaitTimeout holds the verdict row locked while Save
// runs on sessions that give up on a lock after one second: the first
// attempt must wait on the lock and fail with 1205, and Save must retry
// (a new transaction, waiting again) instead of failing the job. The lock
// is released only once the server shows both transactions waiting, so
// the test proves the blocking and the retry rather than assuming them.
func TestSaveRetriesALockWaitTimeout(t *testing.T) {
	t.Parallel()
	stacktest.RequireRealMySQL(t)
	s := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v := storetest.SampleVerdict("room-locked")
	storetest.MustSave(t, ctx, s, v)

	// A second handle on the same database whose sessions give up on a lock
	// after one second.
	var dbName string
	require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName))
	cfg, err := gomysql.ParseDSN(stacktest.Get(t, "CHATGUARD_MYSQL_DSN"))
	require.NoError(t, err)
	cfg.DBName = dbName
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
	impatient, err := mysql.OpenDB(mysql.Config{DSN: cfg.FormatDSN(), MaxOpenConns: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = impatient.Close() })

	blocker, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback() }()
	var id int64
	require.NoError(t, blocker.QueryRowContext(ctx, "SELECT id FROM verdicts WHERE room_id = ? FOR UPDATE", v.Key.RoomID).Scan(&id))

	v.Attempts, v.Stages = 7, v.Stages[:2]
	saved := make(chan error, 1)
	go func() {
		_, err := mysql.New(impatient).Save(ctx, v)
		saved <- err
	}()

	// Poll the server for transactions of this test's database that wait
	// on a lock; the first attempt's and the retry's have different ids.
	// Each waits one second, so a poll every 0.2 s sees both.
	waiting := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for len(waiting) < 2 && time.Now().Before(deadline) {
		rows, err := s.DB().QueryContext(ctx, `SELECT t.trx_id FROM information_schema.INNODB_TRX t
			JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
			WHERE t.trx_state = 'LOCK WAIT' AND p.DB = ?`, dbName)
		require.NoError(t, err)
		for rows.Next() {
			var trx string
			require.NoError(t, rows.Scan(&trx))
			waiting[trx] = true
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
		select {
		case err := <-saved:
			t.Fatalf("Save returned (%v) while the row was still locked; waits seen: %d", err, len(waiting))
		case <-time.After(200 * time.Millisecond):
			// InnoDB refreshes INNODB_TRX only when it was not read for
			// 0.1 s: polling faster would keep reading a stale snapshot.
		}
	}
	require.Len(t, waiting, 2, "the server never showed the first attempt and its retry waiting on the lock")
	require.NoError(t, blocker.Commit())

	select {
	case err := <-saved:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Save did not finish after the lock was released")
	}
	got, err := s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Equal(t, 7, got.Attempts)
	require.Len(t, got.Stages, 2)
}

// TestLockWaitTimeoutsRunOutRetryable keeps the row locked through every
// attempt: Save gives up after its attempts with the server's own 1205,
// which the job loop may retry later.
func TestLockWaitTimeoutsRunOutRetryable(t *testing.T) {
	t.Parallel()
	stacktest.RequireRealMySQL(t)
	s := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v := storetest.SampleVerdict("room-held")
	storetest.MustSave(t, ctx, s, v)

	var dbName string
	require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName))
	cfg, err := gomysql.ParseDSN(stacktest.Get(t, "CHATGUARD_MYSQL_DSN"))
	require.NoError(t, err)
	cfg.DBName = dbName
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
	impatient, err := mysql.OpenDB(mysql.Config{DSN: cfg.FormatDSN(), MaxOpenConns: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = impatient.Close() })

	blocker, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback() }()
	var id int64
	require.NoError(t, blocker.QueryRowContext(ctx, "SELECT id FROM verdicts WHERE room_id = ? FOR UPDATE", v.Key.RoomID).Scan(&id))

	_, err = mysql.New(impatient).Save(ctx, v)
	var me *gomysql.MySQLError
	require.ErrorAs(t, err, &me, "the driver's error from the server")
	require.EqualValues(t, 1205, me.Number)
	d, _ := pipeline.Classify(err)
	require.Equal(t, pipeline.RetryLater, d)
}
