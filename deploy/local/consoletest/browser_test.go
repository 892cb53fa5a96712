package consoletest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsathena "github.com/aws/aws-sdk-go-v2/service/athena"
	athenatypes "github.com/aws/aws-sdk-go-v2/service/athena/types"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/consumer"
	"github.com/chatguard/chatguard/deploy/local/athenasim"
	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/internal/awsclient"
	"github.com/chatguard/chatguard/internal/drain"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/redisstop"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/sqs"
	"github.com/chatguard/chatguard/storage/storetest"
)

var (
	windowStart = time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)
	windowEnd   = windowStart.Add(time.Hour)
)

// room is a fraud chat: the seller pulls the buyer off the platform and
// asks for a prepayment to a personal account (m3 and m4 are the evidence).
func room() []pipeline.ChatMessage {
	at := func(m int) time.Time { return windowStart.Add(time.Duration(m) * time.Minute) }
	return []pipeline.ChatMessage{
		{MessageID: "m1", SenderID: "b1", SenderRole: pipeline.RoleBuyer, SentAt: at(1), Kind: pipeline.KindText, Text: "안녕하세요 아이폰 아직 있나요?"},
		{MessageID: "m2", SenderID: "s1", SenderRole: pipeline.RoleSeller, SentAt: at(2), Kind: pipeline.KindText, Text: "네 있어요. 다른 분도 기다리고 계셔서 빨리 결정해주세요"},
		{MessageID: "m3", SenderID: "s1", SenderRole: pipeline.RoleSeller, SentAt: at(3), Kind: pipeline.KindText, Text: "앱이 느려서 카톡으로 얘기해요 아이디 safe_deal77"},
		{MessageID: "m4", SenderID: "s1", SenderRole: pipeline.RoleSeller, SentAt: at(4), Kind: pipeline.KindText, Text: "선입금 해주시면 바로 보내드려요 계좌이체로 부탁해요"},
		{MessageID: "m5", SenderID: "b1", SenderRole: pipeline.RoleBuyer, SentAt: at(5), Kind: pipeline.KindText, Text: "안전결제로 하면 안 될까요?"},
	}
}

// repoRoot is the folder holding go.work.
func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.work above the test")
		dir = parent
	}
}

// startConsole builds and runs the console binary; it returns its URL.
func startConsole(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "console")
	build := exec.Command("go", "build", "-o", bin, "./cmd/console")
	build.Dir = repoRoot(t)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "CHATGUARD_DEV_INSECURE_KEYS=true")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if os.Getenv("CONSOLE_TEST_LOG") != "" {
				t.Log(line)
			}
			var l struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "console: serving" {
				urlc <- l.URL
			}
		}
	}()
	select {
	case u := <-urlc:
		return u
	case <-time.After(60 * time.Second):
		t.Fatal("the console did not start")
		return ""
	}
}

func TestConsoleInBrowser(t *testing.T) {
	requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	axe := axeSource(t)

	// MySQL: a database of our own, migrated, with one flagged verdict.
	db, dsn := stacktest.MySQL(t)
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	store := mysql.New(db)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: "room-console-1", WindowStart: windowStart, WindowEnd: windowEnd, PipelineVersion: "batch-v1"},
		RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
		Confidence: 0.92, Action: pipeline.ActionRestrict, Rationale: "The seller moves the chat to KakaoTalk and asks for a prepayment by bank transfer.",
		EvidenceIDs: []string{"m3", "m4"}, Attempts: 1, PublishedAt: windowEnd, StartedAt: windowEnd, FinishedAt: windowEnd.Add(3 * time.Second)}
	storetest.MustSave(t, ctx, store, v)
	id, err := store.VerdictID(ctx, v.Key)
	require.NoError(t, err)

	// Chat API and a slow LLM (tokens arrive over seconds, so they can be
	// seen streaming and the review stopped mid-way).
	chat, err := chatapi.New(chatapi.Config{Messages: map[string][]pipeline.ChatMessage{v.Key.RoomID: room()}})
	require.NoError(t, err)
	chatSrv := httptest.NewServer(chat.Handler())
	defer chatSrv.Close()
	lcfg := llmsim.DefaultConfig()
	lcfg.Models = []string{"console-sim"}
	lcfg.ITL, lcfg.TokensPerChunk = 40*time.Millisecond, 2
	llm, err := llmsim.Start(ctx, "127.0.0.1:0", lcfg)
	require.NoError(t, err)
	defer llm.Stop(context.Background())

	// The feedback queue, and the operator API as the worker serves it:
	// bearer auth, then a stop signal on Redis.
	fq := stacktest.NewQueue(t, "console-fb", 5, 30*time.Second)
	rdb := stacktest.Redis(t)
	stopName := stacktest.Unique("console-stop")
	rcfg := redisstop.DefaultConfig()
	rcfg.Channel, rcfg.KeyPrefix = stopName, stopName+":"
	pub := redisstop.NewPublisher(rdb, rcfg, nil)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600))
	stops := make(chan pipeline.StopRequest, 4)
	operator := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret-token" || r.URL.Path != "/v1/stop" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var req pipeline.StopRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sig, err := req.Signal(time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if _, err := pub.Publish(r.Context(), sig); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		stops <- req
		w.WriteHeader(http.StatusAccepted)
	}))
	defer operator.Close()

	liveName := stacktest.Unique("console-live")
	url := startConsole(t, "--listen-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--dev-login",
		"--mysql-dsn", dsn, "--chat-api-url", chatSrv.URL, "--feedback-queue-url", fq.URL,
		"--redis-addr", stacktest.Get(t, "CHATGUARD_REDIS_ADDR"), "--stop-channel", stopName, "--stop-key-prefix", stopName+":",
		"--live-key-prefix", liveName+":", "--primary-base-url", llm.URL, "--primary-model", "console-sim",
		"--operator-url", operator.URL, "--operator-token-file", tokenFile)

	// A fresh headless chromium.
	bctx := browser(t)

	shots := os.Getenv("CONSOLE_SCREENSHOTS")
	shot := func(name string) {
		if shots == "" {
			return
		}
		buf, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name), buf, 0o644))
	}

	// Log in, open the queue, open the flagged room.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(url+"/queue"),
		chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), "alice@example.com"),
	))
	follow(t, bctx, "queue", chromedp.Click(chromedp.ID("signin")))
	queueHTML, err := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.ID("queue")))
	require.NoError(t, err)
	require.Contains(t, queueHTML, "room-console-1")
	shot("queue.png")
	follow(t, bctx, "chat", chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[href="/verdicts/%d"]`, id))))
	evidence, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#chat li.evidence")].map(e => e.dataset.messageId)`))
	require.NoError(t, err)
	require.Equal(t, []string{"m3", "m4"}, evidence, "the evidence messages are highlighted")
	shot("room.png")

	// Confirm → a decision row and a moderator_feedback event.
	require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("saved"))))
	saved, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("saved")))
	require.NoError(t, err)
	require.Contains(t, saved, "confirm")
	var moderator string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT moderator FROM moderator_decisions WHERE verdict_id = ?", id).Scan(&moderator))
	require.True(t, strings.HasPrefix(moderator, "mod2-"), "a keyed pseudonymous moderator id: %q", moderator)

	// A first re-review through axe while it streams (axe takes seconds on
	// a loaded machine, so this one runs to its end); the stop below needs
	// a review of its own, and stops the room's reviews for a while after.
	require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.ID("rereview"))))
	_, err = chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("live-tokens").textContent.length > 40`, chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(t, err)
	requireAccessible(t, bctx, axe, "room (re-review streaming)")
	_, err = chromedp.Run(bctx, chromedp.Poll[string](`document.getElementById("live-verdict").dataset.final || ""`, chromedp.WithPollingTimeout(90*time.Second)))
	require.NoError(t, err, "the first re-review ends")

	// Re-review: tokens stream into the page before any verdict; then stop.
	require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.ID("rereview"))))
	_, err = chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("live-tokens").textContent.length > 40 && !document.getElementById("live-verdict").dataset.final`,
		chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(t, err, "no tokens streamed before the verdict")
	tokens, err := chromedp.Run(bctx, chromedp.TextContent(chromedp.ID("live-tokens")))
	require.NoError(t, err)
	require.NotEmpty(t, strings.TrimSpace(tokens))
	shot("rereview.png")
	require.NoError(t, chromedp.Do(bctx, chromedp.Click(chromedp.ID("stop"))))
	final, err := chromedp.Run(bctx, chromedp.Poll[string](`document.getElementById("live-verdict").dataset.final || ""`, chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(t, err)
	require.Equal(t, "stopped", final, "the stream ends stopped")
	shot("stopped.png")
	requireAccessible(t, bctx, axe, "room (re-review stopped)")
	got := <-stops
	require.Equal(t, v.Key.RoomID, got.RoomID)
	require.Contains(t, got.Reason, moderator)

	// The consumer puts the feedback event in the lake; the Athena
	// stand-in reads it back.
	prefix := stacktest.Unique("console-lake") + "/"
	requireFeedbackInLake(t, ctx, fq.URL, prefix, v.Key.RoomID, moderator)
}

func requireFeedbackInLake(t *testing.T, ctx context.Context, queueURL, prefix, roomID, moderator string) {
	t.Helper()
	awsCfg := stacktest.AWS(t)
	qcfg := sqs.DefaultConfig()
	qcfg.Name, qcfg.URL = "feedback", queueURL
	queue, err := sqs.New(awsclient.SQS(awsCfg), qcfg)
	require.NoError(t, err)
	lake, err := s3lake.NewLake(s3lake.NewStore(stacktest.S3(t), stacktest.LakeBucket(t), s3lake.DefaultPartSize), prefix+"events/", prefix+"errors/")
	require.NoError(t, err)
	ccfg := consumer.DefaultConfig()
	ccfg.FlushAge, ccfg.WaitTime, ccfg.DrainTimeout = time.Second, time.Second, 10*time.Second
	c, err := consumer.New(ccfg, queue, lake, consumer.Options{})
	require.NoError(t, err)
	cctx, ccancel := context.WithCancel(ctx)
	cctx, release := drain.After(cctx, nil, ccfg.DrainTimeout)
	defer release()
	done := make(chan error, 1)
	go func() { done <- c.Run(cctx) }()
	dir := filepath.Join(stacktest.LakeDir(t), prefix, "events", "event_type=moderator_feedback")
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "dt=*", "hour=*", "*.parquet"))
		return len(m) > 0
	}, 60*time.Second, 200*time.Millisecond, "the consumer wrote no moderator_feedback object")
	ccancel()
	require.NoError(t, <-done)

	sim, err := athenasim.New(athenasim.Config{LakeDir: stacktest.LakeDir(t), Tables: map[string]string{
		"moderator_feedback": prefix + "events/event_type=moderator_feedback/dt=*/hour=*/*.parquet"}})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	ath := awsathena.NewFromConfig(awsCfg, func(o *awsathena.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	q := fmt.Sprintf("SELECT moderator_id, decided_label, verdict_label FROM moderator_feedback WHERE room_id = '%s'", roomID)
	start, err := ath.StartQueryExecution(ctx, &awsathena.StartQueryExecutionInput{QueryString: aws.String(q),
		QueryExecutionContext: &athenatypes.QueryExecutionContext{Database: aws.String("chatguard")}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := ath.GetQueryExecution(ctx, &awsathena.GetQueryExecutionInput{QueryExecutionId: start.QueryExecutionId})
		require.NoError(t, err)
		st := got.QueryExecution.Status.State
		require.NotEqual(t, athenatypes.QueryExecutionStateFailed, st, "%v", aws.ToString(got.QueryExecution.Status.StateChangeReason))
		return st == athenatypes.QueryExecutionStateSucceeded
	}, 30*time.Second, 100*time.Millisecond)
	res, err := ath.GetQueryResults(ctx, &awsathena.GetQueryResultsInput{QueryExecutionId: start.QueryExecutionId})
	require.NoError(t, err)
	require.Len(t, res.ResultSet.Rows, 2, "a header and the one feedback row")
	row := res.ResultSet.Rows[1].Data
	require.Equal(t, moderator, aws.ToString(row[0].VarCharValue))
	require.Equal(t, "abusive", aws.ToString(row[1].VarCharValue))
	require.Equal(t, "abusive", aws.ToString(row[2].VarCharValue))
}
