package mysql

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.CampaignJoins = (*Store)(nil)

// joinBatch bounds the rows of one statement of the campaign join.
const joinBatch = 500

// JoinRows implements pipeline.CampaignJoins: the window's recorded marks
// of current verdicts by ix_verdict_campaigns_decided, newest first, with
// each verdict's window, label and run, and its subjects read by primary
// key in batches.
func (s *Store) JoinRows(ctx context.Context, since time.Time, limit int) ([]pipeline.CampaignJoinRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT c.verdict_id, c.kind, c.mark, c.class, c.senders, v.room_id, v.window_start, v.window_end, v.label, v.run_id
FROM verdict_campaigns c JOIN verdicts v ON v.id = c.verdict_id
WHERE c.decided_at >= ? AND c.class <> 'repeat_sender' AND v.revision_slot = 0
ORDER BY c.decided_at DESC, c.verdict_id DESC LIMIT ?`, dbTime(since), limit)
	if err != nil {
		return nil, fmt.Errorf("mysql: campaign join rows: %w", err)
	}
	defer rows.Close()
	var out []pipeline.CampaignJoinRow
	ids := map[uint64]bool{}
	for rows.Next() {
		var (
			r                  pipeline.CampaignJoinRow
			kind, class, label string
			ws, we             time.Time
		)
		if err := rows.Scan(&r.VerdictID, &kind, &r.Mark, &class, &r.Senders, &r.RoomID, &ws, &we, &label, &r.RunID); err != nil {
			return nil, fmt.Errorf("mysql: campaign join rows: %w", err)
		}
		r.Kind, r.Class, r.Label = pipeline.CampaignKind(kind), pipeline.CampaignClass(class), pipeline.Label(label)
		r.WindowStart, r.WindowEnd = ws.UTC(), we.UTC()
		ids[r.VerdictID] = true
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: campaign join rows: %w", err)
	}
	subjects, err := s.subjectsOf(ctx, slices.Sorted(maps.Keys(ids)))
	if err != nil {
		return nil, fmt.Errorf("mysql: campaign join rows: %w", err)
	}
	for i := range out {
		out[i].Subjects = subjects[out[i].VerdictID]
	}
	return out, nil
}

// subjectsOf reads the subjects of verdicts ids.
func (s *Store) subjectsOf(ctx context.Context, ids []uint64) (map[uint64][]string, error) {
	out := map[uint64][]string{}
	for part := range slices.Chunk(ids, joinBatch) {
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx, "SELECT verdict_id, sender_id FROM verdict_subjects WHERE verdict_id IN ("+placeholders(len(part))+")", args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var (
				id     uint64
				sender string
			)
			if err := rows.Scan(&id, &sender); err != nil {
				rows.Close()
				return nil, err
			}
			out[id] = append(out[id], sender)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SaveJoin implements pipeline.CampaignJoins: the memberships upserted in
// batches and those not renewed deleted, then each linked verdict's
// sightings turned into linked rows by primary key. The steps are not
// one transaction: a run that fails half way leaves memberships of two
// runs, which the next run replaces.
func (s *Store) SaveJoin(ctx context.Context, j pipeline.CampaignJoin) (int, error) {
	if j.At.IsZero() {
		return 0, fmt.Errorf("mysql: save campaign join: no run time")
	}
	at := dbTime(j.At)
	marks := slices.Sorted(maps.Keys(j.Members))
	for part := range slices.Chunk(marks, joinBatch) {
		args := make([]any, 0, 3*len(part))
		for _, m := range part {
			args = append(args, m, j.Members[m], at)
		}
		q := "INSERT INTO campaign_members (mark, campaign, joined_at) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(part)), ", ") +
			" ON DUPLICATE KEY UPDATE campaign = VALUES(campaign), joined_at = VALUES(joined_at)"
		if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
			return 0, fmt.Errorf("mysql: save campaign join: members: %w", err)
		}
	}
	if _, err := s.db.ExecContext(ctx, "DELETE FROM campaign_members WHERE joined_at < ?", at); err != nil {
		return 0, fmt.Errorf("mysql: save campaign join: old members: %w", err)
	}
	byVerdict := map[uint64][]any{}
	for _, l := range j.Links {
		byVerdict[l.VerdictID] = append(byVerdict[l.VerdictID], l.Mark)
	}
	linked := 0
	for _, id := range slices.Sorted(maps.Keys(byVerdict)) {
		ms := byVerdict[id]
		res, err := s.db.ExecContext(ctx, "UPDATE verdict_campaigns SET class = 'linked' WHERE verdict_id = ? AND class = 'sighting' AND mark IN ("+placeholders(len(ms))+")",
			append([]any{id}, ms...)...)
		if err != nil {
			return linked, fmt.Errorf("mysql: save campaign join: link: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return linked, fmt.Errorf("mysql: save campaign join: link: %w", err)
		}
		linked += int(n)
	}
	return linked, nil
}

// campaignMarks are the marks of mark's campaign (campaign_members), mark
// itself included, at most maxCampaignMarks: mark alone when the join has
// put it in no campaign.
func (s *Store) campaignMarks(ctx context.Context, mark string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT m2.mark FROM campaign_members m1 JOIN campaign_members m2 ON m2.campaign = m1.campaign
WHERE m1.mark = ? ORDER BY m2.mark LIMIT ?`, mark, maxCampaignMarks)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{mark}
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, err
		}
		if m != mark {
			out = append(out, m)
		}
	}
	return out, rows.Err()
}

// maxCampaignMarks bounds the marks a campaign query names: the join's
// largest bound (campaign.MaxJoinMarks).
const maxCampaignMarks = 1024

// placeholders is n comma-separated '?'.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// markArgs are marks as query arguments.
func markArgs(marks []string) []any {
	out := make([]any, len(marks))
	for i, m := range marks {
		out[i] = m
	}
	return out
}
