package pipeline_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

var actionT0 = time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)

func sampleAction() pipeline.ProtectiveAction {
	key := pipeline.ReviewKey{RoomID: "room-1", WindowStart: actionT0.Add(-10 * time.Minute), WindowEnd: actionT0, PipelineVersion: "pv1"}
	msg := actionT0.Add(-time.Minute)
	return pipeline.ProtectiveAction{
		SchemaVersion:   pipeline.ActionSchemaVersion,
		IdempotencyKey:  pipeline.ForwardActionKey(key, 1, "prepay_notice", pipeline.ActionWarnCounterpart, "seller-9"),
		PolicyVersion:   "2026-12-07",
		PolicyHash:      strings.Repeat("ab", 32),
		VerdictRevision: 1,
		Source:          pipeline.ActionSourceRealtime,
		Mode:            pipeline.ModeOn,
		IssuedAt:        actionT0,
		MessageAt:       &msg,
		ExpiresAt:       actionT0.Add(time.Hour),
		Item:            pipeline.ActionEntity{ID: "room-1", TypeID: pipeline.EntityRoom},
		Creator:         pipeline.ActionEntity{ID: "seller-9", TypeID: pipeline.EntityAccount},
		Action:          pipeline.ActionRef{ID: pipeline.ActionWarnCounterpart},
		Policies:        []pipeline.ActionPolicy{{ID: pipeline.CategoryExternalPayment, Name: "external payment", Penalty: pipeline.PenaltyFromSeverity(4)}},
		Rules:           []pipeline.ActionRule{{ID: "prepay_notice", Name: "Prepayment to a personal account"}},
		Custom: pipeline.ActionCustom{
			Template:    pipeline.NoticeTemplate(pipeline.ActionWarnCounterpart, pipeline.CategoryExternalPayment),
			Locale:      "ko",
			Counterpart: pipeline.RoleBuyer,
		},
	}
}

func TestActionRoundTripsThroughTheWriterAndTheReader(t *testing.T) {
	a := sampleAction()
	b, err := pipeline.EncodeProtectiveAction(a)
	require.NoError(t, err)
	// The wire names are Coop's inside chatguard's envelope.
	for _, field := range []string{`"idempotency_key"`, `"item":{"id":"room-1","typeId":"room"}`, `"creator":{"id":"seller-9","typeId":"account"}`,
		`"action":{"id":"warn_counterpart"}`, `"penalty":"HIGH"`, `"template":"counterpart_external_payment"`, `"policy_hash"`} {
		require.Contains(t, string(b), field)
	}
	got, err := pipeline.DecodeProtectiveAction(b)
	require.NoError(t, err)
	require.Equal(t, a.IdempotencyKey, got.IdempotencyKey)
	require.Equal(t, a.Custom, got.Custom)
	require.True(t, a.ExpiresAt.Equal(got.ExpiresAt))
	msg, err := pipeline.ActionOutboxMessage(a)
	require.NoError(t, err)
	require.Equal(t, pipeline.OutboxActions, msg.Destination)
	require.Equal(t, a.IdempotencyKey, msg.EventID)
	require.NoError(t, msg.Validate())
}

func TestTheWriterNamesEveryProblem(t *testing.T) {
	a := sampleAction()
	a.SchemaVersion = 2
	a.Mode = "maybe"
	a.Item.TypeID = "thing"
	a.Custom.Template = "the model says: pay me"
	a.Custom.Counterpart = ""
	a.PolicyHash = "x"
	a.Rules = nil
	_, err := pipeline.EncodeProtectiveAction(a)
	var inv *pipeline.InvalidActionError
	require.True(t, errors.As(err, &inv))
	for _, want := range []string{"schema_version 2", "mode \"maybe\"", "item.typeId", "custom.template", "custom.counterpart", "policy_hash", "rules is empty"} {
		require.Contains(t, inv.Reason, want)
	}
}

func TestTheWriterRefusesWhatEachActionNeeds(t *testing.T) {
	cases := map[string]func(*pipeline.ProtectiveAction){
		"restrict_sender has no custom.until": func(a *pipeline.ProtectiveAction) {
			a.Action.ID = pipeline.ActionRestrictSender
			a.Custom = pipeline.ActionCustom{}
		},
		"a reversal has no reverses key": func(a *pipeline.ProtectiveAction) { a.Action.ID = pipeline.ActionRetractNotice },
		"custom.template and custom.locale are for notices only": func(a *pipeline.ProtectiveAction) {
			a.Action.ID = pipeline.ActionHoldTransaction
		},
		"expires_at is not after issued_at": func(a *pipeline.ProtectiveAction) { a.ExpiresAt = a.IssuedAt },
		"creator.id is missing":             func(a *pipeline.ProtectiveAction) { a.Creator = pipeline.ActionEntity{} },
		"policies.id \"clean\"":             func(a *pipeline.ProtectiveAction) { a.Policies[0].ID = pipeline.CategoryClean },
	}
	for want, mutate := range cases {
		t.Run(want, func(t *testing.T) {
			a := sampleAction()
			mutate(&a)
			require.ErrorContains(t, a.Validate(), want)
		})
	}
}

func TestEscalateNeedsNoCreator(t *testing.T) {
	a := sampleAction()
	a.Action.ID = pipeline.ActionEscalate
	a.Creator = pipeline.ActionEntity{}
	a.Custom = pipeline.ActionCustom{}
	require.NoError(t, a.Validate())
}

func TestTheReaderToleratesWhatItCanApplyPast(t *testing.T) {
	b, err := pipeline.EncodeProtectiveAction(sampleAction())
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	m["added_later"] = map[string]any{"x": 1}
	m["custom"].(map[string]any)["template"] = "counterpart_new_kind"
	m["custom"].(map[string]any)["locale"] = "ja"
	delete(m, "policy_hash")
	b2, err := json.Marshal(m)
	require.NoError(t, err)
	got, err := pipeline.DecodeProtectiveAction(b2)
	require.NoError(t, err)
	require.Equal(t, "counterpart_new_kind", got.Custom.Template)
	require.Equal(t, "ja", got.Custom.Locale)
}

func TestTheReaderRefusesWhatItCannotApply(t *testing.T) {
	cases := map[string]string{
		"not a JSON action":      `{"schema_version":`,
		"trailing data":          `{} {}`,
		"is not a known action":  `{"schema_version":1,"idempotency_key":"k","action":{"id":"ban"},"mode":"on","item":{"id":"r"},"creator":{"id":"c"},"expires_at":"2026-12-07T00:00:00Z"}`,
		"mode \"off\"":           `{"schema_version":1,"idempotency_key":"k","action":{"id":"escalate"},"mode":"off","item":{"id":"r"},"expires_at":"2026-12-07T00:00:00Z"}`,
		"schema_version 9":       `{"schema_version":9,"idempotency_key":"k","action":{"id":"escalate"},"mode":"on","item":{"id":"r"},"expires_at":"2026-12-07T00:00:00Z"}`,
		"expires_at is missing":  `{"schema_version":1,"idempotency_key":"k","action":{"id":"escalate"},"mode":"on","item":{"id":"r"}}`,
		"idempotency_key is mis": `{"schema_version":1,"action":{"id":"escalate"},"mode":"on","item":{"id":"r"},"expires_at":"2026-12-07T00:00:00Z"}`,
		"over the":               `{"pad":"` + strings.Repeat("x", pipeline.MaxActionBytes) + `"}`,
	}
	for want, body := range cases {
		t.Run(want, func(t *testing.T) {
			_, err := pipeline.DecodeProtectiveAction([]byte(body))
			var inv *pipeline.InvalidActionError
			require.True(t, errors.As(err, &inv), "%v", err)
			require.Contains(t, inv.Reason, want)
		})
	}
}

func TestActionKeysAreDeterministicAndDistinct(t *testing.T) {
	key := pipeline.ReviewKey{RoomID: "r", WindowStart: actionT0, WindowEnd: actionT0.Add(time.Minute), PipelineVersion: "p"}
	k1 := pipeline.ForwardActionKey(key, 1, "rule", pipeline.ActionWarnSender, "acc")
	// A redelivered review computes the same key; a location change of the
	// same instant does too.
	key2 := key
	key2.WindowStart = key.WindowStart.In(time.FixedZone("KST", 9*3600))
	require.Equal(t, k1, pipeline.ForwardActionKey(key2, 1, "rule", pipeline.ActionWarnSender, "acc"))
	seen := map[string]bool{k1: true}
	for _, k := range []string{
		pipeline.ForwardActionKey(key, 2, "rule", pipeline.ActionWarnSender, "acc"),
		pipeline.ForwardActionKey(key, 1, "rule2", pipeline.ActionWarnSender, "acc"),
		pipeline.ForwardActionKey(key, 1, "rule", pipeline.ActionWarnCounterpart, "acc"),
		pipeline.ForwardActionKey(key, 1, "rule", pipeline.ActionWarnSender, "acc2"),
		pipeline.ReversalActionKey(k1, 1),
		pipeline.ReversalActionKey(k1, 2),
		pipeline.ReapplyActionKey(k1, 1),
	} {
		require.False(t, seen[k], "key collision")
		require.LessOrEqual(t, len(k), pipeline.MaxOutboxEventID)
		seen[k] = true
	}
}

func TestActionKindVocabulary(t *testing.T) {
	for _, k := range pipeline.ProtectiveActionKinds {
		require.True(t, k.Protective())
		require.False(t, k.Reversal())
		if r := k.ReversedBy(); r != "" {
			require.True(t, r.Reversal())
		}
	}
	require.Equal(t, pipeline.ActionKind(""), pipeline.ActionEscalate.ReversedBy())
	require.True(t, pipeline.ActionRestrictSender.Heavy())
	require.True(t, pipeline.ActionHoldTransaction.Heavy())
	require.False(t, pipeline.ActionWarnCounterpart.Heavy())
	require.Equal(t, pipeline.ActionSourceOnDemand, pipeline.ActionSourceOf(pipeline.SourceRealtime, true))
	require.Equal(t, pipeline.ActionSourceBatch, pipeline.ActionSourceOf("", false))
	require.Equal(t, pipeline.ActionSourceCampaign, pipeline.ActionSourceOf(pipeline.SourceCampaign, false))
	require.Equal(t, pipeline.ActionSourceCampaign, pipeline.ActionSourceOf(pipeline.SourceCampaign, true), "a campaign re-review run interactively stays escalate-only")
	require.True(t, pipeline.ActionSourceCampaign.Known())
	require.Equal(t, pipeline.PenaltySevere, pipeline.PenaltyFromSeverity(5))
	require.Equal(t, pipeline.PenaltyNone, pipeline.PenaltyFromSeverity(0))
	require.True(t, pipeline.KnownNoticeTemplate("sender_generic"))
	require.False(t, pipeline.KnownNoticeTemplate("sender_clean"))
}
