// Package chatprep turns a window's raw chat history into what the model
// stages see: messages in chronological order without system noise, the rule
// signals found by pattern (phone, bank-account and card numbers, messenger
// ids, URLs), a transcript that fits a token budget, and the images for the
// vision stage. It is pure and deterministic: no I/O, no clock.
package chatprep

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/chatguard/chatguard/pipeline"
)

// Config bounds what Prepare hands to the models. The zero value is usable:
// Prepare fills zero fields with the defaults below.
type Config struct {
	// MaxTokens is the estimated token budget of the transcript.
	MaxTokens int
	// KeepFirst is how many of the earliest messages survive a cut: the
	// opening of a chat says what is being traded and how.
	KeepFirst int
	// MaxMessageRunes truncates a single huge message so that one paste
	// cannot eat the whole budget.
	MaxMessageRunes int
	// MaxImages caps the images sent to the vision stage (the most recent
	// win); the vision schema allows at most 16 findings.
	MaxImages int
}

// The defaults Prepare uses for zero Config fields.
const (
	DefaultMaxTokens       = 6000
	DefaultKeepFirst       = 6
	DefaultMaxMessageRunes = 1000
	DefaultMaxImages       = 8
)

// WithDefaults returns c with zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.KeepFirst == 0 {
		c.KeepFirst = DefaultKeepFirst
	}
	if c.MaxMessageRunes == 0 {
		c.MaxMessageRunes = DefaultMaxMessageRunes
	}
	if c.MaxImages == 0 {
		c.MaxImages = DefaultMaxImages
	}
	return c
}

// Validate reports every out-of-range field at once; zero fields are valid
// (they take defaults).
func (c Config) Validate() error {
	var errs []error
	if c.MaxTokens < 0 || (c.MaxTokens > 0 && c.MaxTokens < 200) {
		errs = append(errs, fmt.Errorf("chatprep: max tokens %d is below 200", c.MaxTokens))
	}
	if c.KeepFirst < 0 {
		errs = append(errs, fmt.Errorf("chatprep: keep first %d is negative", c.KeepFirst))
	}
	if c.MaxMessageRunes < 0 {
		errs = append(errs, fmt.Errorf("chatprep: max message runes %d is negative", c.MaxMessageRunes))
	}
	if c.MaxImages < 0 || c.MaxImages > 16 {
		errs = append(errs, fmt.Errorf("chatprep: max images %d is outside 0..16", c.MaxImages))
	}
	return errors.Join(errs...)
}

// Image is one image message for the vision stage.
type Image struct {
	MessageID string
	URL       string
}

// Cut records what the token budget removed: a contiguous run of messages
// between the kept opening and the kept most recent messages.
type Cut struct {
	// Messages is how many messages were left out (0: nothing was cut).
	Messages int
	// Tokens is their estimated token count.
	Tokens int
	// FirstID and LastID bound the removed run.
	FirstID, LastID string
}

// Window is a prepared review window.
type Window struct {
	// Messages are the messages the models see, oldest first.
	Messages []pipeline.ChatMessage
	// Signals are the rule signals found in every usable message of the
	// window, including messages the budget cut.
	Signals []Signal
	// Images are the kept image messages for the vision stage.
	Images []Image
	// ImagesDropped counts kept image messages beyond the image cap.
	ImagesDropped int
	Cut           Cut
	// NoiseDropped counts system notices, empty and duplicate messages
	// that were removed.
	NoiseDropped int
	// Truncated counts messages whose text was shortened, and CutRunes the
	// characters their cut middles held.
	Truncated int
	CutRunes  int
	// Trim is what the chat source left out of an oversized history.
	Trim pipeline.HistoryTrim
	// Tokens is the estimated token count of Messages.
	Tokens int
	// Context are the room's messages from before the window (marked
	// Context; context.go),
	// oldest first, as the models see them: read with the window, never
	// evidence. ContextCut counts context messages the token budget left
	// out (context goes before any window message does) and ContextTokens
	// is the estimated token count of Context.
	Context       []pipeline.ChatMessage
	ContextCut    int
	ContextTokens int
	// Notices counts the window's protective-action notices
	// (pipeline.IsActionNotice) that were moved to its context: what
	// chatguard said in the room is read, never judged.
	Notices int

	ids    map[string]struct{}
	ctxIDs map[string]struct{}
}

// HasMessage reports whether the models saw a message with this id in the
// window (context messages are not), the check for message ids a model's
// answer may cite.
func (w Window) HasMessage(id string) bool {
	_, ok := w.ids[id]
	return ok
}

// HasImage reports whether id is one of the images sent to vision.
func (w Window) HasImage(id string) bool {
	for _, im := range w.Images {
		if im.MessageID == id {
			return true
		}
	}
	return false
}

// Prepare builds the models' view of one window. msgs may come in any order
// and are not modified. An empty result (no usable messages) is valid.
//
// Every text is normalized (see Normalize) and its rule signals are found
// on the whole text before anything is cut. A message longer than
// MaxMessageRunes keeps its head and tail around a CutMarker; signals in
// the cut middle, and in messages the token budget leaves out, are listed
// with Cut set.
//
// Messages marked Context (from before the window) are kept apart as the
// window's context, and only in what the window leaves of the budget (see
// context.go).
func Prepare(msgs []pipeline.ChatMessage, cfg Config) Window {
	cfg = cfg.WithDefaults()
	w := Window{}
	msgs, w.Notices = noticesAsContext(msgs)
	msgs, before := splitContext(msgs)
	kept := w.dropNoise(msgs)
	sortChronologically(kept)
	// Signals of each kept message, by index, so a budget cut can mark them.
	sigs := make([][]Signal, len(kept))
	for i := range kept {
		sigs[i] = w.scanAndShorten(&kept[i], cfg.MaxMessageRunes)
	}
	var keptIdx []int
	w.Messages, w.Cut, keptIdx = budget(kept, cfg)
	w.Signals = markBudgetCut(sigs, keptIdx)
	for _, ts := range w.Trim.Signals {
		w.Signals = append(w.Signals, Signal{Kind: SignalKind(ts.Kind), MessageID: ts.MessageID, Value: ts.Value, Cut: true})
	}
	w.indexView(cfg.MaxImages)
	w.addContext(before, msgs, cfg)
	return w
}

// dropNoise returns the usable messages of msgs: it reads the trim notice
// into w.Trim and counts duplicates, messages without an id and noise
// (see isNoise) in w.NoiseDropped.
func (w *Window) dropNoise(msgs []pipeline.ChatMessage) []pipeline.ChatMessage {
	kept := make([]pipeline.ChatMessage, 0, len(msgs))
	seen := make(map[string]struct{}, len(msgs))
	for _, m := range msgs {
		if m.MessageID == pipeline.TrimNoticeID && (m.Kind == pipeline.KindSystem || m.SenderRole == pipeline.RoleSystem) {
			w.Trim = parseTrimNotice(m.Text)
			continue
		}
		if _, dup := seen[m.MessageID]; dup || m.MessageID == "" {
			w.NoiseDropped++
			continue
		}
		seen[m.MessageID] = struct{}{}
		if isNoise(m) {
			w.NoiseDropped++
			continue
		}
		kept = append(kept, m)
	}
	return kept
}

// sortChronologically orders msgs by time, then id: chat APIs page and
// retry, and the transcript must be stable across redeliveries.
func sortChronologically(msgs []pipeline.ChatMessage) {
	slices.SortStableFunc(msgs, func(a, b pipeline.ChatMessage) int {
		if c := a.SentAt.Compare(b.SentAt); c != 0 {
			return c
		}
		return cmp.Compare(a.MessageID, b.MessageID)
	})
}

// scanAndShorten normalizes m's text, finds its signals on the whole text
// (user messages only; image captions are user text too), then cuts the
// middle of a text over maxRunes, marking the signals the cut removed and
// counting the cut in w.Truncated and w.CutRunes.
func (w *Window) scanAndShorten(m *pipeline.ChatMessage, maxRunes int) []Signal {
	if m.Text == "" {
		return nil
	}
	n := Normalize(m.Text)
	var ms []match
	var sigs []Signal
	if m.SenderRole != pipeline.RoleSystem && m.Kind != pipeline.KindSystem {
		ms = scan(n)
		sigs = signalsOf(m.MessageID, n, ms)
	}
	text, cutFrom, cutTo := cutMiddle(n.Text, maxRunes, ms)
	if cutTo > cutFrom {
		w.Truncated++
		w.CutRunes += utf8.RuneCountInString(n.Text[cutFrom:cutTo])
		k := 0 // sigs[k] is the signal of the next match that is one
		for _, mt := range ms {
			if mt.maskOnly {
				continue
			}
			if mt.start < cutTo && mt.end > cutFrom {
				sigs[k].Cut = true
			}
			k++
		}
	}
	m.Text = text
	return sigs
}

// markBudgetCut flattens the per-message signals, in message order, and
// marks Cut those of messages the budget left out (not in keptIdx).
func markBudgetCut(sigs [][]Signal, keptIdx []int) []Signal {
	inView := make([]bool, len(sigs))
	for _, i := range keptIdx {
		inView[i] = true
	}
	var out []Signal
	for i, ss := range sigs {
		for _, s := range ss {
			s.Cut = s.Cut || !inView[i]
			out = append(out, s)
		}
	}
	return out
}

// indexView fills what is derived from w.Messages: the id set, the token
// estimate and the images, the most recent maxImages of them.
func (w *Window) indexView(maxImages int) {
	w.ids = make(map[string]struct{}, len(w.Messages))
	for _, m := range w.Messages {
		w.ids[m.MessageID] = struct{}{}
		w.Tokens += EstimateMessageTokens(m)
		if m.Kind == pipeline.KindImage {
			w.Images = append(w.Images, Image{MessageID: m.MessageID, URL: m.ImageURL})
		}
	}
	if len(w.Images) > maxImages {
		w.ImagesDropped = len(w.Images) - maxImages
		w.Images = w.Images[len(w.Images)-maxImages:]
	}
}

// parseTrimNotice reads a trim notice; a notice that does not parse still
// says that something was left out.
func parseTrimNotice(text string) pipeline.HistoryTrim {
	var t pipeline.HistoryTrim
	if err := json.Unmarshal([]byte(text), &t); err != nil {
		return pipeline.HistoryTrim{Unread: true}
	}
	if len(t.Signals) > pipeline.MaxTrimSignals {
		t.Signals = t.Signals[:pipeline.MaxTrimSignals]
	}
	return t
}

// CutMarker is the text that stands for the cut middle of a long message:
// the models are told that the message goes on, and by how much.
func CutMarker(runes int) string { return fmt.Sprintf("[… %d characters cut …]", runes) }

// cutMiddle shortens a text of more than max runes to its head and tail
// around a CutMarker, and returns the cut byte span of text ([0, 0) when
// nothing was cut). A cut edge never splits a match: it moves to the
// match's edge, so a number is seen whole or listed as cut.
func cutMiddle(text string, maxRunes int, ms []match) (string, int, int) {
	total := utf8.RuneCountInString(text)
	if total <= maxRunes {
		return text, 0, 0
	}
	headRunes := maxRunes / 2
	tailRunes := maxRunes - headRunes
	headEnd := runeOffset(text, headRunes)
	tailStart := runeOffset(text, total-tailRunes)
	// A match across an edge is kept whole when that costs little, and
	// cut whole otherwise (a match is never split).
	const stretch = 256
	for _, m := range ms {
		if m.start < headEnd && m.end > headEnd {
			if m.end-headEnd <= stretch {
				headEnd = m.end
			} else {
				headEnd = m.start
			}
		}
		if m.start < tailStart && m.end > tailStart {
			if tailStart-m.start <= stretch {
				tailStart = m.start
			} else {
				tailStart = m.end
			}
		}
	}
	if tailStart <= headEnd {
		return text, 0, 0
	}
	cut := utf8.RuneCountInString(text[headEnd:tailStart])
	return text[:headEnd] + " " + CutMarker(cut) + " " + text[tailStart:], headEnd, tailStart
}

// runeOffset is the byte offset of the n-th rune of s (len(s) past the end).
func runeOffset(s string, n int) int {
	i := 0
	for pos := range s {
		if i == n {
			return pos
		}
		i++
	}
	return len(s)
}

// tradeEvents are system notices that carry trade state the judge needs
// (a tracking number after an in-app payment is innocent); every other
// system notice (joins, leaves, read receipts) is noise.
var tradeEvents = []string{
	"안전결제", "결제", "발송", "배송", "구매확정", "거래완료", "취소", "환불",
	"payment", "paid", "shipped", "delivered", "purchase confirmed", "cancel", "refund",
}

func isNoise(m pipeline.ChatMessage) bool {
	switch {
	case m.Kind == pipeline.KindImage:
		return !strings.HasPrefix(m.ImageURL, "https://") && !strings.HasPrefix(m.ImageURL, "http://")
	case m.Kind == pipeline.KindSystem || m.SenderRole == pipeline.RoleSystem:
		t := strings.ToLower(m.Text)
		for _, k := range tradeEvents {
			if strings.Contains(t, k) {
				return false
			}
		}
		return true
	default:
		return strings.TrimSpace(m.Text) == ""
	}
}

// budget keeps the opening messages and as many of the most recent ones as
// fit, cutting one contiguous run in between.
func budget(msgs []pipeline.ChatMessage, cfg Config) ([]pipeline.ChatMessage, Cut, []int) {
	costs := make([]int, len(msgs))
	total := 0
	all := make([]int, len(msgs))
	for i, m := range msgs {
		costs[i] = EstimateMessageTokens(m)
		total += costs[i]
		all[i] = i
	}
	if total <= cfg.MaxTokens {
		return msgs, Cut{}, all
	}
	used := 0
	head := 0
	for head < len(msgs) && head < cfg.KeepFirst && used+costs[head] <= cfg.MaxTokens/2 {
		used += costs[head]
		head++
	}
	tail := len(msgs)
	for tail > head && used+costs[tail-1] <= cfg.MaxTokens {
		used += costs[tail-1]
		tail--
	}
	cut := Cut{Messages: tail - head, FirstID: msgs[head].MessageID, LastID: msgs[tail-1].MessageID}
	for _, c := range costs[head:tail] {
		cut.Tokens += c
	}
	out := make([]pipeline.ChatMessage, 0, head+len(msgs)-tail)
	out = append(out, msgs[:head]...)
	out = append(out, msgs[tail:]...)
	return out, cut, append(all[:head:head], all[tail:]...)
}

// messageOverhead approximates the JSON keys, id and timestamp a transcript
// line adds around the text.
const messageOverhead = 24

// EstimateMessageTokens estimates the tokens one transcript line costs,
// the data markers (MarkData) included.
func EstimateMessageTokens(m pipeline.ChatMessage) int {
	return messageOverhead + EstimateTokens(m.Text) + markCount(m.Text) + EstimateTokens(m.ImageURL)
}

// EstimateTokens is a tokenizer-free estimate that errs high: about four
// ASCII bytes per token, and for other runes one token less than their
// UTF-8 length: a Hangul syllable (three bytes) counts two, because BPE
// vocabularies split all but the commonest syllables into byte tokens.
func EstimateTokens(s string) int {
	ascii, other := 0, 0
	for _, r := range s {
		if r < utf8.RuneSelf {
			ascii++
		} else {
			other += max(utf8.RuneLen(r)-1, 1)
		}
	}
	return (ascii+3)/4 + other
}
