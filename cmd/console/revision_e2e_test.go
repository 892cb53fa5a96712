package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
)

// TestReReviewOfADecidedVerdictIsANewRevision boots the console against
// the local stack, gives a window a batch verdict that a moderator decides
// through the console, and re-reviews the window on demand: the batch
// verdict stays as revision 1 with the decision on it, the re-review is
// revision 2 and current, the queue lists revision 2 and not revision 1,
// and revision 1's page says it was superseded and links revision 2.
func TestReReviewOfADecidedVerdictIsANewRevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dsn := stacktest.MySQL(t)
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	store := mysql.New(db)
	const room = "room-revise"
	at := time.Date(2026, 11, 30, 10, 5, 0, 0, time.UTC)
	chat := standin.StartChatAPI(t, map[string][]pipeline.ChatMessage{room: {
		{MessageID: "m1", SenderID: "b", SenderRole: pipeline.RoleBuyer, SentAt: at, Kind: pipeline.KindText, Text: "안녕하세요 아직 판매중인가요?"},
		{MessageID: "m2", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at.Add(time.Minute), Kind: pipeline.KindText, Text: "네 판매중입니다"},
	}})
	base, hc, feedbackURL := startConsole(t, dsn, chat)
	csrf := pageCSRF(t, hc, base+"/queue")

	// The first review of the window gives the key its pipeline version;
	// the batch verdict is then saved over it as a worker saves, the
	// window's revision 1.
	first := reReview(t, hc, base, csrf, room)
	v1, err := store.VerdictByID(ctx, first.VerdictID)
	require.NoError(t, err)
	batch := v1
	batch.RunID, batch.Status, batch.Label, batch.Category = "run-2026113010", pipeline.StatusDone, pipeline.LabelAbusive, pipeline.CategoryExternalPayment
	batch.Severity, batch.Action, batch.Rationale, batch.Subjects, batch.OffenderRole = 4, pipeline.ActionRestrict, "prepayment", nil, ""
	batch.Revision, batch.SupersededAt = 0, time.Time{}
	require.True(t, saveAsWorker(t, store, batch))

	resp, err := hc.PostForm(base+"/verdicts/"+strconv.FormatUint(first.VerdictID, 10)+"/decide",
		url.Values{"csrf": {csrf}, "decision": {"confirm"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the decision was saved and the page shown again")

	second := reReview(t, hc, base, csrf, room)
	require.NotEqual(t, first.VerdictID, second.VerdictID, "the re-review is a new row")
	require.Equal(t, 2, second.Revision)

	revs, err := store.Revisions(ctx, v1.Key)
	require.NoError(t, err)
	require.Len(t, revs, 2)
	require.Equal(t, "run-2026113010", revs[0].RunID, "the batch verdict is kept as it was decided")
	require.Equal(t, pipeline.LabelAbusive, revs[0].Label)
	require.False(t, revs[0].SupersededAt.IsZero())
	require.True(t, strings.HasPrefix(revs[1].RunID, "ondemand:"), revs[1].RunID)
	require.True(t, revs[1].SupersededAt.IsZero(), "the re-review is current")
	cur, err := store.Get(ctx, v1.Key)
	require.NoError(t, err)
	require.Equal(t, 2, cur.Revision)

	d1, err := store.Decisions(ctx, first.VerdictID, 10)
	require.NoError(t, err)
	require.Len(t, d1, 1, "the decision names revision 1")
	require.Equal(t, pipeline.LabelAbusive, d1[0].Label)
	d2, err := store.Decisions(ctx, second.VerdictID, 10)
	require.NoError(t, err)
	require.Empty(t, d2, "revision 2 is undecided")

	queue := getPage(t, hc, base+"/queue?decided=1&label="+url.QueryEscape(string(revs[1].Label)))
	require.Contains(t, queue, "/verdicts/"+strconv.FormatUint(second.VerdictID, 10), "the queue shows revision 2")
	require.NotContains(t, queue, "/verdicts/"+strconv.FormatUint(first.VerdictID, 10)+`"`, "and not revision 1")
	if revs[0].Label != revs[1].Label {
		queue = getPage(t, hc, base+"/queue?decided=1&label=abusive")
		require.NotContains(t, queue, "/verdicts/"+strconv.FormatUint(first.VerdictID, 10)+`"`, "revision 1 is history")
	}
	page := getPage(t, hc, base+"/verdicts/"+strconv.FormatUint(first.VerdictID, 10))
	require.Contains(t, page, `id="superseded"`)
	require.Contains(t, page, `href="/verdicts/`+strconv.FormatUint(second.VerdictID, 10)+`"`, "revision 1's page links the current verdict")

	// The lake hears of revision 2 under an event id of its own.
	ev := verdictEventOf(t, feedbackURL, pipeline.VerdictRevisionEventID(v1.Key, revs[1].Status, 2))
	require.Equal(t, 2, ev.Revision)
	require.Equal(t, revs[1].RunID, ev.RunID)
}

// verdictEventOf receives from the feedback queue until the verdict event
// with id arrives (bounded: 30 long polls of at most 2 s).
func verdictEventOf(t *testing.T, queueURL, id string) pipeline.VerdictEvent {
	t.Helper()
	c := stacktest.SQS(t)
	for range 30 {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
		require.NoError(t, err)
		for _, m := range out.Messages {
			var env struct {
				EventID string                `json:"event_id"`
				Payload pipeline.VerdictEvent `json:"payload"`
			}
			if json.Unmarshal([]byte(aws.ToString(m.Body)), &env) == nil && env.EventID == id {
				return env.Payload
			}
		}
	}
	t.Fatalf("no verdict event %s on the feedback queue", id)
	return pipeline.VerdictEvent{}
}

// saveAsWorker saves v as a worker does and reports whether it committed.
func saveAsWorker(t *testing.T, s *mysql.Store, v pipeline.Verdict) bool {
	t.Helper()
	committed, err := s.Save(context.Background(), v)
	require.NoError(t, err)
	return committed
}

// reviewed is what an on-demand review's final verdict event names.
type reviewed struct {
	VerdictID uint64 `json:"verdict_id"`
	Revision  int    `json:"revision"`
}

// reReview runs an on-demand review of room's 10:00–11:00 window through
// the console and returns its final verdict event.
func reReview(t *testing.T, hc *http.Client, base, csrf, room string) reviewed {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/reviews",
		strings.NewReader(`{"room_id":"`+room+`","window_start":"2026-11-30T10:00:00Z","window_end":"2026-11-30T11:00:00Z"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", csrf)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	typ := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			typ = v
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || !pipeline.LiveEventType(typ).Final() {
			continue
		}
		require.Equal(t, "verdict", typ, "the review ended with %s: %s", typ, data)
		var out reviewed
		require.NoError(t, json.Unmarshal([]byte(data), &out))
		require.NotZero(t, out.VerdictID)
		return out
	}
	t.Fatalf("the stream ended without a final event: %v", sc.Err())
	return reviewed{}
}

func getPage(t *testing.T, hc *http.Client, u string) string {
	t.Helper()
	resp, err := hc.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", u, b)
	return string(b)
}

// startConsole runs the console as its pod does against the local stack,
// the model simulators and chat, and returns its base URL, a client signed
// in as a moderator and the URL of its feedback (lake) queue.
func startConsole(t *testing.T, dsn, chat string) (string, *http.Client, string) {
	t.Helper()
	feedback := stacktest.NewQueue(t, "feedback", 5, 30*time.Second)
	primary := standin.StartLLM(t, standin.LLMOptions{Name: "primary", Model: "sim-p", Config: `{"ttft":"1ms","itl":"0s","jitter":0}`})
	fallback := standin.StartLLM(t, standin.LLMOptions{Name: "fallback", Model: "sim-f", Config: `{"ttft":"1ms","itl":"0s","jitter":0}`})
	keyFile := filepath.Join(t.TempDir(), "session-key")
	require.NoError(t, os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef-session"), 0o600))
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.MySQL.DSN, cfg.Chat.BaseURL, cfg.Feedback.URL = dsn, chat, feedback.URL
	cfg.RedisAddr = stacktest.Get(t, "CHATGUARD_REDIS_ADDR")
	cfg.Live.KeyPrefix = stacktest.Unique("live") + ":"
	cfg.LLM.Primary.BaseURL, cfg.LLM.Primary.Model = primary.BaseURL, "sim-p"
	cfg.LLM.Fallback.BaseURL, cfg.LLM.Fallback.Model = fallback.BaseURL, "sim-f"
	cfg.Images.Hosts = []string{"img.example-market.test"}
	cfg.QuoteDigestKey = "test-digest-key-of-at-least-thirty-two-bytes"
	cfg.DevLogin, cfg.SessionKeyFile = true, keyFile

	ready := make(chan string, 1)
	m := &Main{Config: cfg, Log: slog.New(slog.DiscardHandler), OnReady: func(addr, _ string) { ready <- addr }}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})
	var base string
	select {
	case addr := <-ready:
		base = "http://" + addr
	case err := <-done:
		t.Fatalf("the console did not start: %v", err)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 2 * time.Minute}
	resp, err := hc.PostForm(base+"/login", url.Values{"email": {"alice@example.com"}, "next": {"/queue"}})
	require.NoError(t, err)
	resp.Body.Close()
	return base, hc, feedback.URL
}
