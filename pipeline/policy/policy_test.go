package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/policy"
)

var t0 = time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)

func TestTheShippedPolicyDryRunsAllButEscalate(t *testing.T) {
	p := policy.Default()
	require.Len(t, p.Hash, 64)
	for _, r := range p.Rules {
		for _, a := range r.Actions {
			if a.Action == pipeline.ActionEscalate {
				require.Equal(t, pipeline.ModeOn, a.Mode, r.ID)
			} else {
				require.Equal(t, pipeline.ModeDryRun, a.Mode, "%s %s", r.ID, a.Action)
			}
		}
	}
}

func TestABadPolicyListsEveryProblem(t *testing.T) {
	bad := `{"version":"","defaults":{"locale":"fr","suppress_notices":"0s","action_ttl":"1h","restrict_for":"1h","cleared_for":"1h",
	  "heavy_per_account_daily":0,"heavy_min_campaign_rooms":1,"heavy_min_history_rooms":0},
	  "rules":[{"id":"Bad Id","name":"","daily_cap":0,"match":{"labels":["clean"],"categories":["nope"],"min_severity":9,"min_confidence":2,
	    "sources":["moderator"],"offender_roles":["system"],"signals_any":["bank_account","account_number"]},"actions":[{"action":"ban","mode":"loud"},{"action":"retract_notice","mode":"on"}]},
	   {"id":"dup","name":"x","daily_cap":1,"match":{},"actions":[{"action":"escalate","mode":"on"},{"action":"escalate","mode":"off"}]},
	   {"id":"dup","name":"x","daily_cap":1,"match":{},"actions":[{"action":"escalate","mode":"on"}]}]}`
	_, err := policy.Parse([]byte(bad))
	require.Error(t, err)
	for _, want := range []string{"version", "defaults.locale", "defaults.suppress_notices", "heavy_per_account_daily", "beyond the room",
		"id must be", "name must be", "daily_cap", "\"ban\" is not one of", "\"retract_notice\"", "mode \"loud\"", "match.labels", "match.categories",
		"min_severity", "min_confidence", "match.sources", "match.offender_roles", `match.signals_any: "account_number"`, "named twice", "not unique"} {
		require.Contains(t, err.Error(), want)
	}
}

func TestAnUnknownFieldIsAProblem(t *testing.T) {
	_, err := policy.Parse([]byte(`{"version":"v","colour":"red"}`))
	require.ErrorContains(t, err, "colour")
}

const testPolicy = `{"version":"t1","defaults":{"locale":"ko","suppress_notices":"24h","action_ttl":"1h","restrict_for":"24h","cleared_for":"720h",
  "heavy_per_account_daily":1,"heavy_min_campaign_rooms":3,"heavy_min_history_rooms":1},
  "rules":[
   {"id":"notice","name":"Notice","daily_cap":2,"match":{"labels":["abusive"],"categories":["external_payment"],"min_severity":3,"min_confidence":0.8,
     "offender_roles":["seller"],"sources":["realtime","on_demand"]},
    "actions":[{"action":"warn_counterpart","mode":"on"},{"action":"escalate","mode":"on"},{"action":"warn_sender","mode":"off"}]},
   {"id":"heavy","name":"Heavy","daily_cap":10,"match":{"labels":["abusive"],"min_severity":4},
    "actions":[{"action":"restrict_sender","mode":"dry_run"},{"action":"hold_transaction","mode":"on"}]},
   {"id":"signal","name":"Signal","daily_cap":10,"match":{"signals_any":["campaign_contact"]},"actions":[{"action":"escalate","mode":"on"}]},
   {"id":"old","name":"Old","daily_cap":10,"expires":"2026-12-01T00:00:00Z","match":{},"actions":[{"action":"escalate","mode":"on"}]}]}`

func evidence() policy.Evidence {
	return policy.Evidence{
		Key:   pipeline.ReviewKey{RoomID: "room-1", WindowStart: t0.Add(-10 * time.Minute), WindowEnd: t0, PipelineVersion: "p"},
		Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4, Confidence: 0.9,
		Source: pipeline.ActionSourceRealtime, OffenderRole: pipeline.RoleSeller, Offenders: []string{"s1"}, Revision: 1,
	}
}

type got struct {
	rule    string
	kind    pipeline.ActionKind
	mode    pipeline.ActionMode
	account string
	outcome policy.Outcome
}

func summarise(ds []policy.Decision) []got {
	var out []got
	for _, d := range ds {
		out = append(out, got{d.Rule.ID, d.Kind, d.Mode, d.Account, d.Outcome})
	}
	return out
}

func TestEvaluate(t *testing.T) {
	p, err := policy.Parse([]byte(testPolicy))
	require.NoError(t, err)
	W := policy.OutcomeWritten
	cases := []struct {
		name string
		ev   func(*policy.Evidence)
		st   policy.State
		want []got
	}{
		{"single room: notice and escalate, heavy refused for weak evidence", nil, policy.State{}, []got{
			{"notice", "warn_counterpart", "on", "s1", W}, {"notice", "escalate", "on", "", W},
			{"heavy", "restrict_sender", "dry_run", "s1", policy.OutcomeWeakEvidence}, {"heavy", "hold_transaction", "on", "s1", policy.OutcomeWeakEvidence}}},
		{"campaign evidence: one heavy action, the second rate-limited", func(e *policy.Evidence) {
			e.CampaignRooms = 3
			e.Signals = []string{"campaign_contact"}
		}, policy.State{}, []got{
			{"notice", "warn_counterpart", "on", "s1", W}, {"notice", "escalate", "on", "", W},
			{"heavy", "restrict_sender", "dry_run", "s1", W}, {"heavy", "hold_transaction", "on", "s1", policy.OutcomeRateLimited},
			{"signal", "escalate", "on", "", W}}},
		{"history evidence and an account already at its heavy limit", func(e *policy.Evidence) { e.HistoryRooms = 1 },
			policy.State{HeavyToday: map[string]int{"s1": 1}}, []got{
				{"notice", "warn_counterpart", "on", "s1", W}, {"notice", "escalate", "on", "", W},
				{"heavy", "restrict_sender", "dry_run", "s1", policy.OutcomeRateLimited}, {"heavy", "hold_transaction", "on", "s1", policy.OutcomeRateLimited}}},
		{"suppressed notice, cleared account, capped rule", func(e *policy.Evidence) { e.Severity = 3 },
			policy.State{Suppressed: map[string]bool{policy.SuppressKey("room-1", "s1", "notice"): true}, RuleToday: map[string]int{"notice": 1}}, []got{
				{"notice", "warn_counterpart", "on", "s1", policy.OutcomeSuppressed}, {"notice", "escalate", "on", "", W}}},
		{"cap reached by this call", func(e *policy.Evidence) { e.Severity = 3; e.Offenders = []string{"s1", "s2"} },
			policy.State{RuleToday: map[string]int{"notice": 0}}, []got{
				{"notice", "warn_counterpart", "on", "s1", W}, {"notice", "warn_counterpart", "on", "s2", W}, {"notice", "escalate", "on", "", policy.OutcomeCapped}}},
		{"cleared by an overturn", func(e *policy.Evidence) { e.Severity = 3 },
			policy.State{Cleared: map[string]bool{policy.ClearedKey("s1", "notice"): true}}, []got{
				{"notice", "warn_counterpart", "on", "s1", policy.OutcomeCleared}, {"notice", "escalate", "on", "", W}}},
		{"no offender named", func(e *policy.Evidence) { e.Severity = 3; e.Offenders = nil }, policy.State{}, []got{
			{"notice", "warn_counterpart", "on", "", policy.OutcomeNoOffender}, {"notice", "escalate", "on", "", W}}},
		{"buyer offender, batch source: the notice rule does not match", func(e *policy.Evidence) {
			e.Severity = 3
			e.OffenderRole = pipeline.RoleBuyer
		}, policy.State{}, nil},
		{"campaign re-review of an old chat: escalate only, heavy and notice refused as old_chat", func(e *policy.Evidence) {
			e.Source = pipeline.ActionSourceCampaign
			e.CampaignRooms = 3
			e.Signals = []string{"campaign_contact"}
		}, policy.State{}, []got{
			{"heavy", "restrict_sender", "dry_run", "s1", policy.OutcomeOldChat}, {"heavy", "hold_transaction", "on", "s1", policy.OutcomeOldChat},
			{"signal", "escalate", "on", "", W}}},
		{"below confidence", func(e *policy.Evidence) { e.Confidence = 0.5; e.Severity = 3 }, policy.State{}, nil},
		{"clean never matches, even a match-all rule", func(e *policy.Evidence) {
			e.Label = pipeline.LabelClean
			e.Signals = []string{"campaign_contact"}
		}, policy.State{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := evidence()
			if tc.ev != nil {
				tc.ev(&ev)
			}
			require.Equal(t, tc.want, summarise(p.Evaluate(ev, tc.st, t0)))
		})
	}
}

func TestARuleExpires(t *testing.T) {
	p, err := policy.Parse([]byte(testPolicy))
	require.NoError(t, err)
	ev := evidence()
	ev.Label = pipeline.LabelSuspicious
	require.Len(t, p.Evaluate(ev, policy.State{}, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)), 1)
	require.Empty(t, p.Evaluate(ev, policy.State{}, t0))
}

func TestBuiltActionsPassTheStrictWriter(t *testing.T) {
	p, err := policy.Parse([]byte(testPolicy))
	require.NoError(t, err)
	ev := evidence()
	ev.CampaignRooms = 5
	ev.MessageAt = t0.Add(-time.Minute)
	keys := map[string]bool{}
	for _, d := range p.Evaluate(ev, policy.State{}, t0) {
		if d.Outcome != policy.OutcomeWritten {
			continue
		}
		a := p.Action(d, ev, t0)
		b, err := pipeline.EncodeProtectiveAction(a)
		require.NoError(t, err, "%s %s", d.Rule.ID, d.Kind)
		require.NotContains(t, strings.ToLower(string(b)), "rationale")
		require.Equal(t, p.Hash, a.PolicyHash)
		require.False(t, keys[a.IdempotencyKey])
		keys[a.IdempotencyKey] = true
		// The same decision built again (a redelivered review) has the same key.
		require.Equal(t, a.IdempotencyKey, p.Action(d, ev, t0.Add(time.Minute)).IdempotencyKey)
		if d.Kind == pipeline.ActionWarnCounterpart {
			require.Equal(t, pipeline.RoleBuyer, a.Custom.Counterpart)
			require.Equal(t, "counterpart_external_payment", a.Custom.Template)
		}
		if d.Kind == pipeline.ActionRestrictSender {
			require.Equal(t, t0.Add(24*time.Hour), *a.Custom.Until)
		}
	}
	require.Len(t, keys, 3) // notice, escalate, restrict (the hold is rate-limited behind it)
}

func TestEvidenceOfAVerdict(t *testing.T) {
	v := pipeline.Verdict{Key: evidence().Key, Revision: 2, Label: pipeline.LabelAbusive, Subjects: []string{"s1"},
		OffenderRole: pipeline.RoleSeller, Campaigns: []pipeline.CampaignCount{{Kind: "account", Rooms: 4}, {Kind: "url", Rooms: 7}},
		Stages: []pipeline.StageResult{{Output: []byte(`{"rule_signals":["bank_account","Not A Kind","url"],"account_history":{"status":"ok","days":30,"lines":[
			{"role":"seller","label":"abusive","category":"external_payment","rooms":2},
			{"role":"seller","label":"abusive","category":"external_payment","overturned":true,"rooms":5},
			{"role":"buyer","label":"abusive","category":"harassment","rooms":3}]}}`)}}}
	ev := policy.EvidenceOf(v, pipeline.ActionSourceBatch)
	require.Equal(t, 7, ev.CampaignRooms)
	require.Equal(t, 2, ev.HistoryRooms)
	require.Equal(t, []string{"bank_account", "url", "campaign_account", "campaign_url"}, ev.Signals, "the recorded rule signals, then the campaign marks")
	require.Equal(t, 2, ev.Revision)
}

// TestACampaignReReviewOnlyEscalates: a rule written for campaign
// re-reviews that asks for a notice and a hold still only escalates, and
// the refusals do not use the rule's cap.
func TestACampaignReReviewOnlyEscalates(t *testing.T) {
	p, err := policy.Parse([]byte(`{"version":"t2","defaults":{"locale":"ko","suppress_notices":"24h","action_ttl":"1h","restrict_for":"24h","cleared_for":"720h",
  "heavy_per_account_daily":1,"heavy_min_campaign_rooms":3,"heavy_min_history_rooms":1},
  "rules":[{"id":"camp","name":"Campaign","daily_cap":1,"single_room_heavy":true,"match":{"sources":["campaign"]},
    "actions":[{"action":"warn_counterpart","mode":"on"},{"action":"hold_transaction","mode":"on"},{"action":"escalate","mode":"on"}]}]}`))
	require.NoError(t, err)
	ev := evidence()
	ev.Source = pipeline.ActionSourceOf(pipeline.SourceCampaign, false)
	require.Equal(t, []got{{"camp", "warn_counterpart", "on", "s1", policy.OutcomeOldChat}, {"camp", "hold_transaction", "on", "s1", policy.OutcomeOldChat},
		{"camp", "escalate", "on", "", policy.OutcomeWritten}}, summarise(p.Evaluate(ev, policy.State{}, t0)))
	require.Contains(t, policy.Outcomes, policy.OutcomeOldChat)
	ev.Source = pipeline.ActionSourceBatch
	require.Empty(t, p.Evaluate(ev, policy.State{}, t0), "the rule matches campaign re-reviews only")
}

// signals_any matches the rule signals a review recorded with its
// verdict, not only campaign marks.
func TestSignalsAnyMatchesTheRecordedRuleSignals(t *testing.T) {
	p, err := policy.Parse([]byte(`{"version":"t-sig","defaults":{"locale":"ko","suppress_notices":"24h","action_ttl":"1h","restrict_for":"24h",
	  "cleared_for":"720h","heavy_per_account_daily":1,"heavy_min_campaign_rooms":3,"heavy_min_history_rooms":1},
	  "rules":[{"id":"bank","name":"Bank account","daily_cap":10,"match":{"signals_any":["bank_account","payment_link"]},
	    "actions":[{"action":"escalate","mode":"on"}]}]}`))
	require.NoError(t, err)
	v := pipeline.Verdict{Key: evidence().Key, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
		Stages: []pipeline.StageResult{{Output: []byte(`{"risk":"high","rule_signals":["bank_account","phone"]}`)}}}
	require.Len(t, p.Evaluate(policy.EvidenceOf(v, pipeline.ActionSourceRealtime), policy.State{}, t0), 1)
	v.Stages[0].Output = []byte(`{"risk":"high","rule_signals":["phone"]}`)
	require.Empty(t, p.Evaluate(policy.EvidenceOf(v, pipeline.ActionSourceRealtime), policy.State{}, t0))
	require.Contains(t, policy.SignalNames(), "prepayment")
	require.Contains(t, policy.SignalNames(), "campaign_script")
}
