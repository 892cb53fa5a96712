package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/redisstop"
)

// workerBinary builds the worker once per test process; standin.Main
// removes it with the stand-ins' binaries.
func workerBinary(t testing.TB) string {
	t.Helper()
	return standin.Build(t, "github.com/chatguard/chatguard/cmd/worker")
}

func TestMain(m *testing.M) { standin.Main(m) }

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// proc is one worker process.
type proc struct {
	cmd    *exec.Cmd
	admin  string
	stderr *syncBuffer
	exited chan error
}

func startProc(t *testing.T, bin string, env []string) *proc {
	t.Helper()
	p := &proc{admin: freeAddr(t), stderr: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(append(os.Environ(), "CHATGUARD_DEV_INSECURE_KEYS=true"), env...)
	p.cmd.Env = append(p.cmd.Env, "CHATGUARD_ADMIN_ADDR="+p.admin)
	p.cmd.Stderr = p.stderr
	require.NoError(t, p.cmd.Start())
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("worker %s stderr:\n%s", p.admin, p.stderr.tail(6000))
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + p.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "worker %s ready", p.admin)
	return p
}

func (p *proc) metric(t testing.TB, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.admin + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return 0
}

// roomsByLabel picks sample rooms without images by their ground-truth
// label: the truth is read only to choose rooms, never by the worker.
func roomsByLabel(t testing.TB, label string, n int) []pipeline.ReviewEvent {
	t.Helper()
	return truthReviews(t, n, func(r truthRow) bool { return r.Label == label && r.Images == 0 })
}

// TestE2EStopAcrossProcesses runs two worker processes and publishes a stop
// with `worker stop` as a third: the long review on one process stops, is
// recorded stopped and deleted, while the other process keeps reviewing.
func TestE2EStopAcrossProcesses(t *testing.T) {
	t.Parallel()
	bin := workerBinary(t)
	// Streaming slowly: one token every 60 ms makes an abusive room's four
	// stages take many seconds, so the stop lands mid-stream.
	primary, pURL := simProc(t, "primary", "sim-p", "", `{"ttft":"20ms","itl":"60ms","tokens_per_chunk":1,"jitter":0}`)
	queue := stacktest.NewQueue(t, "review", 5, 30*time.Second)
	feedback := stacktest.NewQueue(t, "feedback", 5, 30*time.Second)
	db, dsn := stacktest.MySQL(t)
	r := &rig{sqs: stacktest.SQS(t), queue: queue, feedback: feedback, db: db, store: mysql.New(db)}
	mig := exec.Command(bin, "migrate")
	mig.Env = append(os.Environ(), "CHATGUARD_MYSQL_DSN="+dsn)
	out, err := mig.CombinedOutput()
	require.NoError(t, err, string(out))

	channel := stacktest.Unique("stop-e2e")
	redisAddr := stacktest.Get(t, "CHATGUARD_REDIS_ADDR")
	stopEnv := []string{"CHATGUARD_REDIS_ADDR=" + redisAddr, "CHATGUARD_STOP_CHANNEL=" + channel, "CHATGUARD_STOP_KEY_PREFIX=" + channel + ":"}
	env := append([]string{
		"CHATGUARD_REVIEW_QUEUE_URL=" + queue.URL, "CHATGUARD_REVIEW_DLQ_URL=" + queue.DLQURL,
		"CHATGUARD_FEEDBACK_QUEUE_URL=" + feedback.URL, "CHATGUARD_MYSQL_DSN=" + dsn,
		"CHATGUARD_CHAT_API_URL=" + stacktest.ChatAPIURL(t),
		"CHATGUARD_PRIMARY_BASE_URL=" + pURL, "CHATGUARD_PRIMARY_MODEL=sim-p", "CHATGUARD_FALLBACK_BASE_URL=",
		"CHATGUARD_WAIT_TIME=1s", "CHATGUARD_CONCURRENCY=1", "CHATGUARD_ATTEMPT_TIMEOUT=2m", "CHATGUARD_JOB_TIMEOUT=5m",
		"CHATGUARD_DRAIN_TIMEOUT=5s", "CHATGUARD_MAX_AGE=0s",
	}, stopEnv...)
	// The first process serves the operator API; `worker stop` goes
	// through it with a token, like the moderator console.
	operator, tokens := freeAddr(t), tokensDir(t)
	procs := []*proc{startProc(t, bin, append(env, "CHATGUARD_OPERATOR_ADDR="+operator, "CHATGUARD_OPERATOR_TOKENS_DIR="+tokens)), startProc(t, bin, env)}

	long := roomsByLabel(t, "abusive", 1)[0]
	r.sendEvents(t, long)
	require.Eventually(t, func() bool { return primary.Stats(t).Running >= 1 }, 30*time.Second, 10*time.Millisecond, "the long review is streaming")
	var running, idle *proc
	require.Eventually(t, func() bool {
		for i, p := range procs {
			if p.metric(t, "chatguard_worker_inflight_jobs") >= 1 {
				running, idle = p, procs[1-i]
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)

	// The operator's command, as a third process.
	stopCmd := exec.Command(bin, "stop", "--operator-url", "http://"+operator, "--token-file", filepath.Join(tokens, "oncall-kim"),
		"--room", long.RoomID, "--reason", "a moderator sanctioned the seller", "--ttl", "10m")
	var stdout, stderr bytes.Buffer
	stopCmd.Stdout, stopCmd.Stderr = &stdout, &stderr
	require.NoError(t, stopCmd.Run(), stderr.String())
	var published struct {
		Signal struct {
			PublishedAt time.Time `json:"published_at"`
		} `json:"signal"`
		Receivers int `json:"receivers"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &published), stdout.String())
	require.Equal(t, 2, published.Receivers, "both worker processes are subscribed")
	var who, outcome string
	require.NoError(t, r.db.QueryRow("SELECT identity, outcome FROM stop_signals WHERE room_id = ?", long.RoomID).Scan(&who, &outcome))
	require.Equal(t, []string{"oncall-kim", "accepted"}, []string{who, outcome}, "the stop is audited with its identity")

	var (
		status, reason string
		finished       time.Time
	)
	require.Eventually(t, func() bool {
		err := r.db.QueryRow("SELECT status, error, finished_at FROM verdicts WHERE room_id = ?", long.RoomID).Scan(&status, &reason, &finished)
		return err == nil && status == string(pipeline.StatusStopped)
	}, 30*time.Second, 10*time.Millisecond, "the review is recorded stopped")
	require.Contains(t, reason, "a moderator sanctioned the seller")
	latency := finished.Sub(published.Signal.PublishedAt)
	t.Logf("publish to stopped verdict: %s (target 200ms; the cancel itself is in chatguard_stop_publish_to_cancel_seconds)", latency.Round(time.Millisecond))
	require.Equal(t, 1.0, running.metric(t, "chatguard_stop_applied_total"))
	require.Zero(t, idle.metric(t, "chatguard_stop_applied_total"))
	require.Eventually(t, func() bool {
		visible, inflight := r.queueCounts(t, queue.URL)
		return visible == 0 && inflight == 0
	}, 10*time.Second, 50*time.Millisecond, "the stopped review's message is deleted")

	// The other process (and this one) go on reviewing other rooms.
	others := roomsByLabel(t, "clean", 2)
	r.sendEvents(t, others...)
	waitDone(t, r, 2, 2*time.Minute)
	for _, p := range procs {
		select {
		case err := <-p.exited:
			t.Fatalf("worker %s exited: %v", p.admin, err)
		default:
		}
	}

	// A later window of the stopped room is stopped too, without model calls.
	before := primary.Stats(t).ChatRequests("")
	later := long
	later.WindowStart, later.WindowEnd = long.WindowEnd, long.WindowEnd.Add(time.Hour)
	r.sendEvents(t, later)
	require.Eventually(t, func() bool {
		return r.countRows(t, "SELECT COUNT(*) FROM verdicts WHERE room_id = ? AND status = 'stopped'", long.RoomID) == 2
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, before, primary.Stats(t).ChatRequests(""), "a stopped room costs no model call")
}

// TestE2EStopPublishedBeforeStart: a worker started after the publish loads
// the stored stop and honours it; POST /v1/stop publishes too.
func TestE2EStopPublishedBeforeStart(t *testing.T) {
	t.Parallel()
	channel := stacktest.Unique("stop-late")
	redisAddr := stacktest.Get(t, "CHATGUARD_REDIS_ADDR")
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = rdb.Close() })
	rc := redisstop.DefaultConfig()
	rc.Channel, rc.KeyPrefix = channel, channel+":"
	sig, err := pipeline.StopRequest{RoomID: "room-07", Reason: "fraud ring"}.Signal(time.Now())
	require.NoError(t, err)
	_, err = redisstop.NewPublisher(rdb, rc, nil).Publish(context.Background(), sig)
	require.NoError(t, err)

	rev := newFakeReviewer(nil)
	r := startRig(t, rigOpts{reviewer: rev, mut: func(c *Config) {
		c.RedisAddr, c.Stop.Channel, c.Stop.KeyPrefix = redisAddr, channel, channel+":"
		c.OperatorAddr, c.OperatorTokensDir = "127.0.0.1:0", tokensDir(t)
	}})
	r.sendEvents(t, event("room-07"), event("room-08"))
	waitRows := func(q string, n int) {
		require.Eventually(t, func() bool { return r.countRows(t, q) == n }, 30*time.Second, 20*time.Millisecond, q)
	}
	waitRows("SELECT COUNT(*) FROM verdicts WHERE room_id = 'room-07' AND status = 'stopped'", 1)
	waitRows("SELECT COUNT(*) FROM verdicts WHERE room_id = 'room-08' AND status = 'done'", 1)
	require.Zero(t, rev.callsFor("room-07"), "a stopped review calls no model")

	// The operator endpoint publishes with the same validation, only with
	// a token, and audits every request in MySQL.
	op := "http://" + r.operator
	require.Equal(t, http.StatusUnauthorized, post(t, op, "", `{"run_id":"run-x","ttl":"5m","reason":"wrong window"}`))
	require.Equal(t, http.StatusAccepted, post(t, op, "Bearer "+consoleToken, `{"run_id":"run-x","ttl":"5m","reason":"wrong window"}`))
	require.Equal(t, http.StatusBadRequest, post(t, op, "Bearer "+consoleToken, `{"ttl":"5m"}`))
	rows, err := r.db.Query("SELECT identity, outcome, http_status, run_id, ttl_seconds FROM stop_signals ORDER BY id")
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var who, outcome, run string
		var code, ttl int
		require.NoError(t, rows.Scan(&who, &outcome, &code, &run, &ttl))
		got = append(got, fmt.Sprintf("%s %s %d %s %d", who, outcome, code, run, ttl))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{" refused 401 run-x 300", "console accepted 202 run-x 300", "console invalid 400  300"}, got)
	code, _ := r.get(t, "/v1/stop")
	require.Equal(t, http.StatusNotFound, code, "the admin port has no operator API")
}
