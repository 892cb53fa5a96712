package llmsim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

// The simulator's account-history rules: rules of this stand-in, chosen so
// that figures show the history reaching the stages, not a model's
// judgement. They read the prompt's account_history block (after the
// transcript; stages.ParseHistoryBlock) and count, per role, the rooms
// whose verdict about that role's accounts was abusive and not overturned:
//
//   - at least HistoryWeakRooms such rooms: a weak signal (severity 1) in
//     a message of that role counts as evidence (severity 2), so a chat
//     that was clean on its own becomes suspicious;
//   - at least HistoryStrongRooms: every signal in that role's messages is
//     one step more severe (at most 5), so suspicious becomes abusive.
//
// History alone never makes a signal: a chat with nothing in that role's
// messages stays as the rules found it, as the prompt tells a model.
const (
	HistoryWeakRooms   = 1
	HistoryStrongRooms = 3
)

// abusiveRooms counts, per role, the rooms of abusive verdicts that no
// moderator overturned.
func abusiveRooms(lines []pipeline.HistoryCount) map[pipeline.SenderRole]int {
	out := map[pipeline.SenderRole]int{}
	for _, l := range lines {
		if l.Label == pipeline.LabelAbusive && !l.Overturned {
			out[l.Role] += l.Rooms
		}
	}
	return out
}

// applyHistory returns a with the history rules applied to a copy of its
// signals (a is the cached analysis of the transcript and is not
// changed), and the note the rationales carry when a rule changed
// something.
func applyHistory(a Analysis, lines []pipeline.HistoryCount) Analysis {
	rooms := abusiveRooms(lines)
	if len(rooms) == 0 {
		return a
	}
	a.Signals = slices.Clone(a.Signals)
	raised := map[pipeline.SenderRole]bool{}
	for i, s := range a.Signals {
		n := rooms[s.Role]
		switch {
		case n >= HistoryStrongRooms:
			a.Signals[i].Severity = min(s.Severity+1, 5)
		case n >= HistoryWeakRooms && s.Severity == 1:
			a.Signals[i].Severity = 2
		default:
			continue
		}
		raised[s.Role] = true
	}
	var notes []string
	for _, role := range []pipeline.SenderRole{pipeline.RoleSeller, pipeline.RoleBuyer} {
		if raised[role] {
			notes = append(notes, fmt.Sprintf("%s in %d earlier abusive rooms", role, rooms[role]))
		}
	}
	if len(notes) > 0 {
		a.HistoryNote = "Account history weighed: " + strings.Join(notes, ", ") + "."
	}
	return a
}

// historyOf reads the account-history block of a request's prompt.
func historyOf(c *call) []pipeline.HistoryCount {
	for _, m := range c.req.Messages {
		if lines := stages.ParseHistoryBlock(m.Content.text); lines != nil {
			return lines
		}
	}
	return nil
}
