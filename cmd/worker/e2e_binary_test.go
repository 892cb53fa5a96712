package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/storage/mysql"
)

// TestE2EBinarySIGTERM builds the worker, runs it as a process configured
// only through CHATGUARD_ variables, and sends it SIGTERM with jobs in
// flight: finished jobs stay deleted, unfinished messages are visible again
// at once, and the process exits 0 within the drain timeout.
func TestE2EBinarySIGTERM(t *testing.T) {
	t.Parallel()
	bin := workerBinary(t)

	primary, pURL := simProc(t, "primary", "sim-p", "", "")
	fallback, fURL := simProc(t, "fallback", "sim-f", "k", "")
	r := &rig{sqs: stacktest.SQS(t)}
	r.queue = stacktest.NewQueue(t, "review", 5, 30*time.Second)
	r.feedback = stacktest.NewQueue(t, "feedback", 5, 30*time.Second)
	db, dsn := stacktest.MySQL(t)
	r.db, r.store = db, mysql.New(db)

	// The migrate subcommand of the binary itself.
	mig := exec.Command(bin, "migrate")
	mig.Env = append(os.Environ(), "CHATGUARD_MYSQL_DSN="+dsn)
	out, err := mig.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "applied 00001_verdicts.sql (version 1)")

	const drain = 3 * time.Second
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"CHATGUARD_REVIEW_QUEUE_URL="+r.queue.URL, "CHATGUARD_REVIEW_DLQ_URL="+r.queue.DLQURL,
		"CHATGUARD_FEEDBACK_QUEUE_URL="+r.feedback.URL, "CHATGUARD_MYSQL_DSN="+dsn,
		"CHATGUARD_CHAT_API_URL="+stacktest.ChatAPIURL(t),
		"CHATGUARD_PRIMARY_BASE_URL="+pURL, "CHATGUARD_PRIMARY_MODEL=sim-p",
		"CHATGUARD_FALLBACK_BASE_URL="+fURL, "CHATGUARD_FALLBACK_MODEL=sim-f", "CHATGUARD_FALLBACK_API_KEY=k",
		"CHATGUARD_ADMIN_ADDR=127.0.0.1:0", "CHATGUARD_WAIT_TIME=1s", "CHATGUARD_DRAIN_TIMEOUT="+drain.String(),
		"CHATGUARD_ATTEMPT_TIMEOUT=2m", "CHATGUARD_JOB_TIMEOUT=5m", "CHATGUARD_CONCURRENCY=8", "CHATGUARD_DEV_INSECURE_KEYS=true",
	)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("worker stderr:\n%s", stderr.tail(6000))
		}
	})

	evs := sampleReviews(t, 6, true)
	r.sendEvents(t, evs[:3]...)
	waitDone(t, r, 3, time.Minute)

	// Now every model call takes a minute: the next jobs stay in flight.
	const slow = `{"ttft":"1m","max_hang":"2m"}`
	primary.Configure(t, slow)
	fallback.Configure(t, slow)
	r.sendEvents(t, evs[3:]...)
	require.Eventually(t, func() bool { return primary.Stats(t).Running+fallback.Stats(t).Running >= 3 }, 30*time.Second, 20*time.Millisecond, "jobs in flight")

	begin := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("exit %d: %s", ee.ExitCode(), stderr.tail(4000))
		}
		require.NoError(t, err)
	case <-time.After(drain + 20*time.Second):
		t.Fatal("worker did not exit after SIGTERM")
	}
	took := time.Since(begin)
	t.Logf("exited 0 %s after SIGTERM (drain timeout %s)", took.Round(time.Millisecond), drain)
	require.Less(t, took, drain+lifecycle.DefaultDrain+2*time.Second)
	require.Contains(t, stderr.tail(1<<20), `"msg":"worker: drained"`)

	got := r.receiveAll(t, r.queue.URL, 3, 3*time.Second)
	require.Len(t, got, 3, "unfinished messages are visible again at once")
	for _, m := range got {
		body := aws.ToString(m.Body)
		require.True(t, strings.Contains(body, evs[3].RoomID) || strings.Contains(body, evs[4].RoomID) || strings.Contains(body, evs[5].RoomID), body)
	}
	require.Equal(t, 3, r.countRows(t, "SELECT COUNT(*) FROM verdicts WHERE status = 'done'"))
	require.Zero(t, r.countRows(t, "SELECT COUNT(*) FROM verdicts WHERE status <> 'done'"), "a drained job left a row")
}
