package demo

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline/campaign"
	mysqlstore "github.com/chatguard/chatguard/storage/mysql"
)

// CampaignRow is one verdict_campaigns row of the run that the console
// shows: a campaign signal, a room linked to a campaign later, or a
// repeat sender's signal, with the campaign its mark was joined into.
type CampaignRow struct {
	// Campaign is the campaign's id (campaign_members), the mark itself
	// when the join put it in none.
	Campaign  string
	Class     string
	VerdictID uint64
	RoomID    string
	MessageID string
}

// FoundCampaign is one campaign of the run.
type FoundCampaign struct {
	// ID is the campaign's id: its console page is /campaigns/<ID>.
	ID string
	// Rooms are its rooms; Linked those of them reviewed before their mark
	// was a campaign and linked by the campaign join (retro-linking).
	Rooms, Linked int
	// Accounts are the senders of its rooms' marked messages, sorted.
	Accounts []string
}

// FoundRepeat is one account the run found repeating itself.
type FoundRepeat struct {
	Account string
	// Rooms are its rooms with a repeat-sender signal; Verdict one of
	// them, whose console page (/verdicts/<id>) says so.
	Rooms   int
	Verdict uint64
}

// Campaigns is what the campaign signals and the campaign join found in
// the run, most rooms first.
type Campaigns struct {
	Campaigns []FoundCampaign
	Repeats   []FoundRepeat
	// Joined is the join's campaigns and linked rooms as it counted them.
	Joined, JoinLinked int
}

// SummarizeCampaigns groups rows into campaigns (campaign and linked
// rows, by campaign) and repeat senders (repeat_sender rows, by the
// account that sent the marked message: senderOf(room, message id)).
func SummarizeCampaigns(rows []CampaignRow, senderOf func(room, message string) string) Campaigns {
	type acc struct {
		rooms, direct map[string]bool
		accounts      map[string]bool
		verdict       uint64
	}
	camps, repeats := map[string]*acc{}, map[string]*acc{}
	get := func(m map[string]*acc, k string) *acc {
		if m[k] == nil {
			m[k] = &acc{rooms: map[string]bool{}, direct: map[string]bool{}, accounts: map[string]bool{}}
		}
		return m[k]
	}
	for _, r := range rows {
		switch r.Class {
		case "campaign", "linked":
			a := get(camps, r.Campaign)
			a.rooms[r.RoomID] = true
			a.direct[r.RoomID] = a.direct[r.RoomID] || r.Class == "campaign"
			if s := senderOf(r.RoomID, r.MessageID); s != "" {
				a.accounts[s] = true
			}
		case "repeat_sender":
			a := get(repeats, senderOf(r.RoomID, r.MessageID))
			a.rooms[r.RoomID] = true
			a.verdict = max(a.verdict, r.VerdictID)
		}
	}
	var out Campaigns
	for id, a := range camps {
		c := FoundCampaign{ID: id, Rooms: len(a.rooms)}
		for _, d := range a.direct {
			if !d {
				c.Linked++
			}
		}
		for s := range a.accounts {
			c.Accounts = append(c.Accounts, s)
		}
		slices.Sort(c.Accounts)
		out.Campaigns = append(out.Campaigns, c)
	}
	for s, a := range repeats {
		out.Repeats = append(out.Repeats, FoundRepeat{Account: s, Rooms: len(a.rooms), Verdict: a.verdict})
	}
	slices.SortFunc(out.Campaigns, func(a, b FoundCampaign) int { return cmp.Or(cmp.Compare(b.Rooms, a.Rooms), cmp.Compare(a.ID, b.ID)) })
	slices.SortFunc(out.Repeats, func(a, b FoundRepeat) int {
		return cmp.Or(cmp.Compare(b.Rooms, a.Rooms), cmp.Compare(a.Account, b.Account))
	})
	return out
}

// joinCampaigns runs the console's campaign join (campaign.Joiner, the one
// implementation) once over the run's database, as the console does every
// minute: `make demo` starts no console, and without the join no mark
// becomes a campaign of several variants and no earlier room is linked.
func (r *runner) joinCampaigns(ctx context.Context) error {
	j, err := campaign.NewJoiner(campaign.DefaultJoinConfig(), mysqlstore.New(r.db), nil, nil)
	if err != nil {
		return err
	}
	jctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, linked, err := j.RunOnce(jctx)
	if err != nil {
		return err
	}
	r.rep.Campaigns.Joined, r.rep.Campaigns.JoinLinked = st.Campaigns, linked
	r.step("campaign join (the console's, run once): %d campaign(s); %d mark(s) of rooms reviewed earlier linked to them", st.Campaigns, linked)
	return nil
}

// loadCampaigns reads the run's campaign rows and names each marked
// message's sender from the sample lake.
func (r *runner) loadCampaigns(ctx context.Context) error {
	rows, err := campaignRows(ctx, r.db, r.cfg.RunID)
	if err != nil || len(rows) == 0 {
		return err
	}
	msgs, err := sampledata.LoadMessages(r.rep.LakeDir)
	if err != nil {
		return err
	}
	senderOf := func(room, id string) string {
		for _, m := range msgs[room] {
			if m.MessageID == id {
				return m.SenderID
			}
		}
		return ""
	}
	joined, linked := r.rep.Campaigns.Joined, r.rep.Campaigns.JoinLinked
	r.rep.Campaigns = SummarizeCampaigns(rows, senderOf)
	r.rep.Campaigns.Joined, r.rep.Campaigns.JoinLinked = joined, linked
	return nil
}

// campaignRows are the run's campaign, linked and repeat-sender rows of
// current verdicts, each with its mark's campaign.
func campaignRows(ctx context.Context, db *sql.DB, runID string) ([]CampaignRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT COALESCE(m.campaign, c.mark), c.class, c.verdict_id, c.room_id, c.message_id
		FROM verdict_campaigns c JOIN verdicts v ON v.id = c.verdict_id LEFT JOIN campaign_members m ON m.mark = c.mark
		WHERE v.run_id = ? AND v.revision_slot = 0 AND c.class IN ('campaign', 'linked', 'repeat_sender')
		ORDER BY c.verdict_id, c.kind, c.mark`, runID)
	if err != nil {
		return nil, fmt.Errorf("mysql: campaigns: %w", err)
	}
	var out []CampaignRow
	for rows.Next() {
		var c CampaignRow
		if err := rows.Scan(&c.Campaign, &c.Class, &c.VerdictID, &c.RoomID, &c.MessageID); err != nil {
			rows.Close()
			return nil, fmt.Errorf("mysql: campaigns: %w", err)
		}
		out = append(out, c)
	}
	if err := errorsOf(rows); err != nil {
		return nil, fmt.Errorf("mysql: campaigns: %w", err)
	}
	return out, nil
}
