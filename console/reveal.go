package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

// Contact details stay masked on every page, as the worker masks them in
// what it stores (chatprep.Redact: numbers to their last two digits, ids
// and e-mail local parts to their first characters, names where the text
// says they are names; a link's host stays as written, so look-alike
// domains can be judged). The chat is fetched live and masked before any
// template sees it. A moderator reveals one value at a time on the room
// page, by an explicit action with a reason from a fixed list, audited
// (moderation_actions, action reveal) before the value is sent; lists
// (the queue, campaigns, accounts) never reveal.

// shownPiece is a stretch of a chat message as the room page draws it: a
// masked contact value (N its index among the message's values, for the
// reveal link) or the masked text around it.
type shownPiece struct {
	Text    string
	Contact bool
	N       int
}

// maskedMessage is m with its text and image link masked.
func maskedMessage(m pipeline.ChatMessage) pipeline.ChatMessage {
	m.Text = chatprep.Redact(m.Text)
	m.ImageURL = chatprep.Redact(m.ImageURL)
	return m
}

// chatLines masks msgs for the room page: each message's text as pieces,
// every contact value its own piece.
func chatLines(msgs []pipeline.ChatMessage, evidence map[string]bool) []chatLine {
	lines := make([]chatLine, 0, len(msgs))
	for _, m := range msgs {
		l := chatLine{ChatMessage: maskedMessage(m), Evidence: evidence[m.MessageID]}
		n := 0
		for _, p := range chatprep.RedactPieces(m.Text) {
			sp := shownPiece{Text: p.Text, Contact: p.Contact}
			if p.Contact {
				sp.N = n
				n++
			}
			l.Pieces = append(l.Pieces, sp)
		}
		lines = append(lines, l)
	}
	return lines
}

// revealTarget is the value a reveal asks for: message MessageID's N-th
// contact value.
type revealTarget struct {
	MessageID string
	N         int
}

func revealTargetOf(r *http.Request) (revealTarget, bool) {
	n, err := strconv.Atoi(r.FormValue("n"))
	t := revealTarget{MessageID: r.FormValue("message"), N: n}
	return t, err == nil && n >= 0 && n < 1000 && t.MessageID != "" && len(t.MessageID) <= 128
}

// findValue fetches the room's chat and returns the target's value as
// written and masked ("", "" when the message or value is not there).
func (s *server) findValue(ctx context.Context, v pipeline.Verdict, t revealTarget) (raw, masked string, err error) {
	hctx, cancel := context.WithTimeout(ctx, s.historyTimeout)
	defer cancel()
	msgs, err := s.chat.History(hctx, v.Key.RoomID, v.Key.WindowStart, v.Key.WindowEnd)
	if err != nil {
		return "", "", err
	}
	for _, m := range msgs {
		if m.MessageID != t.MessageID {
			continue
		}
		raw, ok := chatprep.ContactValue(m.Text, t.N)
		if !ok {
			return "", "", nil
		}
		return raw, chatprep.Redact(raw), nil
	}
	return "", "", nil
}

// revealPage asks for the reason before a value is revealed; it shows the
// value masked only.
func (s *server) revealPage(w http.ResponseWriter, r *http.Request) {
	id, v, ok := s.verdictFromPath(w, r)
	if !ok {
		return
	}
	t, ok := revealTargetOf(r)
	if !ok {
		s.fail(w, r, http.StatusBadRequest, "name a message and a value (message, n)", nil)
		return
	}
	_, masked, err := s.findValue(r.Context(), v, t)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, "the chat history could not be fetched", err)
		return
	}
	if masked == "" {
		s.fail(w, r, http.StatusNotFound, "no such value in the room's chat", nil)
		return
	}
	s.render(w, "reveal.html", http.StatusOK, s.page(r, map[string]any{"ID": id, "V": v, "T": t, "Masked": masked,
		"Reasons": moderation.RevealReasons}))
}

// reveal shows one contact value as written, once the reveal is audited:
// who, which room, which value and why.
func (s *server) reveal(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	id, v, ok := s.verdictFromPath(w, r)
	if !ok {
		return
	}
	t, ok := revealTargetOf(r)
	reason := r.PostFormValue("reason")
	if !ok || !moderation.IsRevealReason(reason) {
		s.fail(w, r, http.StatusBadRequest, "name a message, a value and one of the reasons offered", nil)
		return
	}
	if err := s.audit(r.Context(), moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionReveal, VerdictID: id,
		RoomID: v.Key.RoomID, Detail: fmt.Sprintf("message %s value %d: %s", t.MessageID, t.N, reason)}); err != nil {
		s.refuseUnaudited(w, r, err)
		return
	}
	raw, masked, err := s.findValue(r.Context(), v, t)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, "the chat history could not be fetched", err)
		return
	}
	if raw == "" {
		s.fail(w, r, http.StatusNotFound, "no such value in the room's chat", nil)
		return
	}
	s.render(w, "reveal.html", http.StatusOK, s.page(r, map[string]any{"ID": id, "V": v, "T": t, "Masked": masked,
		"Value": raw, "Reason": reason}))
}
