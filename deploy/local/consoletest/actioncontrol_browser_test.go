package consoletest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/moderation/moderationtest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

// A moderator reverses one action by its key in the browser: the page
// shows it reversed, the chat service lifts the restriction within 5 s
// and keeps the room's notice and hold; Confirm on the notice shows who
// confirmed it. The reverse_action audit row was written before the
// reversal.
func TestAModeratorReversesOneActionByKeyInBrowser(t *testing.T) {
	requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, dsn := stacktest.MySQL(t)
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	store := mysql.New(db)
	roomID := "room-protect-key"
	chat, chatURL := chatService(t, store, roomID)
	v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: roomID, WindowStart: windowStart, WindowEnd: windowEnd, PipelineVersion: "batch-v1"},
		RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
		Confidence: 0.9, Action: pipeline.ActionRestrict, Rationale: "Prepayment by bank transfer off the platform.",
		EvidenceIDs: []string{"m3", "m4"}, Attempts: 1, PublishedAt: windowEnd, StartedAt: windowEnd, FinishedAt: windowEnd,
		Subjects: []string{"s2"}, OffenderRole: pipeline.RoleSeller}
	at := time.Now().UTC()
	var seeded []pipeline.ActionRecord
	for _, k := range []pipeline.ActionKind{pipeline.ActionWarnCounterpart, pipeline.ActionHoldTransaction, pipeline.ActionRestrictSender} {
		r := moderationtest.SeedAction(roomID, "s2", "key_"+string(k), k, pipeline.ModeOn, at)
		r.Key = v.Key
		r.IdempotencyKey = pipeline.ForwardActionKey(v.Key, 1, "key_"+string(k), k, "s2")
		seeded = append(seeded, r)
	}
	notice, restrict := seeded[0], seeded[2]
	v.Actions = seeded
	storetest.MustSave(t, ctx, store, v)
	id, err := store.VerdictID(ctx, v.Key)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return chat.Actions().Stats.Outcomes[chatapi.OutcomeApplied] == 3 }, 30*time.Second, 20*time.Millisecond,
		"the chat service applied the actions")
	require.True(t, chat.Restricted("s2"))

	lcfg := llmsim.DefaultConfig()
	lcfg.Models = []string{"console-sim"}
	llm, err := llmsim.Start(ctx, "127.0.0.1:0", lcfg)
	require.NoError(t, err)
	t.Cleanup(func() { llm.Stop(context.Background()) })
	fq := stacktest.NewQueue(t, "console-keyrev-fb", 5, 30*time.Second)
	live := stacktest.Unique("console-keyrev")
	url := startConsole(t, "--listen-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--dev-login",
		"--mysql-dsn", dsn, "--chat-api-url", chatURL, "--feedback-queue-url", fq.URL,
		"--redis-addr", stacktest.Get(t, "CHATGUARD_REDIS_ADDR"), "--stop-channel", live, "--stop-key-prefix", live+":stop:",
		"--live-key-prefix", live+":", "--primary-base-url", llm.URL, "--primary-model", "console-sim")
	alice := signIn(t, browser(t), url, "alice@example.com")
	row := func(r pipeline.ActionRecord) string {
		return fmt.Sprintf(`#protective tr[data-key=%q]`, r.IdempotencyKey)
	}
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(fmt.Sprintf("%s/verdicts/%d", url, id)),
		chromedp.WaitVisible(chromedp.CSS(row(restrict)+` form.reverse-action button`))))

	require.NoError(t, chromedp.Do(alice, chromedp.Click(chromedp.CSS(row(restrict)+` form.reverse-action button`))))
	clicked := time.Now()
	wctx, wcancel := context.WithTimeout(alice, 5*time.Second)
	defer wcancel()
	require.NoError(t, chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(row(restrict)+`[data-state="reversed"]`))), "the page shows it reversed")
	require.Eventually(t, func() bool { return !chat.Restricted("s2") }, 5*time.Second-time.Since(clicked), 20*time.Millisecond,
		"the chat service lifted the restriction within 5 s")
	require.Equal(t, chatapi.TxHeld, chat.Actions().Transactions[roomID].State, "the hold stays")
	ms, _ := chat.Messages(roomID)
	shown := false
	for _, m := range ms {
		shown = shown || m.MessageID == pipeline.ActionNoticeID(notice.IdempotencyKey)
	}
	require.True(t, shown, "the notice stays")

	require.NoError(t, chromedp.Do(alice, chromedp.Click(chromedp.CSS(row(notice)+` form.confirm-action button`))))
	cctx, ccancel := context.WithTimeout(alice, 5*time.Second)
	defer ccancel()
	require.NoError(t, chromedp.Do(cctx, chromedp.WaitVisible(chromedp.CSS(row(notice)+`[data-confirmed-by] .confirmed`))), "the page shows who confirmed it")

	var auditedAt, reversal time.Time
	require.NoError(t, db.QueryRowContext(ctx, `SELECT requested_at FROM moderation_actions WHERE action = 'reverse_action' AND detail = ?`,
		"key "+restrict.IdempotencyKey).Scan(&auditedAt))
	require.NoError(t, db.QueryRowContext(ctx, `SELECT created_at FROM protective_actions WHERE reverses = ? AND action = 'lift_restriction'`,
		restrict.IdempotencyKey).Scan(&reversal))
	require.False(t, reversal.Before(auditedAt), "audited before it acted")
}
