package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// A moderator reverses or confirms one protective action of a room by
// its key (the room page's Reverse and Confirm). Each is audited before it
// acts (reverse_action, confirm_action, the key in the record's detail)
// and idempotent: a second click finds the action reversed or confirmed
// and does nothing twice.

// actionKeyParam reads the form's action key: 1..128 bytes.
func actionKeyParam(r *http.Request) (string, bool) {
	k := r.PostFormValue("key")
	return k, k != "" && len(k) <= 128
}

// actionControl is what both handlers share: the control port, the
// verdict whose room the action is of, the key and the audit row
// written before the action; ok false when the request was answered.
func (s *server) actionControl(w http.ResponseWriter, r *http.Request, kind moderation.ActionKind) (uint64, pipeline.Verdict, string, bool) {
	if s.control == nil {
		s.fail(w, r, http.StatusNotFound, "protective actions cannot be controlled from this console", nil)
		return 0, pipeline.Verdict{}, "", false
	}
	id, v, ok := s.verdictFromPath(w, r)
	if !ok {
		return 0, v, "", false
	}
	key, ok := actionKeyParam(r)
	if !ok {
		s.fail(w, r, http.StatusBadRequest, "key must be an action's idempotency key", nil)
		return 0, v, "", false
	}
	who, _ := whoFrom(r.Context())
	if err := s.audit(r.Context(), moderation.AuditRecord{Moderator: who.ID, Action: kind, VerdictID: id, RoomID: v.Key.RoomID,
		Detail: "key " + key}); err != nil {
		s.refuseUnaudited(w, r, err)
		return 0, v, "", false
	}
	return id, v, key, true
}

// reverseAction serves POST /verdicts/{id}/actions/reverse (form: key):
// the action's reversal published through the outbox under a key of its
// own, and its account cleared for its rule as an overturn clears it.
func (s *server) reverseAction(w http.ResponseWriter, r *http.Request) {
	id, v, key, ok := s.actionControl(w, r, moderation.ActionReverseAction)
	if !ok {
		return
	}
	who, _ := whoFrom(r.Context())
	now := s.clock.Now().UTC()
	res, err := s.control.ReverseAction(r.Context(), moderation.KeyReversal{RoomID: v.Key.RoomID, Key: key, At: now,
		ExpiresAt: now.Add(reversalTTL), ClearedUntil: now.Add(s.cfg.ActionsClearedFor), Source: pipeline.ActionSourceModerator})
	if !s.controlFailed(w, r, err) {
		return
	}
	note := "already reversed: nothing done"
	if res.Reversed {
		note = "reversed"
		s.log.Info("console: protective action reversed", "moderator", who.ID, "verdict_id", id, "room_id", v.Key.RoomID,
			"key", key, "reversal", res.Reversal != nil)
	}
	s.controlled(w, r, id, v, note)
}

// confirmAction serves POST /verdicts/{id}/actions/confirm (form: key).
func (s *server) confirmAction(w http.ResponseWriter, r *http.Request) {
	id, v, key, ok := s.actionControl(w, r, moderation.ActionConfirmAction)
	if !ok {
		return
	}
	who, _ := whoFrom(r.Context())
	confirmed, err := s.control.ConfirmAction(r.Context(), v.Key.RoomID, key, who.ID, s.clock.Now().UTC())
	if !s.controlFailed(w, r, err) {
		return
	}
	note := "already confirmed: nothing done"
	if confirmed {
		note = "confirmed"
		s.log.Info("console: protective action confirmed", "moderator", who.ID, "verdict_id", id, "room_id", v.Key.RoomID, "key", key)
	}
	s.controlled(w, r, id, v, note)
}

// controlFailed answers a control's error and reports whether there was
// none.
func (s *server) controlFailed(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case errors.Is(err, moderation.ErrActionNotFound):
		s.fail(w, r, http.StatusNotFound, "no such protective action in this room", nil)
	case err != nil:
		s.fail(w, r, http.StatusServiceUnavailable, "the action could not be changed; try again", err)
	default:
		return true
	}
	return false
}

// controlled answers a done control: the room's actions (htmx) or the
// room page.
func (s *server) controlled(w http.ResponseWriter, r *http.Request, id uint64, v pipeline.Verdict, note string) {
	if r.Header.Get("HX-Request") != "true" {
		http.Redirect(w, r, "/verdicts/"+strconv.FormatUint(id, 10)+"#protective", http.StatusSeeOther)
		return
	}
	data := s.page(r, map[string]any{"ID": id, "ActionNote": note})
	s.roomActions(r.Context(), v.Key.RoomID, data)
	s.render(w, "protective", http.StatusOK, data)
}
