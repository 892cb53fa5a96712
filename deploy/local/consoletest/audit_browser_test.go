package consoletest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/console"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

// auditVerdict saves a done clean verdict that is an audit item at the
// console's default share: the room name is searched (room-audit-0, -1, …)
// until its key's hash bucket falls in the sample, so the console runs
// with its defaults and the other pages look as they do in production. It
// returns the verdict's row id and room.
func auditVerdict(t *testing.T, ctx context.Context, store *mysql.Store) (uint64, string) {
	t.Helper()
	share := console.DefaultConfig().AuditShare
	for i := range 100_000 {
		key := pipeline.ReviewKey{RoomID: fmt.Sprintf("room-audit-%d", i), WindowStart: windowStart, WindowEnd: windowEnd, PipelineVersion: "batch-v1"}
		if !moderation.IsAuditItem(key, pipeline.StatusDone, pipeline.LabelClean, share) {
			continue
		}
		v := pipeline.Verdict{Key: key, RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelClean,
			Category: pipeline.CategoryClean, Action: pipeline.ActionNone, Confidence: 0.8, Rationale: "An ordinary sale.",
			Attempts: 1, PublishedAt: windowEnd, StartedAt: windowEnd, FinishedAt: windowEnd}
		storetest.MustSave(t, ctx, store, v)
		id, err := store.VerdictID(ctx, key)
		require.NoError(t, err)
		return id, key.RoomID
	}
	t.Fatalf("no room name among 100,000 falls in the audit sample at share %v", share)
	return 0, ""
}

// An audit item shows with its "audit" badge wherever a moderator meets
// it (mixed into the queue, the audit-only queue, its room page) and each
// of those pages passes axe-core.
func TestAuditItemsInBrowser(t *testing.T) {
	requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	axe := axeSource(t)
	db, dsn := stacktest.MySQL(t)
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	store := mysql.New(db)
	flagged := []string{"room-flagged-1", "room-flagged-2"}
	flaggedIDs := flaggedVerdicts(t, ctx, store, flagged...)
	auditID, auditRoom := auditVerdict(t, ctx, store)
	url := consoleOver(t, ctx, dsn, append(flagged, auditRoom)...)
	alice := signIn(t, browser(t), url, "alice@example.com")
	badge := func(id uint64) string { return fmt.Sprintf(`tr[data-id="%d"] .badge.audit`, id) }
	text := func(sel string) string {
		s, err := chromedp.Run(alice, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return s
	}

	// The default queue mixes the audit item among the flagged ones,
	// badged; the flagged ones carry no badge.
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(url+"/queue"), chromedp.WaitVisible(chromedp.CSS(badge(auditID)))))
	require.Equal(t, "audit", text(badge(auditID)))
	for _, id := range flaggedIDs {
		n, err := chromedp.Run(alice, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, badge(id))))
		require.NoError(t, err)
		require.Zero(t, n, "flagged item %d has no audit badge", id)
	}
	requireAccessible(t, alice, axe, "queue (an audit item mixed in)")

	// ?audit=1 lists the audit item alone, its filter box checked.
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(url+"/queue?audit=1"), chromedp.WaitVisible(chromedp.CSS(badge(auditID)))))
	require.Equal(t, "audit", text(badge(auditID)))
	rows, err := chromedp.Run(alice, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr[data-id]")].map(r => r.dataset.id)`))
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprint(auditID)}, rows, "only the audit item")
	checked, err := chromedp.Run(alice, chromedp.Evaluate[bool](`document.querySelector('input[name="audit"]').checked`))
	require.NoError(t, err)
	require.True(t, checked)
	requireAccessible(t, alice, axe, "queue (audit items only)")

	// The room page says it is an audit item.
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(fmt.Sprintf("%s/verdicts/%d", url, auditID)), chromedp.WaitVisible(chromedp.ID("audit-note"))))
	require.Equal(t, "audit", text("#audit-note .badge.audit"))
	require.Contains(t, text("#audit-note"), "An audit item")
	requireAccessible(t, alice, axe, "room (an audit item)")
}
