package console

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

// Decisions that mean what they say. A confirm records the verdict's own
// label and category: a form that sends others is refused, never silently
// reduced to the verdict's. An overturn must change the label or the
// category; one to the verdict's own is refused. The page says why, and
// nothing is audited or recorded for a refused form. A moderator may undo
// their own decision in force within --undo-window: a reversing decision
// row ("undo"), audited before it is written, never a delete; the decision
// before it (or none, returning the item to the queue) is in force again.

// errChooseCategory refuses an overturn to a flagged label with no
// category: bulk forms have no default category, so one must be chosen.
var errChooseCategory = errors.New("choose the category to apply: an overturn to abusive or suspicious needs one (there is no default)")

// decisionForm reads a confirm or overturn of the verdict labelled label
// and category from r's form. A confirm takes the verdict's label and
// category where the form names none. It returns the decision and, when
// the form is refused, the status and the reason to show: 400 for a
// malformed form, 409 for one that does not mean what it says.
func (s *server) decisionForm(r *http.Request, who Who, verdictID uint64, label pipeline.Label, category pipeline.Category,
	at time.Time) (moderation.Decision, int, error) {
	d := moderation.Decision{VerdictID: verdictID, Moderator: who.ID, Decision: r.PostFormValue("decision"), DecidedAt: at,
		Label: pipeline.Label(r.PostFormValue("label")), Category: pipeline.Category(r.PostFormValue("category"))}
	note, err := s.noteOf(r)
	if err != nil {
		return d, http.StatusBadRequest, err
	}
	d.Note = note
	if d.Decision == moderation.DecisionConfirm {
		if _, sent := r.PostForm["label"]; !sent {
			d.Label = label
		}
		if _, sent := r.PostForm["category"]; !sent {
			d.Category = category
		}
	}
	if d.Decision == moderation.DecisionUndo {
		return d, http.StatusBadRequest, errors.New("an undo is asked for with the undo button")
	}
	if d.Decision == moderation.DecisionOverturn && d.Label != pipeline.LabelClean && (d.Category == "" || d.Category == pipeline.CategoryClean) {
		return d, http.StatusBadRequest, errChooseCategory
	}
	if d.Label == pipeline.LabelClean {
		d.Category = "" // the row keeps '' for clean (its schema)
	}
	if err := d.Validate(); err != nil {
		return d, http.StatusBadRequest, err
	}
	if err := d.CheckAgainst(label, category); err != nil {
		return d, http.StatusConflict, err
	}
	return d, 0, nil
}

// noteOf is the note a decision form asks for: its canned reason (one of
// --decision-reasons, or none), then the free note.
func (s *server) noteOf(r *http.Request) (string, error) {
	reason, note := r.PostFormValue("reason"), strings.TrimSpace(r.PostFormValue("note"))
	if reason == "" {
		return note, nil
	}
	if !slices.Contains(s.cfg.DecisionReasons, reason) {
		return "", errors.New("unknown reason: choose one of the list, or write a note")
	}
	if note == "" {
		return reason, nil
	}
	return reason + ": " + note, nil
}

// refuse answers a decision form refused before anything was recorded:
// code with the reason and the item's decisions (409 is drawn in place by
// the room page's form; htmx leaves other errors alone).
func (s *server) refuse(w http.ResponseWriter, r *http.Request, id uint64, code int, why string) {
	decisions, err := s.store.Decisions(r.Context(), id, 20)
	if err != nil {
		s.log.Warn("console: decisions", "verdict_id", id, "err", err)
	}
	data := s.decisionsData(r, id, decisions)
	data["Refused"] = why
	name := "decisions"
	if r.Header.Get("HX-Request") != "true" {
		name = "conflict.html"
	}
	s.render(w, name, code, data)
}

// decisionsData is the data of the "decisions" block of item id: its
// decisions, the page's seen mark and the decision the signed-in
// moderator may undo now (Undo, when there is one).
func (s *server) decisionsData(r *http.Request, id uint64, decisions []moderation.Decision) map[string]any {
	who, _ := whoFrom(r.Context())
	data := s.page(r, map[string]any{"ID": id, "Decisions": decisions})
	if len(decisions) > 0 {
		data["Seen"] = decisions[0].ID
	}
	if in, ok := moderation.InForce(decisions); ok && s.undoRefusal(in, in.ID, who) == "" {
		data["Undo"] = in.ID
	}
	return data
}

// undoRefusal says why who may not undo decision target when in is the
// decision in force ("" when they may).
func (s *server) undoRefusal(in moderation.Decision, target uint64, who Who) string {
	switch {
	case s.cfg.UndoWindow <= 0:
		return "undo is turned off (--undo-window 0): decide again instead"
	case in.ID == 0 || in.ID != target:
		return "only the decision in force can be undone; this one is not (undone already, or decided over)"
	case in.Moderator != who.ID:
		return "only your own decision can be undone"
	case s.clock.Now().Sub(in.DecidedAt) > s.cfg.UndoWindow:
		return "the undo window (" + s.cfg.UndoWindow.String() + ") has passed: decide again instead"
	}
	return ""
}

// undo is POST /verdicts/{id}/undo (form: decision_id): the signed-in
// moderator's undo of their decision in force, within --undo-window. It
// is audited (a "decide" row with decision "undo" naming the decision)
// before the reversing row is written; its moderator_feedback event (the
// row is its outbox, as a decision's) tells the lake the undone decision's
// event no longer counts.
func (s *server) undo(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	id, v, ok := s.verdictFromPath(w, r)
	if !ok {
		return
	}
	target, _ := strconv.ParseUint(r.PostFormValue("decision_id"), 10, 64)
	ds, err := s.store.Decisions(r.Context(), id, 50)
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the decisions", err)
		return
	}
	in, _ := moderation.InForce(ds)
	if why := s.undoRefusal(in, target, who); why != "" {
		s.refuse(w, r, id, http.StatusConflict, "Not undone: "+why+".")
		return
	}
	d := moderation.Decision{VerdictID: id, Moderator: who.ID, Decision: moderation.DecisionUndo, Reverses: target,
		Label: in.Label, Category: in.Category, Audit: in.Audit, DecidedAt: s.clock.Now().UTC().Truncate(time.Microsecond)}
	if err := s.audit(r.Context(), moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionDecide, VerdictID: id,
		RoomID: v.Key.RoomID, Decision: d.Decision, Label: in.Label, Category: in.Category, DecisionID: target}); err != nil {
		s.refuseUnaudited(w, r, err)
		return
	}
	uid, err := s.store.AddDecision(r.Context(), d)
	var perm *pipeline.PermanentError
	if errors.As(err, &perm) {
		s.refuse(w, r, id, http.StatusConflict, "Not undone: "+moderation.ErrCannotUndo.Error()+".")
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not save the undo", err)
		return
	}
	s.log.Info("console: undone", "moderator", who.ID, "verdict_id", id, "decision_id", uid, "reverses", target, "room_id", v.Key.RoomID)
	d.ID = uid
	s.deliverFeedback(r.Context(), []uint64{uid}, []pipeline.OutMessage{{Body: feedbackBody(feedbackEvent(d, v.Key, v.Label, v.Category, v.Action))}})
	if in.Decision == moderation.DecisionOverturn {
		s.reapplyActions(r.Context(), v.Key, target)
	}
	s.decided(w, r, id, "undo of "+in.Decision)
}

// decided answers a saved decision or undo: the item's decisions block
// (htmx, and the queue's inline decisions) or the room page.
func (s *server) decided(w http.ResponseWriter, r *http.Request, id uint64, saved string) {
	if r.Header.Get("HX-Request") == "true" {
		decisions, err := s.store.Decisions(r.Context(), id, 20)
		if err != nil {
			s.log.Warn("console: decisions", "verdict_id", id, "err", err)
		}
		data := s.decisionsData(r, id, decisions)
		data["Saved"] = saved
		// The room's protective actions are swapped in beside: an
		// overturn has just reversed them.
		if v, err := s.store.VerdictByID(r.Context(), id); err == nil {
			data["OOB"] = true
			s.roomActions(r.Context(), v.Key.RoomID, data)
		}
		s.render(w, "decided", http.StatusOK, data)
		return
	}
	http.Redirect(w, r, "/verdicts/"+strconv.FormatUint(id, 10), http.StatusSeeOther)
}

// snippetRunes bounds the queue's evidence snippet and rationale line.
const snippetRunes = 140

// snippet is s as the queue list shows it: masked as the worker's outputs
// are (chatprep.Redact: contact values replaced, link hosts kept), on one
// line and cut to snippetRunes. The list never reveals: the stored quote is
// masked already, and this masks it again in case a value slipped by.
func snippet(s string) string {
	s = strings.Join(strings.Fields(chatprep.Redact(s)), " ")
	if utf8.RuneCountInString(s) <= snippetRunes {
		return s
	}
	return string([]rune(s)[:snippetRunes-1]) + "…"
}

// firstLine is the first non-empty line of a rationale, as snippet shows it.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			return snippet(l)
		}
	}
	return ""
}

// refusalOf is the moderator's words for a store's refusal: the sentinel's
// message, without the adapter's prefixes.
func refusalOf(err error) string {
	for _, e := range []error{moderation.ErrNoChange, moderation.ErrConfirmChanged, moderation.ErrCannotUndo} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return err.Error()
}
