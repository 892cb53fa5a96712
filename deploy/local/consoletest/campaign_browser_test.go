package consoletest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

const browserMark = "hmac:5ca1ab1e5ca1ab1e5ca1ab1e"

// aboutTheSeller records what the pipeline would for each verdict: its
// subject and participant (the fraud chat's seller, s1) and its campaign signal (the
// prepayment message m4 carried one script fingerprint in every room).
// The subjects are dated an hour ago, so that they are inside the account
// history's 30 days on the console's wall clock whenever the test runs.
func aboutTheSeller(t *testing.T, ctx context.Context, db *sql.DB, ids ...uint64) {
	t.Helper()
	for _, id := range ids {
		_, err := db.ExecContext(ctx, `INSERT INTO verdict_subjects (verdict_id, sender_id, role, room_id, label, category, decided_at)
			SELECT id, 's1', 'seller', room_id, label, category, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR FROM verdicts WHERE id = ?`, id)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `INSERT INTO verdict_participants (verdict_id, sender_id, role, room_id, decided_at)
			SELECT id, 's1', 'seller', room_id, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR FROM verdicts WHERE id = ?`, id)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `INSERT INTO verdict_campaigns (verdict_id, kind, mark, message_id, rooms, senders, room_id, label, category, decided_at)
			SELECT id, 'script', ?, 'm4', 41, 6, room_id, label, category, finished_at FROM verdicts WHERE id = ?`, browserMark, id)
		require.NoError(t, err)
	}
}

func screenshot(t *testing.T, b context.Context, name string) {
	t.Helper()
	if dir := os.Getenv("CONSOLE_SCREENSHOTS"); dir != "" {
		buf, err := chromedp.Run(b, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), buf, 0o644))
	}
}

// Alice goes from a room to the account behind it (the a shortcut), to
// the campaign the account ran, and confirms the campaign's rooms at once;
// the room Bob took meanwhile is shown as his and left to him.
func TestAccountAndCampaignInBrowser(t *testing.T) {
	requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	axe := axeSource(t)
	url0, db, ids := queueConsole(t, ctx, "room-camp-1", "room-camp-2", "room-camp-3")
	aboutTheSeller(t, ctx, db, ids...)
	bctx := browser(t)
	alice := signIn(t, bctx, url0, "alice@example.com")
	bob := signIn(t, bctx, url0, "bob@example.com")

	// Bob takes the second room.
	follow(t, bob, "release", chromedp.Click(chromedp.CSS(`button[aria-label="take room room-camp-2"]`)))
	var bobID string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT moderator FROM queue_takes WHERE verdict_id = ?", ids[1]).Scan(&bobID))

	// Alice opens the first room; a opens the seller's account.
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(fmt.Sprintf("%s/verdicts/%d", url0, ids[0])), chromedp.WaitVisible(chromedp.ID("chat"))))
	requireAccessible(t, alice, axe, "room (with its account and campaign)")
	follow(t, alice, "account-verdicts", chromedp.KeyEvent("a"))
	rows, err := chromedp.Run(alice, chromedp.Evaluate[int](`document.querySelectorAll("#account-verdicts tr[data-id]").length`))
	require.NoError(t, err)
	require.Equal(t, 3, rows, "every verdict about the seller")
	history, err := chromedp.Run(alice, chromedp.Text(chromedp.ID("history")))
	require.NoError(t, err)
	require.Contains(t, history, "external_payment")
	screenshot(t, alice, "account.png")
	requireAccessible(t, alice, axe, "account")

	// The account's campaign: the rooms side by side with the message.
	follow(t, alice, "campaign-rooms", chromedp.Click(chromedp.CSS("a.campaign")))
	cards, err := chromedp.Run(alice, chromedp.Text(chromedp.ID("campaign-rooms")))
	require.NoError(t, err)
	require.Contains(t, cards, "선입금 해주시면", "the matching message, fetched live")
	require.Contains(t, cards, "taken by "+bobID)
	screenshot(t, alice, "campaign.png")
	requireAccessible(t, alice, axe, "campaign")

	// The bulk form first shows what it applies (a confirm: each
	// verdict's own label and category), then acts on "Yes".
	follow(t, alice, "bulk-yes", chromedp.Click(chromedp.ID("confirm-all")))
	applied, err := chromedp.Run(alice, chromedp.Text(chromedp.ID("apply-label")))
	require.NoError(t, err)
	require.Equal(t, "each verdict's own, unchanged", applied)
	requireAccessible(t, alice, axe, "bulk decision (confirmation step)")
	follow(t, alice, "bulk-result", chromedp.Click(chromedp.ID("bulk-yes")))
	result, err := chromedp.Run(alice, chromedp.Text(chromedp.ID("bulk-result")))
	require.NoError(t, err)
	require.Contains(t, result, "2 room(s) decided")
	require.Contains(t, result, "Skipped, taken by another moderator: "+bobID)
	screenshot(t, alice, "campaign-bulk.png")
	requireAccessible(t, alice, axe, "campaign (after a bulk decision)")
	var aliceID string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT moderator FROM moderator_decisions WHERE verdict_id = ?", ids[0]).Scan(&aliceID))
	require.Equal(t, []string{aliceID}, decisionsOn(t, ctx, db, ids[2]))
	require.Empty(t, decisionsOn(t, ctx, db, ids[1]), "Bob's room is left to him")

	// Bob decides his room undisturbed.
	require.NoError(t, chromedp.Do(bob, chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("saved"))))
	require.Equal(t, []string{bobID}, decisionsOn(t, ctx, db, ids[1]))
}

// Two moderators on one campaign: Bob takes a room from the queue, Alice
// takes the whole campaign with the t shortcut and is told Bob's room is
// his; her bulk decision leaves it to him until she overrides, and Bob,
// deciding it after, sees that she did.
func TestTakeAllOfACampaignInBrowser(t *testing.T) {
	requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	axe := axeSource(t)
	url0, db, ids := queueConsole(t, ctx, "room-all-1", "room-all-2", "room-all-3")
	aboutTheSeller(t, ctx, db, ids...)
	bctx := browser(t)
	alice := signIn(t, bctx, url0, "alice@example.com")
	bob := signIn(t, bctx, url0, "bob@example.com")

	follow(t, bob, "release", chromedp.Click(chromedp.CSS(`button[aria-label="take room room-all-2"]`)))
	var bobID string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT moderator FROM queue_takes WHERE verdict_id = ?", ids[1]).Scan(&bobID))

	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(url0+"/campaigns/"+browserMark), chromedp.WaitVisible(chromedp.ID("take-button"))))
	follow(t, alice, "take-result", chromedp.KeyEvent("t"))
	result, err := chromedp.Run(alice, chromedp.Text(chromedp.ID("take-result")))
	require.NoError(t, err)
	require.Contains(t, result, "You hold 2 open room(s) of the campaign.")
	require.Contains(t, result, "left to them: "+bobID+" (1)")
	cards, err := chromedp.Run(alice, chromedp.Text(chromedp.ID("campaign-rooms")))
	require.NoError(t, err)
	require.Contains(t, cards, "taken by you")
	require.Contains(t, cards, "taken by "+bobID)
	var aliceID string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT moderator FROM queue_takes WHERE verdict_id = ?", ids[0]).Scan(&aliceID))
	var holder string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT moderator FROM queue_takes WHERE verdict_id = ?", ids[2]).Scan(&holder))
	require.Equal(t, aliceID, holder)
	require.NoError(t, db.QueryRowContext(ctx, "SELECT moderator FROM queue_takes WHERE verdict_id = ?", ids[1]).Scan(&holder))
	require.Equal(t, bobID, holder, "Bob's room is not stolen")
	screenshot(t, alice, "campaign-take.png")
	requireAccessible(t, alice, axe, "campaign (after taking it all)")

	// Her bulk decision skips Bob's room...
	follow(t, alice, "bulk-yes", chromedp.Click(chromedp.ID("confirm-all")))
	follow(t, alice, "bulk-result", chromedp.Click(chromedp.ID("bulk-yes")))
	result, err = chromedp.Run(alice, chromedp.Text(chromedp.ID("bulk-result")))
	require.NoError(t, err)
	require.Contains(t, result, "2 room(s) decided")
	require.Contains(t, result, "Skipped, taken by another moderator: "+bobID)
	require.Empty(t, decisionsOn(t, ctx, db, ids[1]))
	// ...until she overrides, explicitly.
	require.NoError(t, chromedp.Do(alice, chromedp.Click(chromedp.CSS(`input[name="override"]`))))
	follow(t, alice, "bulk-yes", chromedp.Click(chromedp.ID("confirm-all")))
	follow(t, alice, "bulk-result", chromedp.Click(chromedp.ID("bulk-yes")))
	result, err = chromedp.Run(alice, chromedp.Text(chromedp.ID("bulk-result")))
	require.NoError(t, err)
	require.Contains(t, result, "1 room(s) decided")
	require.Contains(t, result, "Decided over the take of: "+bobID)
	require.Equal(t, []string{aliceID}, decisionsOn(t, ctx, db, ids[1]))

	// Bob, still on his room, is told rather than deciding it twice.
	require.NoError(t, chromedp.Do(bob, chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("conflict"))))
	msg, err := chromedp.Run(bob, chromedp.Text(chromedp.ID("conflict")))
	require.NoError(t, err)
	require.Contains(t, msg, "Decided meanwhile by "+aliceID)
	require.Equal(t, []string{aliceID}, decisionsOn(t, ctx, db, ids[1]))
}
