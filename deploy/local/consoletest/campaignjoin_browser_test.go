package consoletest

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/storage/mysql"
)

const (
	variantA = "hmac:0a0a0a0a0a0a0a0a0a0a0a0a"
	variantB = "hmac:0b0b0b0b0b0b0b0b0b0b0b0b"
)

// One script seen as two marks over four rooms: the first carried mark A
// below the threshold (a sighting), the second A as a campaign, the third
// A and B together, the fourth B. After the campaign join, B's campaign
// page lists all four rooms, and its take and bulk decision cover them all.
func TestCampaignPageCoversTheWholeJoinedCampaignInBrowser(t *testing.T) {
	requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	url0, db, ids := queueConsole(t, ctx, "room-join-1", "room-join-2", "room-join-3", "room-join-4")
	for i, row := range []struct {
		mark, class string
	}{{variantA, "sighting"}, {variantA, "campaign"}, {variantA, "campaign"}, {variantB, "campaign"}} {
		_, err := db.ExecContext(ctx, `INSERT INTO verdict_campaigns (verdict_id, kind, mark, message_id, rooms, senders, class, room_id, label, category, decided_at)
			SELECT id, 'script', ?, 'm4', 5, 2, ?, room_id, label, category, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR FROM verdicts WHERE id = ?`, row.mark, row.class, ids[i])
		require.NoError(t, err)
	}
	_, err := db.ExecContext(ctx, `INSERT INTO verdict_campaigns (verdict_id, kind, mark, message_id, rooms, senders, class, room_id, label, category, decided_at)
		SELECT id, 'script', ?, 'm4', 5, 2, 'campaign', room_id, label, category, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR FROM verdicts WHERE id = ?`, variantB, ids[2])
	require.NoError(t, err)
	j, err := campaign.NewJoiner(campaign.DefaultJoinConfig(), mysql.New(db), nil, nil)
	require.NoError(t, err)
	_, linked, err := j.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, linked, "the first room")

	alice := signIn(t, browser(t), url0, "alice@example.com")
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(url0+"/campaigns/"+variantB), chromedp.WaitVisible(chromedp.ID("take-button"))))
	cards, err := chromedp.Run(alice, chromedp.Evaluate[int](`document.querySelectorAll("#campaign-rooms li.card").length`))
	require.NoError(t, err)
	require.Equal(t, 4, cards, "every room of the campaign, the linked one included")
	require.NoError(t, chromedp.Do(alice, chromedp.Click(chromedp.ID("take-button")), chromedp.WaitVisible(chromedp.ID("take-result"))))
	result, err := chromedp.Run(alice, chromedp.Text(chromedp.ID("take-result")))
	require.NoError(t, err)
	require.Contains(t, result, "You hold 4 open room(s) of the campaign.")
	require.NoError(t, chromedp.Do(alice, chromedp.Click(chromedp.ID("confirm-all")), chromedp.WaitVisible(chromedp.ID("bulk-yes")),
		chromedp.Click(chromedp.ID("bulk-yes")), chromedp.WaitVisible(chromedp.ID("bulk-result"))))
	result, err = chromedp.Run(alice, chromedp.Text(chromedp.ID("bulk-result")))
	require.NoError(t, err)
	require.Contains(t, result, "4 room(s) decided")
	for _, id := range ids {
		require.Len(t, decisionsOn(t, ctx, db, id), 1)
	}
}
