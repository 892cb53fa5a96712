package chatprep

import (
	"cmp"
	"slices"
	"unicode/utf8"

	"github.com/chatguard/chatguard/pipeline"
)

// Trimmer keeps an oversized chat history within a memory budget while it
// is read, message by message, so that a flooded room is still reviewed:
// the newest messages and those with rule signals stay, the rest are
// dropped and summed up in a pipeline.HistoryTrim (counts by kind, and the
// signals found in them). A message longer than the per-message bound keeps
// its head and tail, as Prepare would cut it. A Trimmer is not safe for
// concurrent use.
type Trimmer struct {
	budget     int64
	maxMessage int
	kept       []trimEntry
	used       int64
	seq        int
	trim       pipeline.HistoryTrim
}

type trimEntry struct {
	m      pipeline.ChatMessage
	cost   int64
	signal bool
	seq    int // arrival order, the tie-break of equal times
}

// trimOverhead approximates what a message costs beyond its text and URL
// (ids, time, role) in memory.
const trimOverhead = 128

// DefaultTrimMessageRunes bounds one message's text in a trimmed history:
// generous, since Prepare cuts again for the models.
const DefaultTrimMessageRunes = 64 << 10

// NewTrimmer returns a Trimmer that keeps at most budget bytes of messages
// and cuts a message's text to maxMessageRunes (0: DefaultTrimMessageRunes).
func NewTrimmer(budget int64, maxMessageRunes int) *Trimmer {
	if maxMessageRunes <= 0 {
		maxMessageRunes = DefaultTrimMessageRunes
	}
	return &Trimmer{budget: budget, maxMessage: maxMessageRunes}
}

// Add takes the next message read. Its rule signals are found on its whole
// text first, so cutting or dropping it loses none of them.
func (t *Trimmer) Add(m pipeline.ChatMessage) {
	signal := false
	if m.Text != "" && m.Kind != pipeline.KindSystem && m.SenderRole != pipeline.RoleSystem {
		n := Normalize(m.Text)
		ms := scan(n)
		signal = len(ms) > 0
		if utf8.RuneCountInString(n.Text) > t.maxMessage {
			text, from, to := cutMiddle(n.Text, t.maxMessage, ms)
			if to > from {
				for _, s := range signalsOf(m.MessageID, n, ms) {
					// Prepare will not see the cut middle again: keep its
					// signals in the summary.
					if ns, ne := s.Start, s.End; overlapsOrig(n, from, to, ns, ne) {
						t.addSignal(s)
					}
				}
				m.Text = text
				t.trim.CutMessages++
			}
		}
	}
	e := trimEntry{m: m, cost: int64(trimOverhead + len(m.Text) + len(m.ImageURL) + len(m.MessageID) + len(m.SenderID)), signal: signal, seq: t.seq}
	t.seq++
	t.kept = append(t.kept, e)
	t.used += e.cost
	if t.used > t.budget {
		t.evict()
	}
}

// overlapsOrig reports whether the original span [os, oe) overlaps the
// normalized span [from, to) of n.
func overlapsOrig(n Normalized, from, to, os, oe int) bool {
	cs, ce := n.OrigSpan(from, to)
	return os < ce && cs < oe
}

// evict drops messages until the kept ones use at most 90% of the budget
// (so that eviction is not repeated on every message): first the oldest
// without a signal, then the oldest with one.
func (t *Trimmer) evict() {
	order := make([]int, len(t.kept))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ea, eb := t.kept[a], t.kept[b]
		if ea.signal != eb.signal {
			if ea.signal {
				return 1
			}
			return -1
		}
		if c := ea.m.SentAt.Compare(eb.m.SentAt); c != 0 {
			return c
		}
		return cmp.Compare(ea.seq, eb.seq)
	})
	target := t.budget * 9 / 10
	drop := make([]bool, len(t.kept))
	for _, i := range order {
		if t.used <= target {
			break
		}
		drop[i] = true
		t.used -= t.kept[i].cost
		t.dropped(t.kept[i])
	}
	kept := t.kept[:0]
	for i, e := range t.kept {
		if !drop[i] {
			kept = append(kept, e)
		}
	}
	clear(t.kept[len(kept):])
	t.kept = kept
}

func (t *Trimmer) dropped(e trimEntry) {
	t.trim.Dropped++
	t.trim.DroppedBytes += int64(len(e.m.Text) + len(e.m.ImageURL))
	switch {
	case e.m.Kind == pipeline.KindSystem || e.m.SenderRole == pipeline.RoleSystem:
		t.trim.DroppedSystem++
	case e.m.Kind == pipeline.KindImage:
		t.trim.DroppedImages++
	default:
		t.trim.DroppedText++
	}
	if e.signal {
		for _, s := range FindSignals(e.m.MessageID, e.m.Text) {
			t.addSignal(s)
		}
	}
}

func (t *Trimmer) addSignal(s Signal) {
	if t.trim.SignalCounts == nil {
		t.trim.SignalCounts = map[string]int{}
	}
	t.trim.SignalCounts[string(s.Kind)]++
	if len(t.trim.Signals) < pipeline.MaxTrimSignals {
		t.trim.Signals = append(t.trim.Signals, pipeline.TrimSignal{Kind: string(s.Kind), MessageID: s.MessageID, Value: s.Value})
	}
}

// MarkUnread records that reading stopped at a bound with more of the
// history unread.
func (t *Trimmer) MarkUnread() { t.trim.Unread = true }

// Trim returns the summary of what was left out so far.
func (t *Trimmer) Trim() pipeline.HistoryTrim { return t.trim }

// Messages returns the kept messages in the order they were read, with a
// trim notice (pipeline.HistoryTrim.Notice) at the end when anything was
// left out.
func (t *Trimmer) Messages() []pipeline.ChatMessage {
	out := make([]pipeline.ChatMessage, 0, len(t.kept)+1)
	var last pipeline.ChatMessage
	for _, e := range t.kept {
		out = append(out, e.m)
		if e.m.SentAt.After(last.SentAt) {
			last = e.m
		}
	}
	if t.trim.Any() {
		out = append(out, t.trim.Notice(last.SentAt))
	}
	return out
}
