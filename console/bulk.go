package console

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
)

// A campaign's bulk decision: one moderator confirms or overturns every
// open room of a campaign page at once. It is audited as one action
// ("bulk_decide", with its room count) before it acts; then each room is
// taken and decided through record, so each still gets one decision row
// and one moderator_feedback event. Rooms another moderator holds are
// skipped unless the moderator overrides, explicitly and audited; rooms
// decided since the page was drawn, or not on it, are never decided by it.

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
	Error          string
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
func bulkDecision(r *http.Request, who Who, l campaignLine, at time.Time) mysql.Decision {
	d := mysql.Decision{VerdictID: l.VerdictID, Moderator: who.ID, Decision: r.PostFormValue("decision"), Note: r.PostFormValue("note"), DecidedAt: at}
	if d.Decision == mysql.DecisionConfirm {
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
// label and category (overturn), note, cursor (the page decided from), id
// (each room shown) and override=1 to decide rooms others hold.
func (s *server) bulkDecide(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	decision := r.PostFormValue("decision")
	if decision != mysql.DecisionConfirm && decision != mysql.DecisionOverturn {
		s.fail(w, r, http.StatusBadRequest, "decision must be confirm or overturn", nil)
		return
	}
	// An overturn's label is checked before the audit line: a form that
	// can only fail must not be logged as about to decide rooms.
	if l := pipeline.Label(r.PostFormValue("label")); decision == mysql.DecisionOverturn &&
		l != pipeline.LabelAbusive && l != pipeline.LabelSuspicious && l != pipeline.LabelClean {
		s.fail(w, r, http.StatusBadRequest, "an overturn needs a label: abusive, suspicious or clean", nil)
		return
	}
	ids := map[uint64]bool{}
	for _, v := range r.PostForm["id"] {
		if id, err := strconv.ParseUint(v, 10, 64); err == nil {
			ids[id] = true
		}
	}
	mark, override := r.PathValue("mark"), r.PostFormValue("override") == "1"
	page, err := s.store.CampaignRooms(r.Context(), mark, r.PostFormValue("cursor"), campaignPageSize)
	if errors.Is(err, mysql.ErrBadMark) || errors.Is(err, mysql.ErrBadCursor) {
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
	act, res := s.bulkPlan(who, lines, ids, override)
	res.Decision = decision
	s.log.Info("console: audit", "action", "bulk_decide", "moderator", who.ID, "mark", mark, "decision", decision,
		"label", r.PostFormValue("label"), "category", r.PostFormValue("category"), "rooms", len(act),
		"override", override, "overridden", res.Overridden, "skipped_taken", len(res.Taken), "skipped_decided", res.AlreadyDecided)
	pending := s.claimForBulk(r, who, act, override, &res)
	at := now.UTC().Truncate(time.Microsecond) // as the row keeps it (see decide)
	items := make([]pendingDecision, 0, len(pending))
	for _, l := range pending {
		items = append(items, pendingDecision{D: bulkDecision(r, who, l, at),
			Verdict: decidedVerdict{ID: l.VerdictID, Key: l.Key, Label: l.Label, Category: l.Category, Action: l.Action}})
	}
	rec, err := s.record(r.Context(), who, items)
	res.Decided, res.Queued = len(rec.Decisions), rec.Queued
	code := http.StatusOK
	var perm *pipeline.PermanentError
	switch {
	case errors.As(err, &perm):
		code, res.Error = http.StatusBadRequest, err.Error()
	case err != nil:
		s.log.Warn("console: bulk decision stopped", "mark", mark, "decided", res.Decided, "err", err)
		code, res.Error = http.StatusServiceUnavailable, "stopped after "+strconv.Itoa(res.Decided)+" rooms: could not save a decision"
	}
	slices.Sort(res.Taken)
	res.Taken = slices.Compact(res.Taken)
	s.renderCampaign(w, r, code, &campaignOutcome{Bulk: &res})
}

// claimForBulk takes each room of act for who (over another's take when
// override: the bulk_decide audit line said so first) and returns the
// rooms held; a room taken meanwhile by someone else is skipped into res.
func (s *server) claimForBulk(r *http.Request, who Who, act []campaignLine, override bool, res *bulkResult) []campaignLine {
	held := make([]campaignLine, 0, len(act))
	for _, l := range act {
		now := s.clock.Now()
		_, err := s.store.TakeItem(r.Context(), l.VerdictID, who.ID, now, s.staleBefore(now), override)
		var te *mysql.TakenError
		switch {
		case errors.As(err, &te):
			res.Taken = append(res.Taken, te.Holder.Moderator)
		case err != nil:
			s.log.Warn("console: bulk decision: take", "verdict_id", l.VerdictID, "err", err)
			res.Error = "some rooms could not be taken and were not decided"
		default:
			held = append(held, l)
		}
	}
	return held
}
