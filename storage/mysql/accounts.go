package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// The console's account and campaign views, over current revisions only
// (a superseded revision's rows stay for history, joined out by the
// verdicts row's revision_slot): every verdict about one
// sender (verdict_subjects, by ix_verdict_subjects_sender), the campaign
// marks those verdicts carried, and every verdict carrying one mark
// (verdict_campaigns, by ix_verdict_campaigns_mark). Long lists are read
// with keyset paging on (decided_at, verdict_id), newest first, as the
// queue is: a page costs the same at any depth.

// newestDecisionSQL is the newest moderator decision on the verdict of
// alias s, as "decision label" (” when none): one probe of
// ix_moderator_decisions_verdict per row (forced, as historySQL explains).
const newestDecisionSQL = `COALESCE((SELECT CONCAT(d.decision, ' ', d.label) FROM moderator_decisions d FORCE INDEX (ix_moderator_decisions_verdict)
      WHERE d.verdict_id = %s AND d.reversed_at IS NULL AND d.decision <> 'undo' ORDER BY d.decided_at DESC, d.id DESC LIMIT 1), '')`

func parseNewest(s string) moderation.Newest {
	d, l, _ := strings.Cut(s, " ")
	return moderation.Newest{Decision: d, Label: pipeline.Label(l)}
}

// pageCursor is the position after the last row of a page ordered by
// (decided_at, verdict_id) descending. Of names the list it belongs to (a
// hash of the sender or mark), so a cursor is not replayed on another.
type pageCursor struct {
	At time.Time `json:"t"`
	ID uint64    `json:"i"`
	Of string    `json:"o"`
}

func listFingerprint(kind, key string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + key))
	return base64.RawURLEncoding.EncodeToString(h[:9])
}

func encodePageCursor(at time.Time, id uint64, of string) string {
	b, _ := json.Marshal(pageCursor{At: dbTime(at), ID: id, Of: of}) // plain fields: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodePageCursor reads cursor ("" → nil) for the list of.
func decodePageCursor(cursor, of string) (*pageCursor, error) {
	if cursor == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", moderation.ErrBadCursor, err)
	}
	var c pageCursor
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %v", moderation.ErrBadCursor, err)
	}
	if c.Of != of || c.ID == 0 || c.At.IsZero() {
		return nil, fmt.Errorf("%w: it belongs to another list; start from the first page", moderation.ErrBadCursor)
	}
	return &c, nil
}

func checkLimit(limit int) error {
	if limit < 1 || limit > moderation.MaxAccountLimit {
		return fmt.Errorf("limit %d is not in 1..%d", limit, moderation.MaxAccountLimit)
	}
	return nil
}

// AccountVerdicts returns one page of the verdicts of the rooms senderID
// took part in (verdict_participants, by ix_verdict_participants_sender),
// each marked when it names senderID as a subject, newest first, at most
// limit (1..MaxAccountLimit), after cursor ("" for the first page, else
// an moderation.AccountPage.Next of the same sender). A bad cursor or limit is an
// error naming it; it honours ctx. Verdicts saved before participants
// were recorded are listed only where they name senderID as a subject
// (migration 00018 copied those), and verdicts saved before subjects
// were recorded not at all.
func (s *Store) AccountVerdicts(ctx context.Context, senderID, cursor string, limit int) (moderation.AccountPage, error) {
	of := listFingerprint("account", senderID)
	cur, err := decodePageCursor(cursor, of)
	if err == nil {
		err = checkLimit(limit)
	}
	if err != nil {
		return moderation.AccountPage{}, fmt.Errorf("mysql: account verdicts: %w", err)
	}
	// The label and category are the verdict row's (a primary-key probe
	// per row of the page); whether it names the account, a probe of
	// verdict_subjects' primary key.
	q := `SELECT p.verdict_id, p.room_id, p.role,
    EXISTS (SELECT 1 FROM verdict_subjects s WHERE s.verdict_id = p.verdict_id AND s.sender_id = p.sender_id),
    v.label, v.category, p.decided_at, ` + fmt.Sprintf(newestDecisionSQL, "p.verdict_id") + `
FROM verdict_participants p JOIN verdicts v ON v.id = p.verdict_id WHERE p.sender_id = ? AND v.revision_slot = 0`
	args := []any{senderID}
	if cur != nil {
		q += " AND (p.decided_at < ? OR (p.decided_at = ? AND p.verdict_id < ?))"
		args = append(args, dbTime(cur.At), dbTime(cur.At), cur.ID)
	}
	q += " ORDER BY p.decided_at DESC, p.verdict_id DESC LIMIT ?"
	args = append(args, limit+1)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return moderation.AccountPage{}, fmt.Errorf("mysql: account verdicts: %w", err)
	}
	defer rows.Close()
	var page moderation.AccountPage
	for rows.Next() {
		var (
			v                        moderation.AccountVerdict
			role, label, cat, newest string
		)
		if err := rows.Scan(&v.VerdictID, &v.RoomID, &role, &v.Subject, &label, &cat, &v.DecidedAt, &newest); err != nil {
			return moderation.AccountPage{}, fmt.Errorf("mysql: account verdicts: %w", err)
		}
		v.Role, v.Label, v.Category, v.DecidedAt = pipeline.SenderRole(role), pipeline.Label(label), pipeline.Category(cat), v.DecidedAt.UTC()
		v.Newest = parseNewest(newest)
		page.Items = append(page.Items, v)
	}
	if err := rows.Err(); err != nil {
		return moderation.AccountPage{}, fmt.Errorf("mysql: account verdicts: %w", err)
	}
	if len(page.Items) > limit {
		page.Items = page.Items[:limit]
		last := page.Items[limit-1]
		page.Next = encodePageCursor(last.DecidedAt, last.VerdictID, of)
	}
	return page, nil
}

// AccountCampaigns returns the campaigns the verdicts about senderID
// carried, one line a campaign (its id, a mark, when the campaign join
// put the mark in one; the mark itself otherwise), rooms linked later
// included, the most recent first, at most 100; a line is a repeat
// sender's when every verdict carrying it said so. Empty until the pipeline
// writes campaign signals. It honours ctx.
func (s *Store) AccountCampaigns(ctx context.Context, senderID string) ([]moderation.CampaignMark, error) {
	return s.marks(ctx, "mysql: account campaigns", `SELECT MIN(c.kind), COALESCE(m.campaign, c.mark), MAX(c.rooms), MAX(c.senders), COUNT(DISTINCT c.room_id), MAX(c.decided_at), MIN(c.class = 'repeat_sender')
FROM verdict_subjects s JOIN verdicts v ON v.id = s.verdict_id JOIN verdict_campaigns c ON c.verdict_id = s.verdict_id
LEFT JOIN campaign_members m ON m.mark = c.mark
WHERE s.sender_id = ? AND v.revision_slot = 0 AND c.class <> 'sighting' GROUP BY COALESCE(m.campaign, c.mark)
ORDER BY MAX(c.decided_at) DESC, COALESCE(m.campaign, c.mark) LIMIT ?`, senderID, moderation.MaxMarks)
}

// VerdictCampaigns returns the campaign marks verdict id carried (Here is
// 1 for each). It honours ctx.
func (s *Store) VerdictCampaigns(ctx context.Context, verdictID uint64) ([]moderation.CampaignMark, error) {
	return s.marks(ctx, "mysql: verdict campaigns", `SELECT kind, mark, rooms, senders, 1, decided_at, class = 'repeat_sender'
FROM verdict_campaigns WHERE verdict_id = ? AND class <> 'sighting' ORDER BY kind, mark LIMIT ?`, verdictID, moderation.MaxMarks)
}

func (s *Store) marks(ctx context.Context, prefix, q string, args ...any) ([]moderation.CampaignMark, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	defer rows.Close()
	var out []moderation.CampaignMark
	for rows.Next() {
		var m moderation.CampaignMark
		if err := rows.Scan(&m.Kind, &m.Mark, &m.Rooms, &m.Senders, &m.Here, &m.LastAt, &m.RepeatSender); err != nil {
			return nil, fmt.Errorf("%s: %w", prefix, err)
		}
		m.LastAt = m.LastAt.UTC()
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	return out, nil
}

// CampaignRooms returns one page of the verdicts of mark's campaign (every
// mark the campaign join put with it; rooms linked later included), one
// row a room, newest first, at most limit (1..MaxAccountLimit), after cursor ("" or a
// moderation.CampaignPage.Next of the same mark), each with its take and the decision
// in force. It honours ctx; a bad mark, cursor or limit is an error.
func (s *Store) CampaignRooms(ctx context.Context, mark, cursor string, limit int) (moderation.CampaignPage, error) {
	of := listFingerprint("campaign", mark)
	cur, err := decodePageCursor(cursor, of)
	if err == nil {
		err = checkLimit(limit)
	}
	if err == nil && (mark == "" || len(mark) > 40) {
		err = moderation.ErrBadMark
	}
	if err != nil {
		return moderation.CampaignPage{}, fmt.Errorf("mysql: campaign rooms: %w", err)
	}
	marks, err := s.campaignMarks(ctx, mark)
	if err != nil {
		return moderation.CampaignPage{}, fmt.Errorf("mysql: campaign rooms: %w", err)
	}
	// One row a room: the row of its smallest mark of the campaign.
	in := placeholders(len(marks))
	q := `SELECT c.verdict_id, v.room_id, v.window_start, v.window_end, v.pipeline_version, c.kind, c.message_id, c.label, c.category,
    v.action, c.decided_at, COALESCE(t.moderator, ''), t.active_at, ` + fmt.Sprintf(newestDecisionSQL, "c.verdict_id") + `
FROM verdict_campaigns c JOIN verdicts v ON v.id = c.verdict_id LEFT JOIN queue_takes t ON t.verdict_id = c.verdict_id
WHERE c.mark IN (` + in + `) AND c.class IN ('campaign', 'linked') AND v.revision_slot = 0
    AND c.mark = (SELECT MIN(c2.mark) FROM verdict_campaigns c2 WHERE c2.verdict_id = c.verdict_id AND c2.class IN ('campaign', 'linked') AND c2.mark IN (` + in + `))`
	args := slices.Concat(markArgs(marks), markArgs(marks))
	if cur != nil {
		q += " AND (c.decided_at < ? OR (c.decided_at = ? AND c.verdict_id < ?))"
		args = append(args, dbTime(cur.At), dbTime(cur.At), cur.ID)
	}
	q += " ORDER BY c.decided_at DESC, c.verdict_id DESC LIMIT ?"
	args = append(args, limit+1)
	items, err := s.campaignRows(ctx, q, args)
	if err != nil {
		return moderation.CampaignPage{}, fmt.Errorf("mysql: campaign rooms: %w", err)
	}
	page := moderation.CampaignPage{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		last := page.Items[limit-1]
		page.Next = encodePageCursor(last.DecidedAt, last.VerdictID, of)
	}
	return page, nil
}

func (s *Store) campaignRows(ctx context.Context, q string, args []any) ([]moderation.CampaignRoom, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []moderation.CampaignRoom
	for rows.Next() {
		var (
			c                       moderation.CampaignRoom
			ws, we                  time.Time
			label, cat, act, newest string
			takenAt                 sql.NullTime
		)
		if err := rows.Scan(&c.VerdictID, &c.Key.RoomID, &ws, &we, &c.Key.PipelineVersion, &c.Kind, &c.MessageID, &label, &cat,
			&act, &c.DecidedAt, &c.TakenBy, &takenAt, &newest); err != nil {
			return nil, err
		}
		c.Key.WindowStart, c.Key.WindowEnd, c.DecidedAt = ws.UTC(), we.UTC(), c.DecidedAt.UTC()
		c.Label, c.Category, c.Action = pipeline.Label(label), pipeline.Category(cat), pipeline.Action(act)
		if takenAt.Valid {
			c.TakenActiveAt = takenAt.Time.UTC()
		}
		c.Newest = parseNewest(newest)
		out = append(out, c)
	}
	return out, rows.Err()
}
