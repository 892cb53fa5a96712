package llmsim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

// ErrorModel makes a simulated endpoint worse than its rules, on purpose
// and reproducibly, so that an evaluation can be shown to tell a worse
// endpoint from a better one. Every rate is a probability in [0, 1]. The
// draws are keyed by Seed and the chat's transcript, so the same chat
// gets the same mistake on every stage and every run, except for a share
// Nondeterminism of unstable chats: on those, a mistake whose rate is not
// zero is made or not by an even coin on each request (a model's
// run-to-run noise, which repetitions measure). The zero value makes no
// mistake.
type ErrorModel struct {
	Seed int64 `json:"seed"`
	// Miss is, per category, the chance a chat the rules flag with it is
	// judged clean (every strong signal weakened); "*" applies to the
	// categories not named.
	Miss map[pipeline.Category]float64 `json:"miss,omitempty"`
	// FalseAlarm is, per category, the chance a chat without any signal
	// is flagged with it (a made-up strong signal on its first message).
	FalseAlarm map[pipeline.Category]float64 `json:"false_alarm,omitempty"`
	// HardNegative is the chance a chat with weak signals only (a hard
	// negative: it looks like abuse and is not) is flagged anyway.
	HardNegative float64 `json:"hard_negative,omitempty"`
	// Nondeterminism is the share of unstable chats, whose mistakes are
	// a coin toss on every request, so that repetitions disagree.
	Nondeterminism float64 `json:"nondeterminism,omitempty"`
}

func (e ErrorModel) validate() error {
	bad := func(what string, r float64) error {
		if r < 0 || r > 1 {
			return fmt.Errorf("errors: %s %v is outside [0, 1]", what, r)
		}
		return nil
	}
	if err := bad("hard_negative", e.HardNegative); err != nil {
		return err
	}
	if err := bad("nondeterminism", e.Nondeterminism); err != nil {
		return err
	}
	sum := 0.0
	for c, r := range e.Miss {
		if err := bad("miss "+string(c), r); err != nil {
			return err
		}
	}
	for c, r := range e.FalseAlarm {
		if err := bad("false_alarm "+string(c), r); err != nil {
			return err
		}
		sum += r
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("errors: false_alarm rates add up to %v, more than 1", sum)
	}
	return nil
}

func (e ErrorModel) on() bool {
	return len(e.Miss) > 0 || len(e.FalseAlarm) > 0 || e.HardNegative > 0
}

func (e ErrorModel) clone() ErrorModel {
	e.Miss, e.FalseAlarm = cloneRates(e.Miss), cloneRates(e.FalseAlarm)
	return e
}

func cloneRates(m map[pipeline.Category]float64) map[pipeline.Category]float64 {
	if m == nil {
		return nil
	}
	out := make(map[pipeline.Category]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// makes says whether the mistake salt, made at rate, is made on this
// request: by the chat's seeded draw, or by an even coin for an unstable
// chat.
func (e ErrorModel) makes(block, salt string, rate float64, unstable bool, coin func() float64) bool {
	switch {
	case rate <= 0:
		return false
	case unstable:
		return coin() < 0.5
	}
	return e.draw(block, salt) < rate
}

// draw is the seeded uniform number of one decision (salt) about one
// chat.
func (e ErrorModel) draw(block, salt string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%s", e.Seed, salt, block)
	return float64(h.Sum64()>>11) / (1 << 53)
}

// apply returns a with the model's mistakes for the chat whose transcript
// block is block, an unstable chat's coin tossed by the process's random
// source. a is not changed.
func (e ErrorModel) apply(a Analysis, block string) Analysis {
	return e.applyWith(a, block, rand.Float64)
}

func (e ErrorModel) applyWith(a Analysis, block string, coin func() float64) Analysis {
	if !e.on() || block == "" {
		return a
	}
	unstable := e.draw(block, "nondeterminism") < e.Nondeterminism
	out := a
	out.Signals = slices.Clone(a.Signals)
	verdict := judgeAnswer(a)
	switch {
	case verdict.Label != pipeline.LabelClean:
		rate, ok := e.Miss[verdict.Category]
		if !ok {
			rate = e.Miss["*"]
		}
		if e.makes(block, "miss", rate, unstable, coin) {
			for i := range out.Signals {
				out.Signals[i].Severity = min(out.Signals[i].Severity, 1)
			}
		}
	case len(a.Signals) > 0:
		if e.makes(block, "hard", e.HardNegative, unstable, coin) {
			out.Signals[0].Severity = 2
		}
	default:
		return e.falseAlarm(out, block)
	}
	return out
}

// falseAlarm flags a chat without signals with a category drawn from the
// false-alarm rates (in category order), citing its first message. False
// alarms are always the seeded draw's: the noise is in the flagged chats.
func (e ErrorModel) falseAlarm(a Analysis, block string) Analysis {
	u, acc := e.draw(block, "false_alarm"), 0.0
	for _, c := range pipeline.AbuseCategories {
		acc += e.FalseAlarm[c]
		if u >= acc {
			continue
		}
		lines, err := stages.ParseTranscript(block)
		if err != nil {
			return a
		}
		for _, l := range lines {
			text := stages.UnmarkData(l.Text)
			if l.ID == "" || len(l.ID) > maxIDLen || text == "" || l.Role == string(pipeline.RoleSystem) {
				continue
			}
			a.Signals = append(a.Signals, Signal{Category: c, Severity: 2, MessageID: l.ID, Rule: "error model", Quote: quote(text)})
			return a
		}
		return a
	}
	return a
}

// Prepared is a chat's transcript block with the rules' analysis of it:
// what an error model is applied to, so that a power study can apply
// many seeds' error models to one chat without a server and without
// analysing it again.
type Prepared struct {
	block string
	a     Analysis
}

// Prepare analyses a transcript block (stages.FormatMarkedTranscript of
// the chat, as the stages send it) by the rules, as the server does for a
// chat without images or account history.
func Prepare(block string) Prepared { return Prepared{block: block, a: analyzePrompt(block, nil)} }

// Signalless reports whether the rules find no signal at all in the chat:
// the chats a false alarm can land on.
func (p Prepared) Signalless() bool { return len(p.a.Signals) == 0 }

// Judge is the judge stage's label and category for the prepared chat
// with e's mistakes, an unstable chat's coin tossed by coin (a seeded
// source makes the study reproducible). Over HTTP each stage of a review
// tosses its own coin; here one toss decides, so with Nondeterminism
// above 0 the two differ on unstable chats, and only there.
func (e ErrorModel) Judge(p Prepared, coin func() float64) (pipeline.Label, pipeline.Category) {
	out := judgeAnswer(e.applyWith(p.a, p.block, coin))
	return out.Label, out.Category
}
