package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
)

// checkParticipants bounds a verdict's participants as verdict_participants
// stores them: at most pipeline.MaxParticipants, each a sender id of 1 to
// 128 bytes on the buyer or seller side.
func checkParticipants(v pipeline.Verdict) error {
	if len(v.Participants) > pipeline.MaxParticipants {
		return fmt.Errorf("%d participants, at most %d", len(v.Participants), pipeline.MaxParticipants)
	}
	for _, p := range v.Participants {
		if p.SenderID == "" || len(p.SenderID) > 128 || (p.Role != pipeline.RoleBuyer && p.Role != pipeline.RoleSeller) {
			return errors.New("a participant's sender id is empty or longer than 128 bytes, or its side is not buyer or seller")
		}
	}
	return nil
}

// participantRows are the accounts verdict_participants records for v:
// its participants and its subjects (a verdict written by a worker that
// did not record participants still lists its subjects), each sender once,
// the first side seen kept.
func participantRows(v pipeline.Verdict) []pipeline.HistoryAccount {
	seen := map[string]bool{}
	var out []pipeline.HistoryAccount
	add := func(a pipeline.HistoryAccount) {
		if !seen[a.SenderID] {
			seen[a.SenderID] = true
			out = append(out, a)
		}
	}
	for _, p := range v.Participants {
		add(p)
	}
	for _, s := range v.Subjects {
		add(pipeline.HistoryAccount{SenderID: s, Role: v.OffenderRole})
	}
	return out
}

// replaceParticipants makes verdict id's participant rows exactly v's (see
// participantRows); a new verdict (fresh) has none to delete. They are not
// read back with the verdict: the account view reads them by sender.
func replaceParticipants(ctx context.Context, tx *sql.Tx, id int64, v pipeline.Verdict, fresh bool) error {
	if !fresh {
		if _, err := tx.ExecContext(ctx, "DELETE FROM verdict_participants WHERE verdict_id = ?", id); err != nil {
			return fmt.Errorf("mysql: save participants: delete: %w", err)
		}
	}
	rows := participantRows(v)
	if len(rows) == 0 {
		return nil
	}
	decided := v.FinishedAt
	if decided.IsZero() {
		decided = v.Key.WindowEnd
	}
	var b strings.Builder
	b.WriteString("INSERT INTO verdict_participants (verdict_id, sender_id, role, room_id, decided_at) VALUES ")
	args := make([]any, 0, 5*len(rows))
	for i, p := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?)")
		args = append(args, id, p.SenderID, string(p.Role), v.Key.RoomID, dbTime(decided))
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("mysql: save participants: %w", err)
	}
	return nil
}
