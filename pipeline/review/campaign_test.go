package review

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/pipeline/campaign/campaigntest"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

const campaignScript = "앱이 너무 느려서요 카톡으로 얘기해요 아이디 deal8282 입니다. 선입금 해주시면 바로 발송해 드릴게요"

// TestCampaignSignalReachesTriageAndIsRecorded: the sixth room running a
// script gets the campaign signals (script bands and the contact) as rule
// signal lines (counts only, never the text), triage answering "no risk"
// cannot end it early, and the verdict records the signals as keyed marks.
// Earlier rooms, below the threshold, get none.
func TestCampaignSignalReachesTriageAndIsRecorded(t *testing.T) {
	t.Parallel()
	cfg := campaign.DefaultConfig()
	cfg.Enabled = true
	det, err := campaign.New(cfg, &campaigntest.Fake{}, prometheus.NewRegistry(), nil)
	require.NoError(t, err)
	answers := map[pipeline.StageName][]string{
		pipeline.StageTriage:  {`{"risk":"none","categories":[],"reason":"x"}`},
		pipeline.StageExtract: {`{"evidence":[]}`},
		pipeline.StageJudge:   {`{"label":"suspicious","category":"off_platform","severity":3,"confidence":0.7,"action":"warn","rationale":"x","evidence_ids":["m2"],"offender_role":"seller"}`},
	}
	var v pipeline.Verdict
	var fr *fakeRouter
	for i := range 6 {
		fr = &fakeRouter{answers: answers}
		rev, err := New(Config{Campaigns: det}, fr, nil, nil, nil)
		require.NoError(t, err)
		msgs := chat("buyer: 아직 판매중인가요?", "seller: "+campaignScript)
		v, err = rev.Review(t.Context(), event(fmt.Sprint("room-", i)), msgs, 1)
		require.NoError(t, err)
		if i < cfg.MinRooms-1 {
			require.Empty(t, v.Campaigns, "room %d", i)
			require.Len(t, v.Sightings, 5, "room %d: its marks are recorded below the threshold, for a campaign found later", i)
		}
	}
	require.False(t, v.EarlyExit, "a campaign signal forbids the early clean exit")
	require.Len(t, fr.calls, 3, "triage, extract, judge")
	require.Len(t, v.Campaigns, 5, "four script bands and the messenger id")
	for _, c := range v.Campaigns {
		require.Equal(t, 6, c.Rooms)
		require.Equal(t, 1, c.Senders)
		require.Equal(t, "m2", c.MessageID)
		require.True(t, pipeline.IsSubjectPseudonym(c.Mark))
	}
	prompt := fmt.Sprint(fr.calls[0].Messages)
	require.Contains(t, prompt, "campaign_script")
	require.Contains(t, prompt, "campaign_contact")
	require.Contains(t, prompt, "in 6 rooms from 1 senders in the last 24 h")
	for _, c := range v.Campaigns {
		require.NotContains(t, prompt, strings.TrimPrefix(c.Mark, "hmac-dev:"), "marks are not shown to the models")
	}
}

// TestNoCampaignsWithoutTheDetectorOrARiskySignal: no detector, no
// counting; a room without a rule signal is not counted at all.
func TestNoCampaignsWithoutTheDetectorOrARiskySignal(t *testing.T) {
	t.Parallel()
	fake := &campaigntest.Fake{}
	cfg := campaign.DefaultConfig()
	det, err := campaign.New(cfg, fake, nil, nil)
	require.NoError(t, err)
	answers := map[pipeline.StageName][]string{pipeline.StageTriage: {`{"risk":"none","categories":[],"reason":"x"}`}}
	rev, err := New(Config{Campaigns: det}, &fakeRouter{answers: answers}, nil, nil, nil)
	require.NoError(t, err)
	v, err := rev.Review(t.Context(), event("benign"), chat("buyer: 아직 판매중인가요?", "seller: 네 안전결제로 할게요"), 1)
	require.NoError(t, err)
	require.True(t, v.EarlyExit)
	require.Zero(t, fake.Calls, "nothing risky: the counter is not asked")

	plain, err := New(Config{}, &fakeRouter{answers: answers}, nil, nil, nil)
	require.NoError(t, err)
	v, err = plain.Review(t.Context(), event("r"), chat("seller: "+campaignScript), 1)
	require.Error(t, err, "no extract answer scripted: the review went on past triage")
	require.Empty(t, v.Campaigns)
}

// TestCampaignCountsKeepMatchingLegacyMarks: five rooms counted by the
// release before per-purpose keys (legacy marks, "hmac:") and a sixth
// reviewed now: with --legacy-pseudonyms the sixth is the campaign's sixth
// room (its counts taken in both forms), its signals carry the current
// marks, and the verdict pairs each with the legacy mark and each subject
// with its legacy pseudonym; without it the count starts again at one.
func TestCampaignCountsKeepMatchingLegacyMarks(t *testing.T) {
	t.Parallel()
	keys, err := pseudonym.New([]byte("key-a-of-at-least-thirty-two-bytes-long"))
	require.NoError(t, err)
	cfg := campaign.DefaultConfig()
	cfg.Enabled = true
	answers := map[pipeline.StageName][]string{
		pipeline.StageTriage:  {`{"risk":"none","categories":[],"reason":"x"}`},
		pipeline.StageExtract: {`{"evidence":[]}`},
		pipeline.StageJudge:   {`{"label":"suspicious","category":"off_platform","severity":3,"confidence":0.7,"action":"warn","rationale":"x","evidence_ids":["m2"],"offender_role":"seller"}`},
	}
	msgs := chat("buyer: 아직 판매중인가요?", "seller: "+campaignScript)
	for _, legacyOn := range []bool{true, false} {
		fake := &campaigntest.Fake{}
		old := chatprep.NewCampaignMarker(keys, true)
		_, legacy := old.SightingsWithLegacy(msgs)
		for i := range 5 {
			_, err := fake.Observe(t.Context(), old.LegacyParty("room", fmt.Sprint("old-", i)), legacy, time.Now())
			require.NoError(t, err)
		}
		det, err := campaign.New(cfg, fake, nil, nil)
		require.NoError(t, err)
		rev, err := New(Config{Keys: keys, Campaigns: det, LegacyPseudonyms: legacyOn}, &fakeRouter{answers: answers}, nil, nil, nil)
		require.NoError(t, err)
		v, err := rev.Review(t.Context(), event("new-room"), msgs, 1)
		require.NoError(t, err)
		if !legacyOn {
			require.Empty(t, v.Campaigns, "the current marks alone have one room")
			require.Empty(t, v.Aliases)
			continue
		}
		require.Len(t, v.Campaigns, 5)
		was := map[string]string{}
		for _, a := range v.Aliases {
			if a.Purpose == pipeline.AliasCampaign {
				was[a.Current] = a.Legacy
			}
		}
		for i, c := range v.Campaigns {
			require.Equal(t, 6, c.Rooms, "the legacy count holds the rooms from before")
			require.True(t, strings.HasPrefix(c.Mark, "hmac2:"), c.Mark)
			require.True(t, strings.HasPrefix(was[c.Mark], "hmac:"), "campaign %d has its legacy mark", i)
		}
		require.Contains(t, v.Aliases, pipeline.PseudonymAlias{Purpose: pipeline.AliasSubject,
			Legacy: keys.Legacy(pseudonym.Subject, v.Subjects[0]), Current: rev.SubjectPseudonyms(v.Subjects)[0]})
	}
}

// establishedSeller is a history lookup that says every room's seller
// has clean rooms behind it.
type establishedSeller struct{}

func (establishedSeller) Lookup(context.Context, string, []pipeline.HistoryAccount) pipeline.HistorySeen {
	return pipeline.HistorySeen{Status: pipeline.HistoryOK, Days: 30, Lines: []pipeline.HistoryCount{
		{Role: pipeline.RoleSeller, Label: pipeline.LabelClean, Rooms: 12}}}
}

// TestAnEstablishedSellerRepeatingItselfIsARepeatSender: the same script
// from one seller with a clean history reaches the judge as a repeat
// sender, not a campaign, and the verdict records it so.
func TestAnEstablishedSellerRepeatingItselfIsARepeatSender(t *testing.T) {
	t.Parallel()
	cfg := campaign.DefaultConfig()
	cfg.Enabled = true
	det, err := campaign.New(cfg, &campaigntest.Fake{}, prometheus.NewRegistry(), nil)
	require.NoError(t, err)
	answers := map[pipeline.StageName][]string{
		pipeline.StageTriage:  {`{"risk":"low","categories":[],"reason":"x"}`},
		pipeline.StageExtract: {`{"evidence":[]}`},
		pipeline.StageJudge:   {`{"label":"suspicious","category":"off_platform","severity":3,"confidence":0.7,"action":"warn","rationale":"x","evidence_ids":["m2"],"offender_role":"seller"}`},
	}
	var v pipeline.Verdict
	var fr *fakeRouter
	for i := range 5 {
		fr = &fakeRouter{answers: answers}
		rev, err := New(Config{Campaigns: det, History: establishedSeller{}}, fr, nil, nil, nil)
		require.NoError(t, err)
		v, err = rev.Review(t.Context(), event(fmt.Sprint("shop-room-", i)), chat("buyer: 아직 판매중인가요?", "seller: "+campaignScript), 1)
		require.NoError(t, err)
	}
	require.NotEmpty(t, v.Campaigns)
	for _, c := range v.Campaigns {
		require.True(t, c.RepeatSender, "one established seller")
	}
	prompt := fmt.Sprint(fr.calls[0].Messages)
	require.Contains(t, prompt, "repeat_sender_")
	require.Contains(t, prompt, "repeat sender, not a campaign")
	require.NotContains(t, prompt, "campaign_script")
}
