package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
)

// checkCampaigns bounds a verdict's campaign signals as verdict_campaigns
// stores them: at most pipeline.MaxCampaigns, each a known kind, a keyed
// pseudonym (a raw contact value or text is refused, whoever wrote the
// verdict) once, a message id of 1 to 128 bytes, non-negative counts.
func checkCampaigns(v pipeline.Verdict) error {
	if len(v.Campaigns) == 0 {
		return nil
	}
	var errs []error
	if len(v.Campaigns) > pipeline.MaxCampaigns {
		errs = append(errs, fmt.Errorf("%d campaign signals, at most %d", len(v.Campaigns), pipeline.MaxCampaigns))
	}
	seen := map[string]bool{}
	for _, c := range v.Campaigns {
		switch {
		case c.Kind != pipeline.CampaignScript && c.Kind != pipeline.CampaignContact:
			errs = append(errs, fmt.Errorf("campaign signal of unknown kind %q", c.Kind))
		case !pipeline.IsSubjectPseudonym(c.Mark) || seen[string(c.Kind)+c.Mark]:
			errs = append(errs, errors.New("a campaign mark is not a keyed pseudonym, or repeated"))
		case c.MessageID == "" || len(c.MessageID) > 128 || c.Rooms < 0 || c.Senders < 0:
			errs = append(errs, errors.New("a campaign signal's message id is empty or longer than 128 bytes, or a count is negative"))
		}
		seen[string(c.Kind)+c.Mark] = true
	}
	return errors.Join(errs...)
}

// replaceCampaigns makes verdict id's campaign rows exactly v's campaign
// signals; a new verdict (fresh) has none to delete. The verdict's room,
// label, category and finish time are copied onto each row so that the
// campaign queries read ix_verdict_campaigns_mark alone.
func replaceCampaigns(ctx context.Context, tx *sql.Tx, id int64, v pipeline.Verdict, fresh bool) error {
	if !fresh {
		if _, err := tx.ExecContext(ctx, "DELETE FROM verdict_campaigns WHERE verdict_id = ?", id); err != nil {
			return fmt.Errorf("mysql: save campaigns: delete: %w", err)
		}
	}
	if len(v.Campaigns) == 0 {
		return nil
	}
	decided := v.FinishedAt
	if decided.IsZero() {
		decided = v.Key.WindowEnd
	}
	var b strings.Builder
	b.WriteString("INSERT INTO verdict_campaigns (verdict_id, kind, mark, message_id, rooms, senders, repeat_sender, room_id, label, category, decided_at) VALUES ")
	args := make([]any, 0, 11*len(v.Campaigns))
	for i, c := range v.Campaigns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, id, string(c.Kind), c.Mark, c.MessageID, c.Rooms, c.Senders, c.RepeatSender, v.Key.RoomID, string(v.Label), string(v.Category), dbTime(decided))
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("mysql: save campaigns: %w", err)
	}
	return nil
}

// readCampaigns reads verdict id's campaign signals back, most rooms
// first, as the reviewer ordered them.
func readCampaigns(ctx context.Context, tx *sql.Tx, id uint64) ([]pipeline.CampaignCount, error) {
	rows, err := tx.QueryContext(ctx, "SELECT kind, mark, message_id, rooms, senders, repeat_sender FROM verdict_campaigns WHERE verdict_id = ? ORDER BY rooms DESC, kind DESC, mark", id)
	if err != nil {
		return nil, fmt.Errorf("mysql: get campaigns: %w", err)
	}
	defer rows.Close()
	var out []pipeline.CampaignCount
	for rows.Next() {
		var (
			c    pipeline.CampaignCount
			kind string
		)
		if err := rows.Scan(&kind, &c.Mark, &c.MessageID, &c.Rooms, &c.Senders, &c.RepeatSender); err != nil {
			return nil, fmt.Errorf("mysql: get campaigns: %w", err)
		}
		c.Kind = pipeline.CampaignKind(kind)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: get campaigns: %w", err)
	}
	return out, nil
}
