package chatapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/queuetest"
)

var at0 = time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)

// actionBody encodes one action in mode on about room-1's seller s1
// with chatguard's strict writer (so the stand-in reads what the worker
// writes); edit changes it, and an edited action that the writer refuses
// is marshalled as is, as a faulty producer would send it.
func actionBody(t *testing.T, key string, kind pipeline.ActionKind, edit ...func(a *pipeline.ProtectiveAction)) []byte {
	t.Helper()
	until := at0.Add(30 * time.Minute)
	a := pipeline.ProtectiveAction{
		SchemaVersion: 1, IdempotencyKey: key, PolicyVersion: "test", PolicyHash: strings.Repeat("ab", 32), VerdictRevision: 1,
		Source: pipeline.ActionSourceRealtime, Mode: pipeline.ModeOn, IssuedAt: at0.Add(-time.Second), ExpiresAt: at0.Add(time.Hour),
		Item: pipeline.ActionEntity{ID: "room-1", TypeID: pipeline.EntityRoom}, Creator: pipeline.ActionEntity{ID: "s1", TypeID: pipeline.EntityAccount},
		Action:   pipeline.ActionRef{ID: kind},
		Policies: []pipeline.ActionPolicy{{ID: pipeline.CategoryExternalPayment, Name: "External payment", Penalty: pipeline.PenaltyHigh}},
		Rules:    []pipeline.ActionRule{{ID: "r", Name: "rule"}},
	}
	switch {
	case kind.Notice() || kind == pipeline.ActionRetractNotice:
		a.Custom.Template, a.Custom.Locale = pipeline.NoticeTemplate(kind, pipeline.CategoryExternalPayment), "ko"
		if kind == pipeline.ActionRetractNotice {
			a.Custom.Template = "counterpart_external_payment"
		}
		if kind == pipeline.ActionWarnCounterpart {
			a.Custom.Counterpart = pipeline.RoleBuyer
		}
	case kind == pipeline.ActionRestrictSender:
		a.Custom.Until = &until
	case kind == pipeline.ActionEscalate:
		a.Creator = pipeline.ActionEntity{}
	}
	for _, e := range edit {
		e(&a)
	}
	b, err := pipeline.EncodeProtectiveAction(a)
	if len(edit) == 0 {
		require.NoError(t, err)
	}
	if err != nil {
		b, err = json.Marshal(a)
		require.NoError(t, err)
	}
	return b
}

func reverses(key string) func(a *pipeline.ProtectiveAction) {
	return func(a *pipeline.ProtectiveAction) { a.Reverses = key }
}

func newActionServer(t *testing.T, clk clock.Clock, journal string) *chatapi.Server {
	t.Helper()
	s, err := chatapi.New(chatapi.Config{Clock: clk, ActionsJournal: journal, Messages: map[string][]pipeline.ChatMessage{
		"room-1": {{MessageID: "m1", SenderID: "s1", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, SentAt: at0.Add(-time.Minute), Text: "선입금 부탁드려요"}},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func history(t *testing.T, s *chatapi.Server) []pipeline.ChatMessage {
	t.Helper()
	rec := do(t, s, http.MethodGet, "/rooms/room-1/messages?from=2026-12-07T00:00:00Z&to=2026-12-08T00:00:00Z", "")
	require.Equal(t, http.StatusOK, rec.Code)
	var h pipeline.ChatHistory
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &h))
	return h.Messages
}

func apply(t *testing.T, s *chatapi.Server, body []byte) chatapi.Outcome {
	t.Helper()
	out, err := s.Apply(body)
	require.NoError(t, err)
	return out
}

func TestANoticeIsShownOncePerKeyFromItsTemplate(t *testing.T) {
	clk := clock.NewFake(at0)
	s := newActionServer(t, clk, "")
	body := actionBody(t, "k1", pipeline.ActionWarnCounterpart)
	require.Equal(t, chatapi.OutcomeApplied, apply(t, s, body))
	clk.Advance(time.Second)
	require.Equal(t, chatapi.OutcomeDuplicate, apply(t, s, body), "every copy carries the key; the second does nothing")

	msgs := history(t, s)
	require.Len(t, msgs, 2)
	n := msgs[1]
	require.Equal(t, pipeline.ActionNoticeID("k1"), n.MessageID)
	require.True(t, pipeline.IsActionNotice(n), "a system message under the notice id")
	require.Equal(t, chatapi.NoticeSender, n.SenderID)
	require.Equal(t, at0, n.SentAt, "shown when applied")
	require.True(t, strings.HasPrefix(n.Text, "[안전 안내]"), "the localized template's text")

	st := s.Actions().Stats
	require.Equal(t, int64(1), st.Outcomes[chatapi.OutcomeApplied])
	require.Equal(t, int64(1), st.Outcomes[chatapi.OutcomeDuplicate])
	require.Equal(t, int64(1), st.Applied[pipeline.ActionWarnCounterpart])
}

func TestActionsAreAppliedAndReversed(t *testing.T) {
	clk := clock.NewFake(at0)
	s := newActionServer(t, clk, "")
	apply(t, s, actionBody(t, "w1", pipeline.ActionWarnCounterpart))
	apply(t, s, actionBody(t, "h1", pipeline.ActionHoldTransaction))
	apply(t, s, actionBody(t, "r1", pipeline.ActionRestrictSender))

	st := s.Actions()
	require.Equal(t, chatapi.Transaction{ID: chatapi.RoomTransaction("room-1"), State: chatapi.TxHeld, Key: "h1"}, st.Transactions["room-1"])
	require.True(t, s.Restricted("s1"))
	seller := pipeline.ChatMessage{MessageID: "m2", SenderID: "s1", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, SentAt: at0, Text: "입금해주세요"}
	require.ErrorIs(t, s.Post("room-1", seller), chatapi.ErrRestricted)
	require.Equal(t, int64(1), s.Actions().Stats.Refused)
	buyer := pipeline.ChatMessage{MessageID: "m3", SenderID: "b1", SenderRole: pipeline.RoleBuyer, Kind: pipeline.KindText, SentAt: at0, Text: "네"}
	require.NoError(t, s.Post("room-1", buyer), "only the offender is restricted")

	require.Equal(t, chatapi.OutcomeApplied, apply(t, s, actionBody(t, "w1-rev", pipeline.ActionRetractNotice, reverses("w1"))))
	require.Equal(t, chatapi.OutcomeApplied, apply(t, s, actionBody(t, "h1-rev", pipeline.ActionReleaseTransaction, reverses("h1"))))
	require.Equal(t, chatapi.OutcomeApplied, apply(t, s, actionBody(t, "r1-rev", pipeline.ActionLiftRestriction, reverses("r1"))))

	for _, m := range history(t, s) {
		require.False(t, pipeline.IsActionNotice(m), "the retracted notice is gone")
	}
	require.Equal(t, chatapi.TxReleased, s.Actions().Transactions["room-1"].State)
	require.False(t, s.Restricted("s1"))
	require.NoError(t, s.Post("room-1", seller))

	// Undoing the overturn re-applies under new keys.
	apply(t, s, actionBody(t, "w1-again", pipeline.ActionWarnCounterpart))
	require.True(t, slices.ContainsFunc(history(t, s), func(m pipeline.ChatMessage) bool { return m.MessageID == pipeline.ActionNoticeID("w1-again") }))
}

func TestARestrictionExpires(t *testing.T) {
	clk := clock.NewFake(at0)
	s := newActionServer(t, clk, "")
	apply(t, s, actionBody(t, "r1", pipeline.ActionRestrictSender, func(a *pipeline.ProtectiveAction) { u := at0.Add(10 * time.Minute); a.Custom.Until = &u }))
	m := pipeline.ChatMessage{MessageID: "m2", SenderID: "s1", SenderRole: pipeline.RoleSeller, Kind: pipeline.KindText, SentAt: at0, Text: "x"}
	require.ErrorIs(t, s.Post("room-1", m), chatapi.ErrRestricted)
	clk.Advance(10 * time.Minute)
	require.NoError(t, s.Post("room-1", m), "until the expiry, not after")
}

func TestAReversalThatOvertakesItsActionSupersedesIt(t *testing.T) {
	s := newActionServer(t, clock.NewFake(at0), "")
	require.Equal(t, chatapi.OutcomeApplied, apply(t, s, actionBody(t, "w1-rev", pipeline.ActionRetractNotice, reverses("w1"))))
	require.Equal(t, chatapi.OutcomeSuperseded, apply(t, s, actionBody(t, "w1", pipeline.ActionWarnCounterpart)))
	require.Equal(t, chatapi.OutcomeDuplicate, apply(t, s, actionBody(t, "w1", pipeline.ActionWarnCounterpart)))
	require.Len(t, history(t, s), 1, "a stale notice never shows after its reversal")
}

func TestBadActionsAreRejectedWithAReason(t *testing.T) {
	s := newActionServer(t, clock.NewFake(at0), "")
	for name, tc := range map[string]struct {
		body   []byte
		reason string
	}{
		"not json":         {[]byte("{"), "not a JSON action"},
		"no key":           {actionBody(t, "", pipeline.ActionWarnSender, func(*pipeline.ProtectiveAction) {}), "idempotency_key"},
		"newer schema":     {actionBody(t, "v", pipeline.ActionWarnSender, func(a *pipeline.ProtectiveAction) { a.SchemaVersion = 2 }), "schema_version 2"},
		"unknown room":     {actionBody(t, "r", pipeline.ActionWarnSender, func(a *pipeline.ProtectiveAction) { a.Item.ID = "room-x" }), "unknown room"},
		"unknown action":   {actionBody(t, "a", "ban", func(*pipeline.ProtectiveAction) {}), `"ban"`},
		"no transaction":   {actionBody(t, "t", pipeline.ActionHoldTransaction, func(a *pipeline.ProtectiveAction) { a.Custom.Transaction = "tx-elsewhere" }), `no transaction "tx-elsewhere"`},
		"undo without key": {actionBody(t, "x", pipeline.ActionLiftRestriction, func(*pipeline.ProtectiveAction) {}), "reverses"},
		"past restriction": {actionBody(t, "p", pipeline.ActionRestrictSender, func(a *pipeline.ProtectiveAction) { u := at0.Add(-time.Second); a.Custom.Until = &u }), "not in the future"},
	} {
		out, err := s.Apply(tc.body)
		require.Equal(t, chatapi.OutcomeRejected, out, name)
		var rej *chatapi.RejectError
		require.True(t, errors.As(err, &rej), name)
		require.Contains(t, rej.Reason, tc.reason, name)
	}
	require.Equal(t, int64(8), s.Actions().Stats.Outcomes[chatapi.OutcomeRejected])
	require.Len(t, history(t, s), 1)

	// Dropped, as the contract says: acknowledged, never applied.
	require.Equal(t, chatapi.OutcomeDropped, apply(t, s, actionBody(t, "d", pipeline.ActionWarnSender, func(a *pipeline.ProtectiveAction) { a.Mode = pipeline.ModeDryRun })))
	require.Equal(t, chatapi.OutcomeDropped, apply(t, s, actionBody(t, "e", pipeline.ActionWarnSender, func(a *pipeline.ProtectiveAction) { a.ExpiresAt = at0 })))
	require.Equal(t, chatapi.OutcomeIgnored, apply(t, s, actionBody(t, "esc", pipeline.ActionEscalate)), "an escalation is chatguard's own")
	require.Len(t, history(t, s), 1)
}

func TestAnUnknownTemplateFallsBackToTheGenericNotice(t *testing.T) {
	s := newActionServer(t, clock.NewFake(at0), "")
	apply(t, s, actionBody(t, "u", pipeline.ActionWarnCounterpart, func(a *pipeline.ProtectiveAction) { a.Custom.Template, a.Custom.Locale = "counterpart_new_scam", "fr" }))
	apply(t, s, actionBody(t, "g", pipeline.ActionWarnSender, func(a *pipeline.ProtectiveAction) { a.Custom.Locale = "en" }))
	var texts []string
	for _, m := range history(t, s) {
		if pipeline.IsActionNotice(m) {
			texts = append(texts, m.Text)
		}
	}
	require.ElementsMatch(t, []string{
		"[안전 안내] 이 대화에서 사기 의심 요청이 확인되었습니다. 결제는 안전결제로만 진행하세요.",
		"[Notice] Asking for payment or contact outside the app breaks the rules. Repeating it may restrict your account.",
	}, texts)
}

func TestTheJournalKeepsKeysAcrossARestart(t *testing.T) {
	clk := clock.NewFake(at0)
	journal := filepath.Join(t.TempDir(), "actions.jsonl")
	s := newActionServer(t, clk, journal)
	apply(t, s, actionBody(t, "w1", pipeline.ActionWarnCounterpart))
	apply(t, s, actionBody(t, "r1", pipeline.ActionRestrictSender))
	apply(t, s, actionBody(t, "h1-rev", pipeline.ActionReleaseTransaction, reverses("h1")))
	require.NoError(t, s.Close())

	clk.Advance(time.Minute)
	s2 := newActionServer(t, clk, journal)
	require.Equal(t, chatapi.OutcomeDuplicate, apply(t, s2, actionBody(t, "w1", pipeline.ActionWarnCounterpart)), "a redelivery after a restart")
	require.Equal(t, chatapi.OutcomeSuperseded, apply(t, s2, actionBody(t, "h1", pipeline.ActionHoldTransaction)))
	msgs := history(t, s2)
	require.Len(t, msgs, 2)
	require.Equal(t, at0, msgs[1].SentAt, "the notice keeps the time it was shown")
	require.True(t, s2.Restricted("s1"))
}

func TestTheConsumerDeadLettersRejectsAndDeletesTheRest(t *testing.T) {
	clk := clock.NewFake(at0)
	s := newActionServer(t, clk, "")
	actions := queuetest.NewFake(queuetest.Config{Clock: clk})
	dlq := queuetest.NewFake(queuetest.Config{Clock: clk})
	good := actionBody(t, "w1", pipeline.ActionWarnCounterpart)
	bad := actionBody(t, "u1", pipeline.ActionWarnCounterpart, func(a *pipeline.ProtectiveAction) { a.Item.ID = "room-gone" })
	actions.Enqueue(good, good, bad, good)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := &chatapi.Consumer{Server: s, Inbox: actions, DLQ: dlq, Clock: clk, Wait: time.Millisecond}
	go func() { done <- c.Run(ctx) }()
	require.Eventually(t, func() bool { return actions.Stats().Held == 0 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	dead := dlq.Messages()
	require.Len(t, dead, 1)
	require.Contains(t, dead[0].Attributes[chatapi.AttrErrorReason].Value, `unknown room`)
	require.JSONEq(t, string(bad), string(dead[0].Body))
	st := s.Actions().Stats
	require.Equal(t, int64(1), st.Outcomes[chatapi.OutcomeApplied])
	require.Equal(t, int64(2), st.Outcomes[chatapi.OutcomeDuplicate])
	require.Equal(t, int64(1), st.Outcomes[chatapi.OutcomeRejected])
	require.Len(t, history(t, s), 2, "one notice for three copies")
}

func TestTheIntakeRefusesARestrictedSenderOverHTTP(t *testing.T) {
	s := newActionServer(t, clock.NewFake(at0), "")
	apply(t, s, actionBody(t, "r1", pipeline.ActionRestrictSender))
	post := func(body string) int { return do(t, s, http.MethodPost, "/rooms/room-1/messages", body).Code }
	require.Equal(t, http.StatusForbidden, post(`{"message_id":"m9","sender_id":"s1","sender_role":"seller","kind":"text","sent_at":"2026-12-07T01:00:00Z","text":"x"}`))
	require.Equal(t, http.StatusCreated, post(`{"message_id":"m9","sender_id":"b1","sender_role":"buyer","kind":"text","sent_at":"2026-12-07T01:00:00Z","text":"x"}`))
	require.Equal(t, http.StatusBadRequest, post(`{"message_id":"chatguard:notice:k","sender_id":"b1","sender_role":"buyer","kind":"text","sent_at":"2026-12-07T01:00:00Z"}`), "nobody forges a notice")
	require.Equal(t, http.StatusBadRequest, post(`{"message_id":"m8","sender_id":"b1","sender_role":"system","kind":"system","sent_at":"2026-12-07T01:00:00Z"}`))
	require.Equal(t, http.StatusBadRequest, post(`{`))

	rec := do(t, s, http.MethodGet, "/actions", "")
	require.Equal(t, http.StatusOK, rec.Code)
	var st chatapi.ActionState
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
	require.Equal(t, int64(1), st.Stats.Refused)
	require.Equal(t, "r1", st.Restrictions["s1"].Key)
}

func do(t *testing.T, s *chatapi.Server, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}
