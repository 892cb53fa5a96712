package rediscampaign

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

// TestLegacyCountsKeepMatchingOnRedis: Redis holds counts that the release
// before per-purpose keys made (legacy marks, rooms and senders); a review
// after the change, with the legacy forms on, counts in both forms on the
// real Redis and sees the campaign the legacy counts hold, under its
// current marks; with the legacy forms off it starts from one room.
func TestLegacyCountsKeepMatchingOnRedis(t *testing.T) {
	t.Parallel()
	c, _ := setup(t, stacktest.RedisNode(t), nil)
	keys, err := pseudonym.New([]byte("key-a-of-at-least-thirty-two-bytes-long"))
	require.NoError(t, err)
	msgs := []pipeline.ChatMessage{{MessageID: "m1", SenderID: "seller-9", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText,
		Text: "앱이 너무 느려서요 카톡으로 얘기해요 아이디 deal8282 입니다. 선입금 해주시면 바로 발송해 드릴게요"}}
	marker := chatprep.NewCampaignMarker(keys, true)
	cur, legacy := marker.SightingsWithLegacy(msgs)
	require.NotEmpty(t, legacy)
	for i := range 7 {
		_, err := c.Observe(context.Background(), marker.LegacyParty("room", fmt.Sprint("before-", i)), legacy, t0)
		require.NoError(t, err)
	}
	cfg := campaign.DefaultConfig()
	cfg.Enabled = true
	det, err := campaign.New(cfg, c, nil, clock.NewFake(t0.Add(30*time.Minute)))
	require.NoError(t, err)

	off := det.Detect(context.Background(), marker.Party("room", "after-0"), cur)
	require.Empty(t, off, "the current marks alone: one room")
	got := det.DetectWithLegacy(context.Background(), marker.Party("room", "after-1"), cur, marker.LegacyParty("room", "after-1"), legacy)
	require.Len(t, got, len(cur))
	for _, n := range got {
		require.Equal(t, 8, n.Rooms, "seven rooms from before and this one")
		require.True(t, strings.HasPrefix(n.Mark, "hmac2:"), n.Mark)
	}
}
