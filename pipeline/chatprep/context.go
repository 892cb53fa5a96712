package chatprep

import (
	"slices"

	"github.com/chatguard/chatguard/pipeline"
)

// Context across windows. A review's messages marked Context are the
// room's messages from before its window, already reviewed with earlier
// windows. Prepare prepares the window exactly as without them, with the
// whole budget. Context messages are cleaned the same way (noise dropped,
// text normalized, a long text cut in the middle) and the newest of them
// that fit in what the window left of the budget are kept: under the
// budget, context goes first, before any window message. They feed no rule
// signal: a signal already had its review, and one found again in every
// later window would hold each of them past the early clean exit. Their
// image URLs are removed (only the window's images are vetted and sent),
// a trim notice among them is ignored (the window's trim is what the
// models are told about), and a context message that has a window
// message's id is dropped. A protective action's notice is always
// context, even inside the window, and never dropped as system noise.

// noticesAsContext returns msgs with every protective-action notice of
// the window marked Context (a copy, when there is one) and how many there
// were. A notice is chatguard's own words in the room: the models read it
// with the window, so that they know the parties were warned, but it is
// never evidence, feeds no signal and cannot be cited.
func noticesAsContext(msgs []pipeline.ChatMessage) ([]pipeline.ChatMessage, int) {
	n := 0
	for _, m := range msgs {
		if !m.Context && pipeline.IsActionNotice(m) {
			n++
		}
	}
	if n == 0 {
		return msgs, 0
	}
	out := slices.Clone(msgs)
	for i := range out {
		if pipeline.IsActionNotice(out[i]) {
			out[i].Context = true
		}
	}
	return out, n
}

// splitContext returns the window's messages and the context's; msgs
// itself when it holds no context.
func splitContext(msgs []pipeline.ChatMessage) (window, before []pipeline.ChatMessage) {
	n := 0
	for _, m := range msgs {
		if m.Context {
			n++
		}
	}
	if n == 0 {
		return msgs, nil
	}
	window = make([]pipeline.ChatMessage, 0, len(msgs)-n)
	before = make([]pipeline.ChatMessage, 0, n)
	for _, m := range msgs {
		if m.Context {
			before = append(before, m)
		} else {
			window = append(window, m)
		}
	}
	return window, before
}

// InContext reports whether id is one of the context messages the models
// saw: an id an answer may not cite.
func (w Window) InContext(id string) bool {
	_, ok := w.ctxIDs[id]
	return ok
}

// Seen reports whether the models saw a message with this id, in the
// window or in its context.
func (w Window) Seen(id string) bool { return w.HasMessage(id) || w.InContext(id) }

// addContext keeps the newest usable context messages that fit in the
// budget the window left.
func (w *Window) addContext(before, window []pipeline.ChatMessage, cfg Config) {
	if len(before) == 0 {
		return
	}
	taken := make(map[string]struct{}, len(window)+len(before))
	for _, m := range window {
		taken[m.MessageID] = struct{}{}
	}
	usable := make([]pipeline.ChatMessage, 0, len(before))
	for _, m := range before {
		if _, dup := taken[m.MessageID]; dup || m.MessageID == "" || m.MessageID == pipeline.TrimNoticeID || (isNoise(m) && !pipeline.IsActionNotice(m)) {
			continue
		}
		taken[m.MessageID] = struct{}{}
		m.ImageURL = ""
		m.Text = shortenContext(m, cfg.MaxMessageRunes)
		usable = append(usable, m)
	}
	sortChronologically(usable)
	left := cfg.MaxTokens - w.Tokens
	first := len(usable)
	for first > 0 {
		c := EstimateMessageTokens(usable[first-1])
		if c > left {
			break
		}
		left -= c
		w.ContextTokens += c
		first--
	}
	w.ContextCut = first
	w.Context = usable[first:]
	w.ctxIDs = make(map[string]struct{}, len(w.Context))
	for _, m := range w.Context {
		w.ctxIDs[m.MessageID] = struct{}{}
	}
}

// shortenContext is a context message's text as the models see it:
// normalized, and a text over the per-message bound cut in the middle as
// a window message's is (a match is never split), with no signal kept.
func shortenContext(m pipeline.ChatMessage, maxRunes int) string {
	if m.Text == "" {
		return ""
	}
	n := Normalize(m.Text)
	var ms []match
	if m.SenderRole != pipeline.RoleSystem && m.Kind != pipeline.KindSystem {
		ms = scan(n)
	}
	text, _, _ := cutMiddle(n.Text, maxRunes, ms)
	return text
}
