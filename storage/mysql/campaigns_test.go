package mysql_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/storetest"
)

const (
	markA = "hmac:0123456789abcdef01234567"
	markB = "hmac:89abcdef0123456789abcdef"
)

// TestCampaignsAreSavedWithTheVerdict: campaign signals are written in the
// save's transaction with the verdict's room, label and category, replaced
// by a re-save, read back by Get (most rooms first), kept when the
// done-guard keeps the stored verdict, and removed with the verdict.
func TestCampaignsAreSavedWithTheVerdict(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	v := storetest.SampleVerdict("room-campaigns")
	v.Campaigns = []pipeline.CampaignCount{
		{Kind: pipeline.CampaignScript, Mark: markA, MessageID: "m2", Rooms: 40, Senders: 2},
		{Kind: pipeline.CampaignContact, Mark: markB, MessageID: "m3", Rooms: 12, Senders: 1},
	}
	ok, err := s.Save(ctx, v)
	require.NoError(t, err)
	require.True(t, ok)
	got, err := s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Equal(t, v.Campaigns, got.Campaigns)

	var room, label, category string
	require.NoError(t, s.DB().QueryRowContext(ctx,
		"SELECT room_id, label, category FROM verdict_campaigns WHERE mark = ?", markB).Scan(&room, &label, &category))
	require.Equal(t, []string{"room-campaigns", "abusive", "external_payment"}, []string{room, label, category})

	v.Campaigns = v.Campaigns[1:]
	_, err = s.Save(ctx, v)
	require.NoError(t, err)
	got, err = s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Equal(t, v.Campaigns, got.Campaigns, "a re-save replaces them")

	failed := v
	failed.Status, failed.Campaigns = pipeline.StatusFailed, nil
	ok, err = s.Save(ctx, failed)
	require.NoError(t, err)
	require.False(t, ok)
	got, err = s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Len(t, got.Campaigns, 1, "the done-guard keeps them")

	_, err = s.DB().ExecContext(ctx, "DELETE FROM verdicts WHERE room_id = ?", "room-campaigns")
	require.NoError(t, err)
	var n int
	require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM verdict_campaigns WHERE mark = ?", markB).Scan(&n))
	require.Zero(t, n, "the cascade removes them with the verdict")
}

// TestCampaignsAreBounded: a raw contact value, an unknown kind, a repeat
// or too many signals are refused, permanently.
func TestCampaignsAreBounded(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ok := pipeline.CampaignCount{Kind: pipeline.CampaignScript, Mark: markA, MessageID: "m1", Rooms: 9, Senders: 1}
	for name, mut := range map[string]func(*pipeline.CampaignCount) []pipeline.CampaignCount{
		"raw contact":  func(c *pipeline.CampaignCount) []pipeline.CampaignCount { c.Mark = "01012345678"; return nil },
		"unknown kind": func(c *pipeline.CampaignCount) []pipeline.CampaignCount { c.Kind = "text"; return nil },
		"no message":   func(c *pipeline.CampaignCount) []pipeline.CampaignCount { c.MessageID = ""; return nil },
		"negative":     func(c *pipeline.CampaignCount) []pipeline.CampaignCount { c.Rooms = -1; return nil },
		"repeated":     func(c *pipeline.CampaignCount) []pipeline.CampaignCount { return []pipeline.CampaignCount{*c, *c} },
		"too many": func(c *pipeline.CampaignCount) []pipeline.CampaignCount {
			var out []pipeline.CampaignCount
			for i := range pipeline.MaxCampaigns + 1 {
				d := *c
				d.Mark = "hmac:" + strings.Repeat("0", 22) + string(rune('a'+i/10)) + string(rune('0'+i%10))
				out = append(out, d)
			}
			return out
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := ok
			v := storetest.SampleVerdict("room-bad-campaigns")
			if many := mut(&c); many != nil {
				v.Campaigns = many
			} else {
				v.Campaigns = []pipeline.CampaignCount{c}
			}
			_, err := s.Save(context.Background(), v)
			require.Error(t, err)
			require.NotContains(t, err.Error(), "12345678")
			d, _ := pipeline.Classify(err)
			require.Equal(t, pipeline.GiveUp, d)
		})
	}
}

// TestCampaignQueryUsesTheMarkIndex: "rooms running this mark lately"
// reads the mark index alone.
func TestCampaignQueryUsesTheMarkIndex(t *testing.T) {
	t.Parallel()
	s := setup(t)
	plan := explain(t, s, "SELECT room_id, label, category FROM verdict_campaigns WHERE mark = ? AND decided_at >= ? ORDER BY decided_at DESC", markA, "2026-11-01")[0]
	require.Equal(t, "ix_verdict_campaigns_mark", plan["key"], "plan: %v", plan)
	require.Contains(t, plan["Extra"], "Using index", "covering; plan: %v", plan)
}
