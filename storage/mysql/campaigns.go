package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
)

// checkCampaigns bounds a verdict's campaign signals and sightings as
// verdict_campaigns stores them: at most pipeline.MaxCampaigns signals and
// pipeline.MaxSightings sightings, each a known kind, a keyed
// pseudonym (a raw contact value or text is refused, whoever wrote the
// verdict) once, a message id of 1 to 128 bytes, non-negative counts.
func checkCampaigns(v pipeline.Verdict) error {
	if len(v.Campaigns) == 0 && len(v.Sightings) == 0 {
		return nil
	}
	var errs []error
	if len(v.Campaigns) > pipeline.MaxCampaigns {
		errs = append(errs, fmt.Errorf("%d campaign signals, at most %d", len(v.Campaigns), pipeline.MaxCampaigns))
	}
	if len(v.Sightings) > pipeline.MaxSightings {
		errs = append(errs, fmt.Errorf("%d campaign sightings, at most %d", len(v.Sightings), pipeline.MaxSightings))
	}
	seen := map[string]bool{}
	for _, c := range slices.Concat(v.Campaigns, v.Sightings) {
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
// signals (class campaign or repeat_sender) and sightings (class
// sighting; a sighting linked since is written again as a sighting: the
// next join links it again); a new verdict (fresh) has none to delete. The verdict's room,
// label, category and finish time are copied onto each row so that the
// campaign queries read ix_verdict_campaigns_mark alone.
func replaceCampaigns(ctx context.Context, tx *sql.Tx, id int64, v pipeline.Verdict, fresh bool) error {
	if !fresh {
		if _, err := tx.ExecContext(ctx, "DELETE FROM verdict_campaigns WHERE verdict_id = ?", id); err != nil {
			return fmt.Errorf("mysql: save campaigns: delete: %w", err)
		}
	}
	if len(v.Campaigns) == 0 && len(v.Sightings) == 0 {
		return nil
	}
	decided := v.FinishedAt
	if decided.IsZero() {
		decided = v.Key.WindowEnd
	}
	var b strings.Builder
	b.WriteString("INSERT INTO verdict_campaigns (verdict_id, kind, mark, message_id, rooms, senders, class, room_id, label, category, decided_at) VALUES ")
	args := make([]any, 0, 11*(len(v.Campaigns)+len(v.Sightings)))
	for i, c := range slices.Concat(v.Campaigns, v.Sightings) {
		if i > 0 {
			b.WriteString(", ")
		}
		class := pipeline.ClassCampaign
		switch {
		case i >= len(v.Campaigns):
			class = pipeline.ClassSighting
		case c.RepeatSender:
			class = pipeline.ClassRepeatSender
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, id, string(c.Kind), c.Mark, c.MessageID, c.Rooms, c.Senders, string(class), v.Key.RoomID, string(v.Label), string(v.Category), dbTime(decided))
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("mysql: save campaigns: %w", err)
	}
	return nil
}

// readCampaigns reads verdict id's campaign signals back, most rooms
// first, as the reviewer ordered them, and its sightings (linked or not)
// likewise.
func readCampaigns(ctx context.Context, tx *sql.Tx, id uint64) (signals, sightings []pipeline.CampaignCount, err error) {
	rows, err := tx.QueryContext(ctx, `SELECT kind, mark, message_id, rooms, senders, class FROM verdict_campaigns WHERE verdict_id = ?
ORDER BY class IN ('sighting', 'linked'), rooms DESC, kind DESC, mark`, id)
	if err != nil {
		return nil, nil, fmt.Errorf("mysql: get campaigns: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			c           pipeline.CampaignCount
			kind, class string
		)
		if err := rows.Scan(&kind, &c.Mark, &c.MessageID, &c.Rooms, &c.Senders, &class); err != nil {
			return nil, nil, fmt.Errorf("mysql: get campaigns: %w", err)
		}
		c.Kind = pipeline.CampaignKind(kind)
		switch pipeline.CampaignClass(class) {
		case pipeline.ClassSighting, pipeline.ClassLinked:
			sightings = append(sightings, c)
		default:
			c.RepeatSender = class == string(pipeline.ClassRepeatSender)
			signals = append(signals, c)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("mysql: get campaigns: %w", err)
	}
	return signals, sightings, nil
}
