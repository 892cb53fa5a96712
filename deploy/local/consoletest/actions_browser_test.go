package consoletest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/moderation/moderationtest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/outbox"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/sqs"
	"github.com/chatguard/chatguard/storage/storetest"
)

// chatService is the chat API stand-in with its side of protective
// actions: the outbox relay publishes the database's actions to a queue
// the stand-in consumes, as the workers' relay and the chat service do.
func chatService(t *testing.T, store *mysql.Store, rooms ...string) (*chatapi.Server, string) {
	t.Helper()
	msgs := map[string][]pipeline.ChatMessage{}
	for _, r := range rooms {
		msgs[r] = room()
	}
	chat, err := chatapi.New(chatapi.Config{Messages: msgs})
	require.NoError(t, err)
	srv := httptest.NewServer(chat.Handler())
	t.Cleanup(srv.Close)
	q := stacktest.NewQueue(t, "console-actions", 5, 30*time.Second)
	open := func(name, url string) *sqs.Queue {
		c := sqs.DefaultConfig()
		c.Name, c.URL = name, url
		sq, err := sqs.New(stacktest.SQS(t), c)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sq.Close(context.Background()) })
		return sq
	}
	in, dlq := open("actions", q.URL), open("actions-dlq", q.DLQURL)
	rcfg := outbox.DefaultConfig()
	rcfg.Poll = 50 * time.Millisecond
	relay, err := outbox.New(rcfg, store, map[pipeline.OutboxDestination]pipeline.Sender{pipeline.OutboxActions: in}, clock.Real(), nil, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	relayDone, consumerDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(relayDone); _ = relay.Run(ctx) }()
	go func() {
		defer close(consumerDone)
		_ = (&chatapi.Consumer{Server: chat, Inbox: in, DLQ: dlq, Wait: time.Second}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-relayDone; <-consumerDone })
	return chat, srv.URL
}

// An overturn in the browser reverses the room's protective actions: the
// page shows them reversed with the decision, and the chat service has
// retracted the notice, released the hold and lifted the restriction
// within 5 s; undoing the overturn re-applies them within 5 s; the
// decision's audit row was written before any of it.
func TestAnOverturnReversesTheRoomsActionsInBrowser(t *testing.T) {
	requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, dsn := stacktest.MySQL(t)
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	store := mysql.New(db)
	roomID := "room-protect-1"
	chat, chatURL := chatService(t, store, roomID)

	// The worker's save of the verdict writes three actions in force.
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: roomID, WindowStart: windowStart, WindowEnd: windowEnd, PipelineVersion: "batch-v1"},
		RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
		Confidence: 0.9, Action: pipeline.ActionRestrict, Rationale: "Prepayment by bank transfer off the platform.",
		EvidenceIDs: []string{"m3", "m4"}, Attempts: 1, PublishedAt: windowEnd, StartedAt: windowEnd, FinishedAt: windowEnd,
		Subjects: []string{"s1"}, OffenderRole: pipeline.RoleSeller}
	at := time.Now().UTC()
	var seeded []pipeline.ActionRecord
	for _, k := range []pipeline.ActionKind{pipeline.ActionWarnCounterpart, pipeline.ActionHoldTransaction, pipeline.ActionRestrictSender} {
		r := moderationtest.SeedAction(roomID, "s1", "prepay_"+string(k), k, pipeline.ModeOn, at)
		r.Key = v.Key
		r.IdempotencyKey = pipeline.ForwardActionKey(v.Key, 1, "prepay_"+string(k), k, "s1")
		seeded = append(seeded, r)
	}
	v.Actions = seeded
	storetest.MustSave(t, ctx, store, v)
	id, err := store.VerdictID(ctx, v.Key)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return chat.Actions().Stats.Outcomes[chatapi.OutcomeApplied] == 3 }, 30*time.Second, 20*time.Millisecond,
		"the chat service applied the actions")
	require.True(t, chat.Restricted("s1"))

	lcfg := llmsim.DefaultConfig()
	lcfg.Models = []string{"console-sim"}
	llm, err := llmsim.Start(ctx, "127.0.0.1:0", lcfg)
	require.NoError(t, err)
	t.Cleanup(func() { llm.Stop(context.Background()) })
	fq := stacktest.NewQueue(t, "console-actions-fb", 5, 30*time.Second)
	live := stacktest.Unique("console-actions")
	url := startConsole(t, "--listen-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--dev-login",
		"--mysql-dsn", dsn, "--chat-api-url", chatURL, "--feedback-queue-url", fq.URL,
		"--redis-addr", stacktest.Get(t, "CHATGUARD_REDIS_ADDR"), "--stop-channel", live, "--stop-key-prefix", live+":stop:",
		"--live-key-prefix", live+":", "--primary-base-url", llm.URL, "--primary-model", "console-sim")
	alice := signIn(t, browser(t), url, "alice@example.com")
	row := func(r pipeline.ActionRecord, state string) string {
		return fmt.Sprintf(`#protective tr[data-key=%q][data-state=%q]`, r.IdempotencyKey, state)
	}
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(fmt.Sprintf("%s/verdicts/%d", url, id)), chromedp.WaitVisible(chromedp.CSS(row(seeded[0], "written")))))

	require.NoError(t, chromedp.Do(alice,
		chromedp.SetValue(chromedp.CSS(`#decide select[name="label"]`), "clean"),
		chromedp.Click(chromedp.ID("overturn")),
	))
	overturned := time.Now()
	wctx, wcancel := context.WithTimeout(alice, 5*time.Second)
	defer wcancel()
	for _, r := range seeded {
		require.NoError(t, chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(row(r, "reversed")))), "the page shows %s reversed", r.Action.ID)
	}
	reversed := func() bool {
		st := chat.Actions()
		notice := false
		if ms, ok := chat.Messages(roomID); ok {
			for _, m := range ms {
				notice = notice || m.MessageID == pipeline.ActionNoticeID(seeded[0].IdempotencyKey)
			}
		}
		return !notice && st.Transactions[roomID].State == chatapi.TxReleased && !chat.Restricted("s1")
	}
	require.Eventually(t, reversed, 5*time.Second-time.Since(overturned), 20*time.Millisecond,
		"the chat service retracted, released and lifted within 5 s of the overturn")

	// Undoing the overturn re-applies them under keys of their own.
	require.NoError(t, chromedp.Do(alice, chromedp.WaitVisible(chromedp.ID("undo")), chromedp.Click(chromedp.ID("undo"))))
	undone := time.Now()
	reapplied := func() bool {
		ms, _ := chat.Messages(roomID)
		notices := 0
		for _, m := range ms {
			if pipeline.IsActionNotice(m) {
				notices++
			}
		}
		return notices == 1 && chat.Actions().Transactions[roomID].State == chatapi.TxHeld && chat.Restricted("s1")
	}
	require.Eventually(t, reapplied, 5*time.Second-time.Since(undone), 20*time.Millisecond,
		"the chat service showed the notice again, held and restricted within 5 s of the undo")

	var auditedAt, firstReversal time.Time
	require.NoError(t, db.QueryRowContext(ctx, `SELECT requested_at FROM moderation_actions WHERE action = 'decide' AND decision = 'overturn' AND verdict_id = ?`, id).Scan(&auditedAt))
	require.NoError(t, db.QueryRowContext(ctx, `SELECT MIN(created_at) FROM protective_actions WHERE source = 'moderator'`).Scan(&firstReversal))
	require.False(t, firstReversal.Before(auditedAt), "audited before it acted")
}
