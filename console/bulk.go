package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// A campaign's bulk decision: one moderator confirms or overturns every
// open room of a campaign page at once. It is audited as one action
// ("bulk_decide", with its room count) before it acts; then each room is
// taken, its newest decision read again (someone may have decided it
// since the page was read), and decided through record, so each still
// gets its own "decide" audit row, one decision row and one
// moderator_feedback event. Rooms another moderator holds, and rooms
// another moderator decided since the page was read, are skipped and
// reported unless the moderator overrides, explicitly and audited per
// room ("override_take" naming the holder, "override_decided" naming the
// decider); rooms not on the page the moderator saw are never decided by
// it.

// bulkResult is what a bulk decision did, for the page that follows.
type bulkResult struct {
	Decision string
	// Decided counts the rooms decided; Queued those whose feedback
	// waits for the outbox sweeper.
	Decided, Queued int
	// Taken lists the holders of the rooms skipped as someone else's.
	Taken []string
	// Overridden lists the holders whose rooms the moderator decided
	// over, by an override.
	Overridden []string
	// AlreadyDecided counts the rooms skipped as decided already.
	AlreadyDecided int
	// NoChange counts the rooms an overturn skipped because their verdict
	// already has the label and category asked for.
	NoChange int
	// DecidedMeanwhile lists who decided the rooms skipped because they
	// were decided after the page was read; OverDecided who decided the
	// rooms the moderator decided over such a decision, by an override.
	DecidedMeanwhile, OverDecided []string
	Error                         string
}

// bulkPlan splits the rooms of a campaign page the moderator saw (ids)
// into the ones to decide and the ones to skip.
func (s *server) bulkPlan(who Who, lines []campaignLine, ids map[uint64]bool, override bool) (act []campaignLine, res bulkResult) {
	for _, l := range lines {
		switch {
		case !ids[l.VerdictID]:
			// Not on the page the moderator decided from: never decided unseen.
		case l.Newest.Decision != "":
			res.AlreadyDecided++
		case l.Take.Holder != "" && !l.Take.Mine && !override:
			res.Taken = append(res.Taken, l.Take.Holder)
		default:
			if l.Take.Holder != "" && !l.Take.Mine {
				res.Overridden = append(res.Overridden, l.Take.Holder)
			}
			act = append(act, l)
		}
	}
	return act, res
}

// bulkDecision is the decision a bulk form asks for, for a room whose
// verdict is l: confirm keeps the verdict's label and category.
func bulkDecision(r *http.Request, who Who, l campaignLine, note string, at time.Time) moderation.Decision {
	d := moderation.Decision{VerdictID: l.VerdictID, Moderator: who.ID, Decision: r.PostFormValue("decision"), Note: note, DecidedAt: at}
	if d.Decision == moderation.DecisionConfirm {
		d.Label, d.Category = l.Label, l.Category
	} else {
		d.Label, d.Category = pipeline.Label(r.PostFormValue("label")), pipeline.Category(r.PostFormValue("category"))
	}
	if d.Label == pipeline.LabelClean {
		d.Category = ""
	}
	return d
}

// bulkDecide is POST /campaigns/{mark}/decide: form fields decision,
// label and category (overturn; none for confirm), reason and note, cursor
// (the page decided from), id (each room shown), override=1 to decide
// rooms others hold, and confirmed=1 once the confirmation step showed
// what is to be applied (without it, that step is drawn and nothing acts).
func (s *server) bulkDecide(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	decision := r.PostFormValue("decision")
	// The form is checked before the audit line: a form that can only
	// fail must not be logged as about to decide rooms.
	note, code, err := s.bulkForm(r)
	if err != nil {
		s.renderCampaign(w, r, code, &campaignOutcome{Bulk: &bulkResult{Decision: decision, Error: "Not decided: " + err.Error() + "."}})
		return
	}
	ids := postedIDs(r)
	mark := r.PathValue("mark")
	if r.PostFormValue("confirmed") != "1" {
		s.confirmBulk(w, r, campaignHref(mark)+"/decide", len(ids))
		return
	}
	page, err := s.store.CampaignRooms(r.Context(), mark, r.PostFormValue("cursor"), campaignPageSize)
	if errors.Is(err, moderation.ErrBadMark) || errors.Is(err, moderation.ErrBadCursor) {
		s.fail(w, r, http.StatusNotFound, err.Error(), nil)
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the campaign", err)
		return
	}
	lines := make([]campaignLine, len(page.Items))
	now := s.clock.Now()
	for i, room := range page.Items {
		lines[i].CampaignRoom = room
		if room.TakenBy != "" && s.live(room.TakenActiveAt, now) {
			lines[i].Take = takeView{Holder: room.TakenBy, Mine: room.TakenBy == who.ID, ActiveAt: room.TakenActiveAt}
		}
	}
	code, res := s.bulkAct(r, who, mark, lines, ids, note)
	s.renderCampaign(w, r, code, &campaignOutcome{Bulk: &res})
}

// postedIDs are the verdict ids a bulk form names (id fields).
func postedIDs(r *http.Request) map[uint64]bool {
	ids := map[uint64]bool{}
	for _, v := range r.PostForm["id"] {
		if id, err := strconv.ParseUint(v, 10, 64); err == nil {
			ids[id] = true
		}
	}
	return ids
}

// bulkForm checks a bulk decision form before anything is audited: confirm
// or overturn; an overturn names its label and, unless clean, its category
// (no default is applied); a confirm names neither (each room keeps its
// verdict's: a label chosen beside it would be dropped silently); the
// reason is one of the list. It returns the note to record, or the status
// and reason of the refusal.
func (s *server) bulkForm(r *http.Request) (string, int, error) {
	decision, label, category := r.PostFormValue("decision"), pipeline.Label(r.PostFormValue("label")), r.PostFormValue("category")
	switch {
	case decision != moderation.DecisionConfirm && decision != moderation.DecisionOverturn:
		return "", http.StatusBadRequest, errors.New("decision must be confirm or overturn")
	case decision == moderation.DecisionConfirm && (label != "" || category != ""):
		return "", http.StatusConflict, errors.New("a confirm keeps each verdict's label and category; clear the label and category chosen, or overturn")
	case decision == moderation.DecisionOverturn && label != pipeline.LabelAbusive && label != pipeline.LabelSuspicious && label != pipeline.LabelClean:
		return "", http.StatusBadRequest, errors.New("an overturn needs a label: abusive, suspicious or clean")
	case decision == moderation.DecisionOverturn && label != pipeline.LabelClean &&
		(!pipeline.Category(category).Valid() || pipeline.Category(category) == pipeline.CategoryClean):
		return "", http.StatusBadRequest, errChooseCategory
	}
	note, err := s.noteOf(r)
	if err != nil {
		return "", http.StatusBadRequest, err
	}
	return note, 0, nil
}

// bulkAct decides the rooms of lines the moderator saw (ids), as the form
// of r asks: planned (bulkPlan), overturns that change nothing dropped,
// audited as one bulk_decide (mark "" for the queue's), claimed room by
// room and recorded. It returns the status and result to draw.
func (s *server) bulkAct(r *http.Request, who Who, mark string, lines []campaignLine, ids map[uint64]bool, note string) (int, bulkResult) {
	decision, override := r.PostFormValue("decision"), r.PostFormValue("override") == "1"
	label, category := pipeline.Label(r.PostFormValue("label")), pipeline.Category(r.PostFormValue("category"))
	act, res := s.bulkPlan(who, lines, ids, override)
	res.Decision = decision
	if decision == moderation.DecisionOverturn {
		kept := act[:0]
		for _, l := range act {
			if (moderation.Decision{Decision: decision, Label: label, Category: category}).CheckAgainst(l.Label, l.Category) != nil {
				res.NoChange++
				continue
			}
			kept = append(kept, l)
		}
		act = kept
	}
	if err := s.audit(r.Context(), moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionBulkDecide, Mark: mark, Decision: decision,
		Label: label, Category: category, Override: override, Rooms: len(act),
		Detail: fmt.Sprintf("skipped: %d taken, %d decided, %d no change", len(res.Taken), res.AlreadyDecided, res.NoChange)}); err != nil {
		s.log.Warn("console: bulk decision refused", "mark", mark, "err", err)
		res.Error = errNotAudited
		return http.StatusServiceUnavailable, res
	}
	res.Overridden = nil // each override is named by its room's override_take below
	pending, claimErr := s.claimForBulk(r, who, mark, act, override, &res)
	at := s.clock.Now().UTC().Truncate(time.Microsecond) // as the row keeps it (see decide)
	items := make([]pendingDecision, 0, len(pending))
	for _, l := range pending {
		items = append(items, pendingDecision{D: bulkDecision(r, who, l, note, at),
			Verdict: decidedVerdict{ID: l.VerdictID, Key: l.Key, Label: l.Label, Category: l.Category, Action: l.Action}})
	}
	rec, err := s.record(r.Context(), who, items)
	res.Decided, res.Queued = len(rec.Decisions), rec.Queued
	if err == nil {
		err = claimErr
	}
	code := http.StatusOK
	var perm *pipeline.PermanentError
	switch {
	case errors.As(err, &perm):
		code, res.Error = http.StatusBadRequest, err.Error()
	case errors.Is(err, errAudit):
		s.log.Warn("console: bulk decision stopped", "mark", mark, "decided", res.Decided, "err", err)
		code, res.Error = http.StatusServiceUnavailable, "stopped after "+strconv.Itoa(res.Decided)+" rooms: "+errNotAudited
	case err != nil:
		s.log.Warn("console: bulk decision stopped", "mark", mark, "decided", res.Decided, "err", err)
		code, res.Error = http.StatusServiceUnavailable, "stopped after "+strconv.Itoa(res.Decided)+" rooms: could not save a decision"
	}
	for _, l := range []*[]string{&res.Taken, &res.Overridden, &res.DecidedMeanwhile, &res.OverDecided} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	return code, res
}

// claimForBulk takes each room of act for who and returns the rooms held
// and still undecided since the page read. A room another moderator holds
// is skipped into res.Taken or, with override, taken over after an
// override_take audit row naming the holder (whether the page showed the
// take or it was made after the page was read). A room decided since the
// page read, by another moderator, is skipped into res.DecidedMeanwhile
// or, with override, kept after an override_decided audit row naming the
// decider; one decided meanwhile by who is skipped as decided already. An
// audit row that cannot be written stops the claim: it returns the rooms
// held so far and an error wrapping errAudit.
func (s *server) claimForBulk(r *http.Request, who Who, mark string, act []campaignLine, override bool, res *bulkResult) ([]campaignLine, error) {
	ctx := r.Context()
	held := make([]campaignLine, 0, len(act))
	for _, l := range act {
		now := s.clock.Now()
		_, err := s.store.TakeItem(ctx, l.VerdictID, who.ID, now, s.staleBefore(now), false)
		var te *moderation.TakenError
		if errors.As(err, &te) && override {
			if aerr := s.audit(ctx, moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionOverrideTake, VerdictID: l.VerdictID,
				RoomID: l.Key.RoomID, Mark: mark, Override: true, Holder: te.Holder.Moderator}); aerr != nil {
				return held, aerr
			}
			res.Overridden = append(res.Overridden, te.Holder.Moderator)
			_, err = s.store.TakeItem(ctx, l.VerdictID, who.ID, now, s.staleBefore(now), true)
		}
		switch {
		case errors.As(err, &te):
			res.Taken = append(res.Taken, te.Holder.Moderator)
			continue
		case err != nil:
			s.log.Warn("console: bulk decision: take", "verdict_id", l.VerdictID, "err", err)
			res.Error = "some rooms could not be taken and were not decided"
			continue
		}
		ok, err := s.undecidedSincePage(ctx, who, mark, l, override, res)
		if err != nil {
			return held, err
		}
		if ok {
			held = append(held, l)
		}
	}
	return held, nil
}

// undecidedSincePage reads again, once who holds l's room, the decision in
// force on it: the page read showed none (bulkPlan skipped decided
// rooms), so one now was made meanwhile. It reports whether the room is
// to be decided, recording into res why not; with override a decision of
// another moderator is decided over, after its override_decided audit
// row. A room skipped is released again (its take was this bulk
// decision's). Its error wraps errAudit when that row could not be
// written.
func (s *server) undecidedSincePage(ctx context.Context, who Who, mark string, l campaignLine, override bool, res *bulkResult) (bool, error) {
	ds, err := s.store.Decisions(ctx, l.VerdictID, 50)
	var newest []moderation.Decision
	if in, ok := moderation.InForce(ds); ok {
		newest = []moderation.Decision{in}
	}
	skip := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := s.store.ReleaseItem(rctx, l.VerdictID, who.ID); err != nil {
			s.log.Warn("console: bulk decision: skipped room not released; it goes stale after --take-timeout", "verdict_id", l.VerdictID, "err", err)
		}
	}
	switch {
	case err != nil:
		s.log.Warn("console: bulk decision: newest decision", "verdict_id", l.VerdictID, "err", err)
		res.Error = "some rooms could not be checked and were not decided"
		skip()
		return false, nil
	case len(newest) == 0:
		return true, nil
	case newest[0].Moderator == who.ID:
		res.AlreadyDecided++
		skip()
		return false, nil
	case !override:
		res.DecidedMeanwhile = append(res.DecidedMeanwhile, newest[0].Moderator)
		skip()
		return false, nil
	}
	if err := s.audit(ctx, moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionOverrideDecided, VerdictID: l.VerdictID,
		RoomID: l.Key.RoomID, Mark: mark, Override: true, Holder: newest[0].Moderator, DecisionID: newest[0].ID}); err != nil {
		return false, err
	}
	res.OverDecided = append(res.OverDecided, newest[0].Moderator)
	return true, nil
}

// maxQueueBulk bounds a bulk decision from the queue list: a page's worth.
const maxQueueBulk = defaultPage

// bulkField is one form field the confirmation step posts again.
type bulkField struct{ Name, Value string }

// confirmBulk draws the confirmation step of a bulk decision posted to
// action over rooms rooms: the decision, label and category to be applied
// (a confirm: each verdict's own), the reason and note, and a button that
// posts the same form with confirmed=1. Nothing is audited or acts.
func (s *server) confirmBulk(w http.ResponseWriter, r *http.Request, action string, rooms int) {
	var fields []bulkField
	for name, vals := range r.PostForm {
		if name == "csrf" || name == "confirmed" {
			continue
		}
		for _, v := range vals {
			fields = append(fields, bulkField{name, v})
		}
	}
	slices.SortFunc(fields, func(a, b bulkField) int { return strings.Compare(a.Name+"\x00"+a.Value, b.Name+"\x00"+b.Value) })
	back := "/queue"
	if strings.HasPrefix(action, "/campaigns/") {
		back = strings.TrimSuffix(action, "/decide")
	}
	s.render(w, "bulk_confirm.html", http.StatusOK, s.page(r, map[string]any{"Action": action, "Back": back, "Rooms": rooms,
		"Decision": r.PostFormValue("decision"), "Label": r.PostFormValue("label"), "Category": r.PostFormValue("category"),
		"Reason": r.PostFormValue("reason"), "Note": r.PostFormValue("note"), "Override": r.PostFormValue("override") == "1", "Fields": fields}))
}

// queueBulkDecide is POST /queue/decide: a bulk decision over the queue
// items the moderator selected (id fields, 1..maxQueueBulk), with the
// campaign bulk's form, confirmation step and rules: audited as one
// bulk_decide (no mark) before it acts, then each item claimed, read again
// and recorded with its own decide row and feedback event.
func (s *server) queueBulkDecide(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	note, code, err := s.bulkForm(r)
	if err != nil {
		s.renderQueueBulk(w, r, code, bulkResult{Decision: r.PostFormValue("decision"), Error: "Not decided: " + err.Error() + "."})
		return
	}
	ids := postedIDs(r)
	if len(ids) == 0 || len(ids) > maxQueueBulk {
		s.renderQueueBulk(w, r, http.StatusBadRequest, bulkResult{Decision: r.PostFormValue("decision"),
			Error: "Not decided: select 1 to " + strconv.Itoa(maxQueueBulk) + " items in the list first."})
		return
	}
	if r.PostFormValue("confirmed") != "1" {
		s.confirmBulk(w, r, "/queue/decide", len(ids))
		return
	}
	lines, err := s.queueLines(r.Context(), who, ids)
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the items selected", err)
		return
	}
	code, res := s.bulkAct(r, who, "", lines, ids, note)
	s.renderQueueBulk(w, r, code, res)
}

// queueLines reads the selected items as bulkPlan takes them: verdict,
// live take and decision in force. Ids no verdict has are left out.
func (s *server) queueLines(ctx context.Context, who Who, ids map[uint64]bool) ([]campaignLine, error) {
	sorted := make([]uint64, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	slices.Sort(sorted)
	lines := make([]campaignLine, 0, len(sorted))
	for _, id := range sorted {
		v, err := s.store.VerdictByID(ctx, id)
		if errors.Is(err, pipeline.ErrVerdictNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ds, err := s.store.Decisions(ctx, id, 50)
		if err != nil {
			return nil, err
		}
		in, _ := moderation.InForce(ds)
		take, err := s.takeOf(ctx, id, who)
		if err != nil {
			return nil, err
		}
		lines = append(lines, campaignLine{Take: take, CampaignRoom: moderation.CampaignRoom{VerdictID: id, Key: v.Key, Label: v.Label,
			Category: v.Category, Action: v.Action, Newest: moderation.Newest{Decision: in.Decision, Label: in.Label}}})
	}
	return lines, nil
}

// renderQueueBulk draws the outcome of a bulk decision from the queue.
func (s *server) renderQueueBulk(w http.ResponseWriter, r *http.Request, code int, res bulkResult) {
	s.render(w, "queue_bulk.html", code, s.page(r, map[string]any{"Result": &res}))
}
