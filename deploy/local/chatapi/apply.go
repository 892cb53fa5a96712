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
	// transactions are keyed by room.
	transactions map[string]Transaction
	stats        ActionStats
	journal      *os.File
}

func newActionState() actionState {
	return actionState{
		applied: map[string]Outcome{}, reversedBy: map[string]string{},
		restrictions: map[string]Restriction{}, transactions: map[string]Transaction{},
		stats: ActionStats{Outcomes: map[Outcome]int64{}, Applied: map[pipeline.ActionKind]int64{}},
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
	if out == OutcomeRejected && err == nil {
		err = reject("rejected")
	}
	return out, err
}

// applyLocked applies a at now. live is false while the journal is read
// back: the action was checked and recorded then.
func (s *Server) applyLocked(a pipeline.ProtectiveAction, body []byte, now time.Time, live bool) (Outcome, error) {
	key := a.IdempotencyKey
	if _, done := s.act.applied[key]; done {
		return OutcomeDuplicate, nil
	}
	out := OutcomeApplied
	effect := func() {}
	switch {
	case a.Mode != pipeline.ModeOn, live && !a.ExpiresAt.After(now):
		// Acknowledged and never applied (the contract's rule 2); the
		// key is kept, so a later copy is a duplicate.
		out = OutcomeDropped
	case s.act.reversedBy[key] != "":
		out = OutcomeSuperseded
	case a.Action.ID == pipeline.ActionEscalate:
		out = OutcomeIgnored
	default:
		var err error
		if effect, err = s.effectOf(a, now); err != nil && live {
			return OutcomeRejected, err
		}
		if err != nil {
			// Read back from the journal, the key stays applied even
			// where its effect no longer fits (a room the restarted
			// stand-in does not serve).
			effect = func() {}
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
func (s *Server) effectOf(a pipeline.ProtectiveAction, now time.Time) (func(), error) {
	room, key := a.Item.ID, a.IdempotencyKey
	if !s.hasRoom(room) {
		return nil, reject("unknown room")
	}
	switch a.Action.ID {
	case pipeline.ActionWarnCounterpart, pipeline.ActionWarnSender:
		m := pipeline.ChatMessage{MessageID: pipeline.ActionNoticeID(key), SenderID: NoticeSender,
			SenderRole: pipeline.RoleSystem, Kind: pipeline.KindSystem, SentAt: now,
			Text: noticeText(a.Action.ID, a.Custom.Template, a.Custom.Locale)}
		return func() { s.Add(room, m) }, nil
	case pipeline.ActionRetractNotice:
		return func() { s.remove(room, pipeline.ActionNoticeID(a.Reverses)) }, nil
	case pipeline.ActionHoldTransaction, pipeline.ActionReleaseTransaction:
		return s.transactionEffect(a)
	case pipeline.ActionRestrictSender, pipeline.ActionLiftRestriction:
		return s.restrictionEffect(a, now)
	}
	return nil, reject("unknown action %q", a.Action.ID)
}

// RoomTransaction is the id of a room's current fake safe-payment
// transaction: every room of the stand-in has one.
func RoomTransaction(roomID string) string { return "safepay-" + roomID }

// transactionEffect holds or releases the room's transaction. A named
// transaction must be the room's: the payment service refuses to hold a
// transaction the room does not have.
func (s *Server) transactionEffect(a pipeline.ProtectiveAction) (func(), error) {
	room, tx := a.Item.ID, a.Custom.Transaction
	if tx == "" {
		tx = RoomTransaction(room)
	}
	if tx != RoomTransaction(room) {
		return nil, reject("no transaction %q in the room", tx)
	}
	if a.Action.ID == pipeline.ActionHoldTransaction {
		return func() { s.act.transactions[room] = Transaction{ID: tx, State: TxHeld, Key: a.IdempotencyKey} }, nil
	}
	return func() {
		if t := s.act.transactions[room]; t.Key == a.Reverses {
			s.act.transactions[room] = Transaction{ID: tx, State: TxReleased, Key: t.Key}
		}
	}, nil
}

// restrictionEffect restricts or lifts the restriction of a's creator.
func (s *Server) restrictionEffect(a pipeline.ProtectiveAction, now time.Time) (func(), error) {
	who := a.Creator.ID
	if a.Action.ID == pipeline.ActionLiftRestriction {
		return func() {
			if r := s.act.restrictions[who]; r.Key == a.Reverses {
				delete(s.act.restrictions, who)
			}
		}, nil
	}
	until := *a.Custom.Until // the reader refuses a restriction without one
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
	sc.Buffer(make([]byte, 0, 64<<10), 4*pipeline.MaxActionBytes)
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
	// Transactions are keyed by room.
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
