package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chatguard/chatguard/moderation"
)

// Queue assignment: a moderator takes an item so that the team does not
// decide it twice. The take lives in MySQL (queue_takes), changed only by
// conditional statements, so every console replica sees one holder; a
// take goes stale Config.TakeTimeout after its holder's last action.

// takeView is what the room page shows of an item's take.
type takeView struct {
	// Holder is the moderator holding the item; "" when nobody does (or
	// their take went stale).
	Holder   string
	Mine     bool
	ActiveAt time.Time
}

// staleBefore is the cut-off of live takes at now: a take whose last
// activity is before it no longer holds.
func (s *server) staleBefore(now time.Time) time.Time { return now.Add(-s.cfg.TakeTimeout) }

// live reports whether a take active at activeAt still holds now.
func (s *server) live(activeAt, now time.Time) bool { return !activeAt.Before(s.staleBefore(now)) }

// hideStaleTakes clears the holder of queue items whose take went stale:
// the queue shows them as free, as TakeItem treats them.
func (s *server) hideStaleTakes(items []moderation.QueueItem) {
	now := s.clock.Now()
	for i := range items {
		if items[i].TakenBy != "" && !s.live(items[i].TakenActiveAt, now) {
			items[i].TakenBy, items[i].TakenActiveAt = "", time.Time{}
		}
	}
}

// takeOf reads the take of verdict id for who's room page, renewing it when
// it is who's: looking at the item is activity on it.
func (s *server) takeOf(ctx context.Context, id uint64, who Who) (takeView, error) {
	now := s.clock.Now()
	t, ok, err := s.store.TakeOf(ctx, id)
	if err != nil || !ok {
		return takeView{}, err
	}
	if t.Moderator == who.ID {
		if _, err := s.store.TouchTake(ctx, id, who.ID, now); err != nil {
			return takeView{}, err
		}
		return takeView{Holder: t.Moderator, Mine: true, ActiveAt: now}, nil
	}
	if !s.live(t.ActiveAt, now) {
		return takeView{}, nil
	}
	return takeView{Holder: t.Moderator, ActiveAt: t.ActiveAt}, nil
}

// take makes the signed-in moderator the item's holder, audited before it
// acts. Refused (another moderator holds it), it sends the moderator to the
// room page, which names the holder.
func (s *server) take(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	id, v, ok := s.verdictFromPath(w, r)
	if !ok {
		return
	}
	if err := s.audit(r.Context(), moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionTake, VerdictID: id, RoomID: v.Key.RoomID}); err != nil {
		s.refuseUnaudited(w, r, err)
		return
	}
	now := s.clock.Now()
	_, err := s.store.TakeItem(r.Context(), id, who.ID, now, s.staleBefore(now), false)
	room := "/verdicts/" + strconv.FormatUint(id, 10)
	if errors.Is(err, moderation.ErrTaken) {
		http.Redirect(w, r, room+"?take=refused", http.StatusSeeOther)
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not take the item", err)
		return
	}
	http.Redirect(w, r, room, http.StatusSeeOther)
}

// release ends the signed-in moderator's own take, audited before it acts,
// and returns to the queue.
func (s *server) release(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	id, ok := verdictIDParam(r)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "no such verdict", nil)
		return
	}
	if err := s.audit(r.Context(), moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionRelease, VerdictID: id}); err != nil {
		s.refuseUnaudited(w, r, err)
		return
	}
	if _, err := s.store.ReleaseItem(r.Context(), id, who.ID); err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not release the item", err)
		return
	}
	http.Redirect(w, r, "/queue", http.StatusSeeOther)
}

// conflict is why a decision was not recorded: another moderator holds the
// item, or decided it after the deciding moderator's page was drawn.
type conflict struct {
	Message string
	// Form is the decision as posted, for the "decide anyway" button.
	Form map[string]string
}

// claimForDecision takes the item for who before a decision, so that two
// moderators never decide it at once. It returns a conflict (nil when who
// may decide) and an error when MySQL failed, or an override's audit row
// could not be written (errAudit). An override is audited before it takes
// the item over or adds to another moderator's decision.
func (s *server) claimForDecision(r *http.Request, who Who, id uint64, roomID string) (*conflict, error) {
	ctx, now := r.Context(), s.clock.Now()
	override := r.PostFormValue("override") == "1"
	_, err := s.store.TakeItem(ctx, id, who.ID, now, s.staleBefore(now), false)
	var te *moderation.TakenError
	switch {
	case errors.As(err, &te) && !override:
		return s.conflictOf(r, "Taken by "+te.Holder.Moderator+" (active "+te.Holder.ActiveAt.Format("15:04 UTC")+"): not decided."), nil
	case errors.As(err, &te):
		if err := s.audit(ctx, moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionOverrideTake, VerdictID: id, RoomID: roomID,
			Override: true, Holder: te.Holder.Moderator}); err != nil {
			return nil, err
		}
		if _, err := s.store.TakeItem(ctx, id, who.ID, now, s.staleBefore(now), true); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	}
	// Held now, the newest decision cannot change under us but by an
	// override; one made since the page was drawn is news to the moderator.
	ds, err := s.store.Decisions(ctx, id, 50)
	if err != nil {
		return nil, err
	}
	// The page's seen mark is its newest row (an undo included); the one
	// to report is the decision in force, when the rows changed since.
	seen, _ := strconv.ParseUint(r.PostFormValue("seen"), 10, 64)
	var newest []moderation.Decision
	if in, ok := moderation.InForce(ds); ok && ds[0].ID != seen {
		newest = []moderation.Decision{in}
	}
	if len(newest) == 1 && newest[0].ID != seen && newest[0].Moderator != who.ID {
		if !override {
			return s.conflictOf(r, "Decided meanwhile by "+newest[0].Moderator+" ("+newest[0].Decision+" → "+string(newest[0].Label)+"): not decided."), nil
		}
		if err := s.audit(ctx, moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionOverrideDecided, VerdictID: id, RoomID: roomID,
			Override: true, Holder: newest[0].Moderator, DecisionID: newest[0].ID}); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (s *server) conflictOf(r *http.Request, msg string) *conflict {
	form := map[string]string{}
	for _, k := range []string{"decision", "label", "category", "reason", "note"} {
		form[k] = r.PostFormValue(k)
	}
	return &conflict{Message: msg, Form: form}
}

// renderConflict answers a refused decision: 409 with the decisions and
// the reason, and a button to decide anyway (an audited override).
func (s *server) renderConflict(w http.ResponseWriter, r *http.Request, id uint64, c *conflict) {
	decisions, err := s.store.Decisions(r.Context(), id, 20)
	if err != nil {
		s.log.Warn("console: decisions", "verdict_id", id, "err", err)
	}
	data := s.decisionsData(r, id, decisions)
	data["Conflict"] = c
	name := "decisions"
	if r.Header.Get("HX-Request") != "true" {
		name = "conflict.html"
	}
	s.render(w, name, http.StatusConflict, data)
}

// campaignTakeResult is what taking or releasing a whole campaign did, for
// the campaign page that follows.
type campaignTakeResult struct {
	// Released is true for a release: Rooms counts the takes it ended.
	Released bool
	// Rooms counts the open rooms the moderator holds after a take (or
	// the takes a release ended).
	Rooms int
	// Others lists the moderators whose live takes were left alone, with
	// their number of the campaign's open rooms, by name.
	Others []heldRooms
}

// heldRooms is one other moderator's share of a campaign.
type heldRooms struct {
	Moderator string
	Rooms     int
}

// campaignMarkOK reports whether mark is one verdict_campaigns can hold.
func campaignMarkOK(mark string) bool { return mark != "" && len(mark) <= 40 }

// takeCampaign is POST /campaigns/{mark}/take: the signed-in moderator
// takes every open room of the campaign (all its pages) that no other
// moderator holds live. It is audited before it acts, as one action with
// the number of open rooms; the rooms others hold are left to them and
// named on the page that follows, and deciding them needs the explicit
// override, as for a single item.
func (s *server) takeCampaign(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	mark := r.PathValue("mark")
	if !campaignMarkOK(mark) {
		s.fail(w, r, http.StatusNotFound, "no such campaign", nil)
		return
	}
	open, err := s.store.CountOpenCampaignRooms(r.Context(), mark)
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the campaign", err)
		return
	}
	if err := s.audit(r.Context(), moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionTakeCampaign, Mark: mark, Rooms: open}); err != nil {
		s.refuseUnaudited(w, r, err)
		return
	}
	now := s.clock.Now()
	got, err := s.store.TakeCampaign(r.Context(), mark, who.ID, now, s.staleBefore(now))
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not take the campaign", err)
		return
	}
	res := &campaignTakeResult{Rooms: got.Mine}
	for m, n := range got.Others {
		res.Others = append(res.Others, heldRooms{Moderator: m, Rooms: n})
	}
	slices.SortFunc(res.Others, func(a, b heldRooms) int { return strings.Compare(a.Moderator, b.Moderator) })
	s.log.Info("console: campaign taken", "moderator", who.ID, "mark", mark, "held", got.Mine, "left_to_others", res.Others)
	s.renderCampaign(w, r, http.StatusOK, &campaignOutcome{Take: res})
}

// releaseCampaign is POST /campaigns/{mark}/release: the signed-in
// moderator's takes of the campaign's rooms end (nobody else's), audited
// before it acts.
func (s *server) releaseCampaign(w http.ResponseWriter, r *http.Request) {
	who, _ := whoFrom(r.Context())
	mark := r.PathValue("mark")
	if !campaignMarkOK(mark) {
		s.fail(w, r, http.StatusNotFound, "no such campaign", nil)
		return
	}
	if err := s.audit(r.Context(), moderation.AuditRecord{Moderator: who.ID, Action: moderation.ActionReleaseCampaign, Mark: mark}); err != nil {
		s.refuseUnaudited(w, r, err)
		return
	}
	n, err := s.store.ReleaseCampaign(r.Context(), mark, who.ID)
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not release the campaign", err)
		return
	}
	s.renderCampaign(w, r, http.StatusOK, &campaignOutcome{Take: &campaignTakeResult{Released: true, Rooms: n}})
}
