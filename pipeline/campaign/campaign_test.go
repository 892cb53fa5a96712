package campaign

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign/campaigntest"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func sight(mark, sender string) pipeline.CampaignSighting {
	return pipeline.CampaignSighting{Kind: pipeline.CampaignScript, Mark: campaigntest.Pseudonym(mark), MessageID: "m1", Sender: campaigntest.Pseudonym(sender)}
}

func detector(t *testing.T, c pipeline.CampaignCounter, clk clock.Clock) *Detector {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Enabled = true
	d, err := New(cfg, c, prometheus.NewRegistry(), clk)
	require.NoError(t, err)
	return d
}

// TestManyRoomsFewSendersIsACampaign: one account's script fires from the
// fourth room on; a phrase every sender writes never does, however many
// rooms it reaches; a seller's number shared in a few rooms does not
// either.
func TestManyRoomsFewSendersIsACampaign(t *testing.T) {
	t.Parallel()
	d := detector(t, &campaigntest.Fake{}, clock.NewFake(t0))
	for i := range 30 {
		room := campaigntest.Pseudonym(fmt.Sprint("room-", i))
		hits := d.Detect(context.Background(), room, []pipeline.CampaignSighting{
			sight("script", "scammer"),                                     // one sender everywhere
			sight("common", fmt.Sprint("buyer-", i)),                       // a new sender in every room
			sight(fmt.Sprint("phone-", i%10), fmt.Sprint("seller-", i%10)), // 10 sellers' own numbers, 3 rooms each
		})
		if i+1 < DefaultMinRooms {
			require.Empty(t, hits, "room %d", i)
			continue
		}
		require.Len(t, hits, 1, "room %d", i)
		require.Equal(t, campaigntest.Pseudonym("script"), hits[0].Mark)
		require.Equal(t, i+1, hits[0].Rooms)
		require.Equal(t, 1, hits[0].Senders)
	}
	require.Equal(t, float64(30-DefaultMinRooms+1), testutil.ToFloat64(d.m.lookups.WithLabelValues("campaign")))
}

// TestIsCampaignBounds: each threshold on its own.
func TestIsCampaignBounds(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	for _, tc := range []struct {
		rooms, senders int
		want           bool
	}{
		{4, 1, true}, {3, 1, false}, {5, 4, true}, {4, 4, false}, {13, 10, true}, {14, 11, false}, {5, 0, false},
	} {
		require.Equal(t, tc.want, c.IsCampaign(pipeline.CampaignCount{Rooms: tc.rooms, Senders: tc.senders}), "%+v", tc)
	}
}

// TestCounterDownOrSlowGivesNoSignal: a failing counter and one past the
// timeout give no campaign signals, each counted; the review is not held
// past the timeout.
func TestCounterDownOrSlowGivesNoSignal(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	d := detector(t, &campaigntest.Fake{Err: errors.New("redis down")}, clk)
	require.Nil(t, d.Detect(context.Background(), campaigntest.Pseudonym("r"), []pipeline.CampaignSighting{sight("a", "s")}))
	require.Equal(t, 1.0, testutil.ToFloat64(d.m.lookups.WithLabelValues("unavailable")))

	entered := make(chan struct{})
	slow := &blocking{entered: entered}
	d = detector(t, slow, clk)
	done := make(chan []pipeline.CampaignCount)
	go func() {
		done <- d.Detect(context.Background(), campaigntest.Pseudonym("r"), []pipeline.CampaignSighting{sight("a", "s")})
	}()
	<-entered
	clk.Advance(DefaultTimeout)
	require.Nil(t, <-done)
	require.Equal(t, 1.0, testutil.ToFloat64(d.m.lookups.WithLabelValues("timeout")))
	require.Nil(t, d.Detect(context.Background(), campaigntest.Pseudonym("r"), nil))
	require.Equal(t, 1.0, testutil.ToFloat64(d.m.lookups.WithLabelValues("no_marks")))
}

type blocking struct{ entered chan struct{} }

func (b *blocking) Observe(ctx context.Context, _ string, _ []pipeline.CampaignSighting, _ time.Time) ([]pipeline.CampaignCount, error) {
	close(b.entered)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestConfigValidateJoinsEveryProblem: one error names them all.
func TestConfigValidateJoinsEveryProblem(t *testing.T) {
	t.Parallel()
	require.NoError(t, DefaultConfig().Validate())
	err := Config{MinRooms: 1, Timeout: time.Minute}.Validate()
	for _, want := range []string{"min rooms", "rooms per sender", "max senders", "timeout", "min senders", "established clean rooms", "established overturned"} {
		require.ErrorContains(t, err, want)
	}
}

// TestRepeatSenderNeedsOneAccountWithStanding: a mark from several
// accounts is a campaign whoever they are; one account's mark is a
// repeat sender only when the account is verified, or established (clean
// rooms or overturned flags) with no flag standing.
func TestRepeatSenderNeedsOneAccountWithStanding(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	one := pipeline.CampaignCount{Rooms: 6, Senders: 1}
	two := pipeline.CampaignCount{Rooms: 6, Senders: 2}
	for _, tc := range []struct {
		name string
		n    pipeline.CampaignCount
		s    pipeline.SenderStanding
		want bool
	}{
		{"new account", one, pipeline.SenderStanding{}, false},
		{"verified", one, pipeline.SenderStanding{Verified: true}, true},
		{"verified but spread across accounts", two, pipeline.SenderStanding{Verified: true}, false},
		{"established", one, pipeline.SenderStanding{CleanRooms: 3}, true},
		{"too few clean rooms", one, pipeline.SenderStanding{CleanRooms: 2}, false},
		{"established but a flag stands", one, pipeline.SenderStanding{CleanRooms: 30, FlaggedRooms: 1}, false},
		{"a flag overturned", one, pipeline.SenderStanding{OverturnedRooms: 1}, true},
	} {
		require.Equal(t, tc.want, c.RepeatSender(tc.n, tc.s), tc.name)
	}
}

// TestClassifyReadsTheVerifiedFile: a verified account's mark is a repeat
// sender without history; the file's comments and blanks are skipped, a
// line with spaces is refused, and the signals are counted by class.
func TestClassifyReadsTheVerifiedFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := dir + "/verified.txt"
	require.NoError(t, os.WriteFile(path, []byte("# shops\nshop-1\n\n  shop-2  \n"), 0o600))
	cfg := DefaultConfig()
	cfg.VerifiedFile = path
	d, err := New(cfg, &campaigntest.Fake{}, nil, nil)
	require.NoError(t, err)
	sig := []pipeline.CampaignCount{{MessageID: "m1", Rooms: 5, Senders: 1}, {MessageID: "m2", Rooms: 5, Senders: 1}}
	d.Classify(sig, func(id string) (string, pipeline.SenderStanding) {
		if id == "m1" {
			return "shop-2", pipeline.SenderStanding{}
		}
		return "stranger", pipeline.SenderStanding{}
	})
	require.True(t, sig[0].RepeatSender)
	require.False(t, sig[1].RepeatSender)
	require.Equal(t, 1.0, testutil.ToFloat64(d.m.classes.WithLabelValues("repeat_sender")))
	require.Equal(t, 1.0, testutil.ToFloat64(d.m.classes.WithLabelValues("campaign")))

	require.NoError(t, os.WriteFile(path, []byte("shop 1\n"), 0o600))
	_, err = New(cfg, &campaigntest.Fake{}, nil, nil)
	require.ErrorContains(t, err, "line 1")
	cfg.VerifiedFile = dir + "/missing"
	_, err = New(cfg, &campaigntest.Fake{}, nil, nil)
	require.ErrorContains(t, err, "verified accounts")
}

// TestStandingSumsOneRolesLines: clean rooms, overturned flags and
// standing flags of one role; a clean verdict a moderator overturned is
// a flag.
func TestStandingSumsOneRolesLines(t *testing.T) {
	t.Parallel()
	h := pipeline.HistorySeen{Lines: []pipeline.HistoryCount{
		{Role: pipeline.RoleSeller, Label: pipeline.LabelClean, Rooms: 7},
		{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Overturned: true, Rooms: 2},
		{Role: pipeline.RoleSeller, Label: pipeline.LabelClean, Overturned: true, Rooms: 1},
		{Role: pipeline.RoleSeller, Label: pipeline.LabelSuspicious, Rooms: 3},
		{Role: pipeline.RoleBuyer, Label: pipeline.LabelClean, Rooms: 40},
	}}
	require.Equal(t, pipeline.SenderStanding{CleanRooms: 7, OverturnedRooms: 2, FlaggedRooms: 4}, h.Standing(pipeline.RoleSeller))
}
