package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// The account view: every verdict about one sender (the verdicts whose
// subjects name them), the account history the pipeline weighs (distinct
// rooms by label and category, overturns apart), and the campaigns the
// account's verdicts carried. The campaign view: the rooms sharing one
// campaign mark with their matching messages side by side, and a bulk
// decision over them (bulk.go).

// accountHistoryWindow is how far back the account view's history reads:
// the window verdict_subjects' decided_at is kept for (migration 00013).
const accountHistoryWindow = 30 * 24 * time.Hour

// accountPageSize and campaignPageSize are the rows of one page; a
// campaign page fetches one message per room from the chat API.
const (
	accountPageSize  = 50
	campaignPageSize = 50
)

// maxChatFetches bounds the chat API calls a campaign page makes at once.
const maxChatFetches = 4

// accountHref is the account view's address for sender.
func accountHref(sender string) string { return "/accounts/" + url.PathEscape(sender) }

// campaignHref is the campaign view's address for mark.
func campaignHref(mark string) string { return "/campaigns/" + url.PathEscape(mark) }

// senderFromPath reads the path's {sender}: 1 to 128 bytes, as
// verdict_subjects holds them.
func senderFromPath(r *http.Request) (string, bool) {
	s := r.PathValue("sender")
	return s, s != "" && len(s) <= 128
}

func (s *server) accountPage(w http.ResponseWriter, r *http.Request) {
	sender, ok := senderFromPath(r)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "no such account", nil)
		return
	}
	ctx, now := r.Context(), s.clock.Now()
	page, err := s.store.AccountVerdicts(ctx, sender, r.URL.Query().Get("cursor"), accountPageSize)
	if errors.Is(err, moderation.ErrBadCursor) {
		s.fail(w, r, http.StatusBadRequest, err.Error(), nil)
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the account's verdicts", err)
		return
	}
	// The view shows the account's history whatever side it took, so it is
	// asked as one participant; the pipeline's lines are by role, the
	// view's rows are not.
	history, err := s.store.AccountHistory(ctx, pipeline.HistoryQuery{
		Accounts: []pipeline.HistoryAccount{{SenderID: sender, Role: pipeline.RoleSeller}}, Since: now.Add(-accountHistoryWindow)})
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the account's history", err)
		return
	}
	marks, err := s.store.AccountCampaigns(ctx, sender)
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the account's campaigns", err)
		return
	}
	data := s.page(r, map[string]any{"Sender": sender, "Page": page, "History": history, "Campaigns": marks,
		"Since": now.Add(-accountHistoryWindow), "First": r.URL.Query().Get("cursor") == ""})
	if page.Next != "" {
		data["NextURL"] = accountHref(sender) + "?cursor=" + url.QueryEscape(page.Next)
	}
	s.render(w, "account.html", http.StatusOK, data)
}

// campaignLine is one room of the campaign view: the verdict, its take as
// this moderator sees it, and its matching message fetched live.
type campaignLine struct {
	moderation.CampaignRoom
	Take    takeView
	Message *pipeline.ChatMessage
	// ChatError says why the message is not shown.
	ChatError string
}

func (s *server) campaignPage(w http.ResponseWriter, r *http.Request) {
	s.renderCampaign(w, r, http.StatusOK, nil)
}

// campaignOutcome is what a campaign page drawn after an action reports:
// a bulk decision's result or a take or release of the whole campaign.
type campaignOutcome struct {
	Bulk *bulkResult
	Take *campaignTakeResult
}

// renderCampaign draws the campaign view of the path's {mark} at the
// query's (or the posted form's) cursor, with the outcome of the action
// that led there when not nil.
func (s *server) renderCampaign(w http.ResponseWriter, r *http.Request, code int, outcome *campaignOutcome) {
	mark := r.PathValue("mark")
	cursor := r.URL.Query().Get("cursor")
	if r.Method == http.MethodPost {
		cursor = r.PostFormValue("cursor")
	}
	page, err := s.store.CampaignRooms(r.Context(), mark, cursor, campaignPageSize)
	if errors.Is(err, moderation.ErrBadMark) || errors.Is(err, moderation.ErrBadCursor) {
		s.fail(w, r, http.StatusNotFound, err.Error(), nil)
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the campaign", err)
		return
	}
	who, _ := whoFrom(r.Context())
	lines := s.campaignLines(r.Context(), who, page.Items)
	open, mine := 0, 0
	for _, l := range lines {
		if l.Newest.Decision == "" {
			open++
		}
		if l.Take.Mine {
			mine++
		}
	}
	if outcome == nil {
		outcome = &campaignOutcome{}
	}
	data := s.page(r, map[string]any{"Mark": mark, "Lines": lines, "Open": open, "Mine": mine, "Cursor": cursor,
		"Result": outcome.Bulk, "TakeResult": outcome.Take, "Categories": pipeline.AbuseCategories,
		"Reasons": s.cfg.DecisionReasons})
	if page.Next != "" {
		data["NextURL"] = campaignHref(mark) + "?cursor=" + url.QueryEscape(page.Next)
	}
	if len(lines) > 0 {
		data["Kind"] = lines[0].Kind
	}
	s.render(w, "campaign.html", code, data)
}

// campaignLines adds each room's take (stale ones shown free) and its
// matching message, fetched live from the chat API a few rooms at a time,
// all within the room page's history timeout. A room whose chat cannot be
// fetched says so; the others still show.
func (s *server) campaignLines(ctx context.Context, who Who, rooms []moderation.CampaignRoom) []campaignLine {
	now := s.clock.Now()
	lines := make([]campaignLine, len(rooms))
	hctx, cancel := context.WithTimeout(ctx, s.historyTimeout)
	defer cancel()
	var g errgroup.Group
	g.SetLimit(maxChatFetches)
	for i, room := range rooms {
		l := &lines[i]
		l.CampaignRoom = room
		if room.TakenBy != "" && s.live(room.TakenActiveAt, now) {
			l.Take = takeView{Holder: room.TakenBy, Mine: room.TakenBy == who.ID, ActiveAt: room.TakenActiveAt}
		}
		g.Go(func() error {
			msgs, err := s.chat.History(hctx, room.Key.RoomID, room.Key.WindowStart, room.Key.WindowEnd)
			if err != nil {
				s.log.Warn("console: chat history", "room_id", room.Key.RoomID, "err", err)
				l.ChatError = "the chat could not be fetched"
				return nil
			}
			for _, m := range msgs {
				if m.MessageID == room.MessageID {
					// A list never reveals: the message is shown masked.
					mm := maskedMessage(m)
					l.Message = &mm
					return nil
				}
			}
			l.ChatError = "the message is no longer in the chat history"
			return nil
		})
	}
	_ = g.Wait() // the fetches report into their lines
	return lines
}
