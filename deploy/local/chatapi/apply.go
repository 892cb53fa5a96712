package chatapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// actionState is the stand-in's memory of actions; Server.actMu guards it.
type actionState struct {
	// applied holds every key settled for good (applied, superseded or
	// ignored): a later copy is a duplicate.
	applied map[string]Outcome
	// reversedBy maps a key to the reversal that undid it, so that an
	// action whose reversal overtook it in the queue never takes effect.
	reversedBy   map[string]string
	restrictions map[string]Restriction
	transactions map[string]Transaction
	stats        ActionStats
	journal      *os.File
}

func newActionState() actionState {
	return actionState{
		applied: map[string]Outcome{}, reversedBy: map[string]string{},
		restrictions: map[string]Restriction{}, transactions: map[string]Transaction{},
		stats: ActionStats{Outcomes: map[Outcome]int64{}, Applied: map[string]int64{}},
	}
}

// journalLine is one applied key in the journal: when, and the action's
// body as received.
type journalLine struct {
	At     time.Time       `json:"at"`
	Action json.RawMessage `json:"action"`
}

// Apply applies one delivery of an action body and says what it did. A
// rejected action comes with its *RejectError; an action whose key could
// not be journalled comes with an error that is not one, and must be
// left on the queue to come back.
func (s *Server) Apply(body []byte) (Outcome, error) {
	a, err := DecodeAction(body)
	s.actMu.Lock()
	defer s.actMu.Unlock()
	if err != nil {
		s.act.stats.Outcomes[OutcomeRejected]++
		return OutcomeRejected, err
	}
	out, err := s.applyLocked(a, body, s.clk.Now(), true)
	if out != "" {
		s.act.stats.Outcomes[out]++
	}
	if out == OutcomeApplied {
		s.act.stats.Applied[a.Action.ID]++
	}
	return out, err
}

// applyLocked applies a at now. live is false while the journal is read
// back: the action was checked and recorded then.
func (s *Server) applyLocked(a Action, body []byte, now time.Time, live bool) (Outcome, error) {
	key := a.IdempotencyKey
	if _, done := s.act.applied[key]; done {
		return OutcomeDuplicate, nil
	}
	out := OutcomeApplied
	effect := func() {}
	switch {
	case a.Mode != "on":
		return OutcomeRejected, reject("mode %q: only actions in mode on reach the chat service", a.Mode)
	case s.act.reversedBy[key] != "":
		out = OutcomeSuperseded
	case live && !a.ExpiresAt.After(now):
		return OutcomeRejected, reject("expired at %s", a.ExpiresAt.UTC().Format(time.RFC3339))
	case a.Action.ID == ActEscalate:
		out = OutcomeIgnored
	default:
		var err error
		if effect, err = s.effectOf(a, now); err != nil {
			return OutcomeRejected, err
		}
	}
	if live {
		if err := s.writeJournal(now, body); err != nil {
			return "", err
		}
	}
	effect()
	if a.Reverses != "" {
		s.act.reversedBy[a.Reverses] = key
	}
	s.act.applied[key] = out
	return out, nil
}

// effectOf checks a and returns what applying it changes.
func (s *Server) effectOf(a Action, now time.Time) (func(), error) {
	room, key := a.Item.ID, a.IdempotencyKey
	switch a.Action.ID {
	case ActWarnCounterpart, ActWarnSender:
		text, ok := noticeText(a.Custom.Template, a.Custom.Locale)
		if !ok {
			return nil, reject("no notice template %q in locale %q", a.Custom.Template, a.Custom.Locale)
		}
		if !s.hasRoom(room) {
			return nil, reject("unknown room")
		}
		m := pipeline.ChatMessage{MessageID: pipeline.ActionNoticeID(key), SenderID: NoticeSender,
			SenderRole: pipeline.RoleSystem, Kind: pipeline.KindSystem, SentAt: now, Text: text}
		return func() { s.Add(room, m) }, nil
	case ActRetractNotice:
		return func() { s.remove(room, pipeline.ActionNoticeID(a.Reverses)) }, nil
	case ActHoldTransaction, ActReleaseTransaction:
		tx := a.Custom.Transaction
		if tx == "" {
			return nil, reject("%s needs custom.transaction", a.Action.ID)
		}
		if a.Action.ID == ActHoldTransaction {
			return func() { s.act.transactions[tx] = Transaction{State: TxHeld, Key: key} }, nil
		}
		return func() {
			if t := s.act.transactions[tx]; t.Key == a.Reverses {
				s.act.transactions[tx] = Transaction{State: TxReleased, Key: t.Key}
			}
		}, nil
	case ActRestrictSender, ActLiftRestriction:
		return s.restrictionEffect(a, now)
	}
	return nil, reject("unknown action %q", a.Action.ID)
}

// restrictionEffect restricts or lifts the restriction of a's creator.
func (s *Server) restrictionEffect(a Action, now time.Time) (func(), error) {
	who := a.Creator.ID
	if who == "" {
		return nil, reject("%s needs creator.id", a.Action.ID)
	}
	if a.Action.ID == ActLiftRestriction {
		return func() {
			if r := s.act.restrictions[who]; r.Key == a.Reverses {
				delete(s.act.restrictions, who)
			}
		}, nil
	}
	until := a.Custom.Until
	if until.IsZero() {
		until = a.ExpiresAt
	}
	if !until.After(now) {
		return nil, reject("restriction until %s is not in the future", until.UTC().Format(time.RFC3339))
	}
	return func() {
		// A longer restriction already in force stays.
		if r, ok := s.act.restrictions[who]; !ok || r.Until.Before(until) {
			s.act.restrictions[who] = Restriction{Until: until, Key: a.IdempotencyKey}
		}
	}, nil
}

func (s *Server) writeJournal(at time.Time, body []byte) error {
	if s.act.journal == nil {
		return nil
	}
	b, err := json.Marshal(journalLine{At: at.UTC(), Action: body})
	if err != nil {
		return fmt.Errorf("%w: %v", errJournal, err)
	}
	// No fsync: the journal must survive the process (a kill -9 keeps what
	// was written), not the machine.
	if _, err := s.act.journal.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%w: %v", errJournal, err)
	}
	return nil
}

// openJournal reads the journal at path back (every key it holds is
// applied again at its time, without checks) and opens it for appending.
func (s *Server) openJournal(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%w: %v", errJournal, err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 2*maxActionBytes)
	for n := 1; sc.Scan(); n++ {
		var l journalLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			// A line cut short by a kill is the last one: the delivery it
			// recorded was never acknowledged, and comes back.
			continue
		}
		a, err := DecodeAction(l.Action)
		if err != nil {
			f.Close()
			return fmt.Errorf("%w: %s line %d: %v", errJournal, path, n, err)
		}
		_, _ = s.applyLocked(a, l.Action, l.At, false)
	}
	if err := sc.Err(); err != nil {
		f.Close()
		return fmt.Errorf("%w: %v", errJournal, err)
	}
	s.act.journal = f
	return nil
}

// Close closes the action journal, if any.
func (s *Server) Close() error {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	if s.act.journal == nil {
		return nil
	}
	err := s.act.journal.Close()
	s.act.journal = nil
	return err
}

// ErrRestricted is the error of a message from a restricted sender.
var ErrRestricted = errors.New("sender is restricted")

// ErrNotUserMessage is the error of a message that only the chat service
// itself may write: a system message, or one under a notice's id.
var ErrNotUserMessage = errors.New("only buyers' and sellers' messages are accepted")

// Post takes one message from a buyer or a seller into a room, as the chat
// service's intake does: it refuses a restricted sender's message until
// the restriction expires, and a message posing as the service's own.
func (s *Server) Post(roomID string, m pipeline.ChatMessage) error {
	if (m.SenderRole != pipeline.RoleBuyer && m.SenderRole != pipeline.RoleSeller) || m.Kind == pipeline.KindSystem ||
		strings.HasPrefix(m.MessageID, pipeline.ActionNoticePrefix) {
		return ErrNotUserMessage
	}
	s.actMu.Lock()
	r, ok := s.act.restrictions[m.SenderID]
	if ok && r.Until.After(s.clk.Now()) {
		s.act.stats.Refused++
		s.actMu.Unlock()
		return fmt.Errorf("%w until %s", ErrRestricted, r.Until.UTC().Format(time.RFC3339))
	}
	s.actMu.Unlock()
	s.Add(roomID, m)
	return nil
}

// ActionState is a snapshot of what actions did: counters, restrictions
// in force or expired, and transactions.
type ActionState struct {
	Stats        ActionStats            `json:"stats"`
	Restrictions map[string]Restriction `json:"restrictions"`
	Transactions map[string]Transaction `json:"transactions"`
}

// Actions returns a snapshot of the action state.
func (s *Server) Actions() ActionState {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	return ActionState{
		Stats: ActionStats{Outcomes: maps.Clone(s.act.stats.Outcomes), Applied: maps.Clone(s.act.stats.Applied),
			Refused: s.act.stats.Refused},
		Restrictions: maps.Clone(s.act.restrictions),
		Transactions: maps.Clone(s.act.transactions),
	}
}

// Restricted reports whether sender is restricted now.
func (s *Server) Restricted(sender string) bool {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	r, ok := s.act.restrictions[sender]
	return ok && r.Until.After(s.clk.Now())
}
