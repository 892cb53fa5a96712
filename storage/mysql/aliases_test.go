package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
	"github.com/chatguard/chatguard/storage/storetest"
)

// TestLegacyCampaignRowsKeepMatching: a room saved by the release before
// per-purpose keys carries the legacy mark; a room of the same campaign
// saved now carries the current mark and the pair, and from then on the
// campaign's queries by the current mark find both rooms (the legacy rows
// are re-keyed in the save's transaction), the pair is recorded once for
// the analysts' lake join, and a verdict without aliases re-keys nothing.
func TestLegacyCampaignRowsKeepMatching(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	keys, err := pseudonym.New([]byte("key-a-of-at-least-thirty-two-bytes-long"))
	require.NoError(t, err)
	legacy, current := keys.Legacy(pseudonym.Campaign, "script", "band"), keys.Sum(pseudonym.Campaign, "script", "band")

	old := storetest.SampleVerdict("room-before")
	old.Campaigns = []pipeline.CampaignCount{{Kind: pipeline.CampaignScript, Mark: legacy, MessageID: "m1", Rooms: 5, Senders: 1}}
	_, err = s.Save(ctx, old)
	require.NoError(t, err)
	n, err := s.CountOpenCampaignRooms(ctx, current)
	require.NoError(t, err)
	require.Zero(t, n, "before a pair is known, the current mark finds nothing")

	now := storetest.SampleVerdict("room-after")
	now.Campaigns = []pipeline.CampaignCount{{Kind: pipeline.CampaignScript, Mark: current, MessageID: "m2", Rooms: 6, Senders: 1}}
	now.Aliases = []pipeline.PseudonymAlias{
		{Purpose: pipeline.AliasCampaign, Legacy: legacy, Current: current},
		{Purpose: pipeline.AliasSubject, Legacy: keys.Legacy(pseudonym.Subject, "seller-1"), Current: keys.Sum(pseudonym.Subject, "seller-1")},
	}
	ok, err := s.Save(ctx, now)
	require.NoError(t, err)
	require.True(t, ok)
	n, err = s.CountOpenCampaignRooms(ctx, current)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the room from before the change is the campaign's too")
	got, err := s.Get(ctx, old.Key)
	require.NoError(t, err)
	require.Equal(t, current, got.Campaigns[0].Mark, "re-keyed")

	_, err = s.Save(ctx, now) // a re-save records nothing twice
	require.NoError(t, err)
	as, err := s.PseudonymAliases(ctx, pipeline.AliasCampaign, current)
	require.NoError(t, err)
	require.Equal(t, []pipeline.PseudonymAlias{{Purpose: pipeline.AliasCampaign, Legacy: legacy, Current: current}}, as)
	as, err = s.PseudonymAliases(ctx, pipeline.AliasSubject, now.Aliases[1].Legacy)
	require.NoError(t, err)
	require.Len(t, as, 1)

	bad := storetest.SampleVerdict("room-bad")
	bad.Aliases = []pipeline.PseudonymAlias{{Purpose: pipeline.AliasSubject, Legacy: "seller-1", Current: current}}
	_, err = s.Save(ctx, bad)
	var perm *pipeline.PermanentError
	require.ErrorAs(t, err, &perm, "a raw id is never stored as an alias")
}

// TestRekeyModeratorMovesDecisionsAndTakes: decisions and a take recorded
// under a moderator's legacy unkeyed id belong to their keyed id after
// they sign in (RekeyModerator): the take is still theirs, their decision
// is theirs; a second sign-in moves nothing, and another moderator's rows
// are left alone.
func TestRekeyModeratorMovesDecisionsAndTakes(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	keys, err := pseudonym.New([]byte("key-a-of-at-least-thirty-two-bytes-long"))
	require.NoError(t, err)
	legacy, current := pseudonym.LegacyModeratorID("kim@example.com"), keys.ModeratorID("kim@example.com")
	other := pseudonym.LegacyModeratorID("lee@example.com")
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)

	var ids []uint64
	for _, room := range []string{"room-decided", "room-taken", "room-other"} {
		v := storetest.SampleVerdict(room)
		_, err := s.Save(ctx, v)
		require.NoError(t, err)
		id, err := s.VerdictID(ctx, v.Key)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	_, err = s.AddDecision(ctx, moderation.Decision{VerdictID: ids[0], Moderator: legacy, Decision: "confirm", Label: pipeline.LabelAbusive,
		Category: pipeline.CategoryExternalPayment, DecidedAt: at})
	require.NoError(t, err)
	_, err = s.TakeItem(ctx, ids[1], legacy, at, at.Add(-time.Hour), false)
	require.NoError(t, err)
	_, err = s.TakeItem(ctx, ids[2], other, at, at.Add(-time.Hour), false)
	require.NoError(t, err)

	moved, err := s.RekeyModerator(ctx, legacy, current, at)
	require.NoError(t, err)
	require.EqualValues(t, 2, moved)
	ds, err := s.Decisions(ctx, ids[0], 10)
	require.NoError(t, err)
	require.Equal(t, current, ds[0].Moderator)
	tk, held, err := s.TakeOf(ctx, ids[1])
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, current, tk.Moderator, "their take is still theirs")
	released, err := s.ReleaseItem(ctx, ids[1], current)
	require.NoError(t, err)
	require.True(t, released)
	tk, _, err = s.TakeOf(ctx, ids[2])
	require.NoError(t, err)
	require.Equal(t, other, tk.Moderator, "another moderator's take is untouched")

	moved, err = s.RekeyModerator(ctx, legacy, current, at.Add(time.Hour))
	require.NoError(t, err)
	require.Zero(t, moved)
	as, err := s.PseudonymAliases(ctx, pipeline.AliasModerator, current)
	require.NoError(t, err)
	require.Equal(t, []pipeline.PseudonymAlias{{Purpose: pipeline.AliasModerator, Legacy: legacy, Current: current}}, as)

	_, err = s.RekeyModerator(ctx, current, legacy, at)
	require.Error(t, err, "the forms are checked")
}
