package review

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
)

// TestVerdictSubjectsAreTheOffendersEvidenceSenders: the subjects are the
// senders with the judge's offender role whose messages are cited; the
// victim's cited reply never makes the victim a subject, and a clean
// verdict or an answer without a role (an older model) has none.
func TestVerdictSubjectsAreTheOffendersEvidenceSenders(t *testing.T) {
	t.Parallel()
	msgs := chat(
		"buyer: 아직 판매중인가요?",
		"seller: 네 선입금 해주시면 바로 보내드려요",
		"buyer: 안전결제는 안되나요?",
		"seller: 국민은행 123456-12-123456 로 보내주세요",
	)
	msgs[3].SenderID = "useller-2" // a second seller account in the room
	judge := func(label, category, role string, ids string) string {
		out := `{"label":"` + label + `","category":"` + category + `","severity":4,"confidence":0.9,"action":"restrict","rationale":"x","evidence_ids":[` + ids + `]`
		if role != "" {
			out += `,"offender_role":"` + role + `"`
		}
		return out + "}"
	}
	for _, tc := range []struct {
		name, answer string
		wantRole     pipeline.SenderRole
		want         []string
	}{
		{"seller", judge("abusive", "external_payment", "seller", `"m2","m3","m4"`), pipeline.RoleSeller, []string{"useller", "useller-2"}},
		{"only cited messages", judge("abusive", "external_payment", "seller", `"m4"`), pipeline.RoleSeller, []string{"useller-2"}},
		{"role with no cited message", judge("suspicious", "external_payment", "buyer", `"m2"`), pipeline.RoleBuyer, nil},
		{"no role from an older judge", judge("abusive", "external_payment", "", `"m2"`), "", nil},
		{"none", judge("abusive", "external_payment", "none", `"m2"`), "", nil},
		{"clean", `{"label":"clean","category":"clean","severity":1,"confidence":0.9,"action":"none","rationale":"x","evidence_ids":[],"offender_role":"none"}`, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fr := &fakeRouter{answers: map[pipeline.StageName][]string{
				pipeline.StageTriage:  {`{"risk":"high","categories":["external_payment"],"reason":"x"}`},
				pipeline.StageExtract: {`{"evidence":[]}`},
				pipeline.StageJudge:   {tc.answer},
			}}
			rev, err := New(Config{}, fr, nil, nil, nil)
			require.NoError(t, err)
			v, err := rev.Review(t.Context(), event("r-subj"), msgs, 1)
			require.NoError(t, err)
			require.Equal(t, tc.wantRole, v.OffenderRole)
			require.Equal(t, tc.want, v.Subjects)
			require.NotContains(t, v.Subjects, "ubuyer", "the victim is never a subject")
		})
	}
}

// TestSimulatorNamesTheSellerOfAPrepaymentScam: the simulator's judge
// follows the schema's offender_role, so the local stack records subjects.
func TestSimulatorNamesTheSellerOfAPrepaymentScam(t *testing.T) {
	t.Parallel()
	e := setup(t, envOpts{})
	v, err := e.rev.Review(t.Context(), event("r-subj-sim"), externalPaymentChat, 1)
	require.NoError(t, err)
	require.Equal(t, pipeline.RoleSeller, v.OffenderRole)
	require.Equal(t, []string{"useller"}, v.Subjects)
}

// TestSubjectPseudonymsAreKeyed: stable for one key, different under
// another (rotation), labelled dev under the dev key, never the id, and
// never the quote digest of the same text.
func TestSubjectPseudonymsAreKeyed(t *testing.T) {
	t.Parallel()
	key := func(k string) *Reviewer {
		keys, err := pseudonym.New([]byte(k))
		require.NoError(t, err)
		rev, err := New(Config{Keys: keys}, &fakeRouter{}, nil, nil, nil)
		require.NoError(t, err)
		return rev
	}
	a, b := key("key-a-of-at-least-thirty-two-bytes-long"), key("key-b-of-at-least-thirty-two-bytes-long")
	dev, err := New(Config{}, &fakeRouter{}, nil, nil, nil)
	require.NoError(t, err)
	ids := []string{"seller-8812", "seller-8813"}
	pa := a.SubjectPseudonyms(ids)
	require.Equal(t, pa, a.SubjectPseudonyms(ids), "stable")
	require.NotEqual(t, pa[0], pa[1])
	require.NotEqual(t, pa, b.SubjectPseudonyms(ids), "a new key gives new pseudonyms")
	for _, p := range pa {
		require.True(t, pipeline.IsSubjectPseudonym(p), p)
		require.NotContains(t, p, "8812")
		require.True(t, strings.HasPrefix(p, "hmac2:"))
	}
	require.True(t, strings.HasPrefix(dev.SubjectPseudonyms(ids)[0], "hmac2-dev:"))
	require.NotContains(t, a.quoteDigest("seller-8812"), strings.TrimPrefix(pa[0], "hmac2:"))
	require.Nil(t, a.SubjectPseudonyms(nil))
}

// TestNoQuoteDigestsToAPseudonym: whatever a chat quotes, its digest is
// never another purpose's value: a quote spelling the subject domain's
// input ("subject\x00" and an id) must not digest to that id's pseudonym,
// nor one spelling a campaign mark's input to that mark.
func TestNoQuoteDigestsToAPseudonym(t *testing.T) {
	t.Parallel()
	keys, err := pseudonym.New([]byte("key-a-of-at-least-thirty-two-bytes-long"))
	require.NoError(t, err)
	rev, err := New(Config{Keys: keys}, &fakeRouter{}, nil, nil, nil)
	require.NoError(t, err)
	pseud := rev.SubjectPseudonyms([]string{"seller-8812"})[0]
	_, hexPart, _ := strings.Cut(pseud, ":")
	require.NotContains(t, rev.quoteDigest("subject\x00seller-8812"), hexPart, "a quote collides with a subject pseudonym")
	room := rev.marker.Party("room", "r-1")
	_, hexPart, _ = strings.Cut(room, ":")
	require.NotContains(t, rev.quoteDigest("campaign-room\x00r-1"), hexPart, "a quote collides with a campaign pseudonym")
}
