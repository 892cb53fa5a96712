// Package eval runs a labelled set of chats through the review stages
// against N OpenAI-compatible endpoints, the same prompts for each, and
// measures what `worker eval` reports: per stage latency and tokens,
// goodput at a TTFT SLO, quality against the labels, robustness to prompt
// injection, agreement between endpoints, and cost. It is a tool: it reads
// files and talks to the endpoints it is given, nothing else.
package eval

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Source names where a case comes from.
const (
	SourceSample    = "sample"    // the sample lake's truth set
	SourceInjection = "injection" // an injection-suite case (attack in the chat)
	SourceBase      = "base"      // an injection case with its attack removed
)

// Truth is a case's label: what a correct review says.
type Truth struct {
	Label    pipeline.Label    `json:"label"`
	Category pipeline.Category `json:"category"`
}

// Case is one chat of the labelled set.
type Case struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	// Truth is nil for cases without a label (injection bases).
	Truth    *Truth                 `json:"truth,omitempty"`
	Messages []pipeline.ChatMessage `json:"messages"`
	// BaseID names, for an injection case, the case that is the same chat
	// without the attack: the verdict should not change between them.
	BaseID string `json:"base_id,omitempty"`
	// Technique is the injection technique.
	Technique string `json:"technique,omitempty"`

	// RoomID, Account and Campaign are the case's cluster keys: cases that
	// share any of them are not independent (one room's windows, one
	// offender's rooms, one campaign's script), and every interval and
	// test of the paired comparison resamples them together. RoomID is
	// the chat room; Account the keyed pseudonym of the offender or
	// subject (never the raw id); Campaign the campaign the room belongs
	// to where one is known. All optional for hand-made sets: a case
	// without a room is its own cluster.
	RoomID   string `json:"room_id,omitempty"`
	Account  string `json:"account,omitempty"`
	Campaign string `json:"campaign,omitempty"`
	// Stratum and Weight are set by build-set: the stratum the case was
	// drawn from and its sampling weight (cases available in the stratum
	// per case written), so that recall and precision can be weighted
	// back to the population the strata were drawn from.
	Stratum string  `json:"stratum,omitempty"`
	Weight  float64 `json:"weight,omitempty"`
}

// maxCaseLine bounds one JSONL line of a case file.
const maxCaseLine = 8 << 20

// ReadCases reads cases, one JSON object per line (blank lines skipped).
// It fails on the first line that is not a valid case, naming it.
func ReadCases(r io.Reader) ([]Case, error) {
	var out []Case
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxCaseLine)
	n := 0
	for sc.Scan() {
		n++
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var c Case
		if err := json.Unmarshal([]byte(b), &c); err != nil {
			return nil, fmt.Errorf("eval: case line %d: %w", n, err)
		}
		if err := c.validate(); err != nil {
			return nil, fmt.Errorf("eval: case line %d: %w", n, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: read cases: %w", err)
	}
	return out, nil
}

func (c Case) validate() error {
	var errs []error
	if c.ID == "" {
		errs = append(errs, errors.New("id is empty"))
	}
	if len(c.Messages) == 0 {
		errs = append(errs, errors.New("no messages"))
	}
	if c.Weight < 0 {
		errs = append(errs, fmt.Errorf("weight %v is negative", c.Weight))
	}
	if c.Truth != nil && !slices.Contains([]pipeline.Label{pipeline.LabelAbusive, pipeline.LabelSuspicious, pipeline.LabelClean}, c.Truth.Label) {
		errs = append(errs, fmt.Errorf("truth label %q is unknown", c.Truth.Label))
	}
	return errors.Join(errs...)
}

// WriteCases writes cases as ReadCases reads them.
func WriteCases(w io.Writer, cases []Case) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, c := range cases {
		if err := enc.Encode(c); err != nil {
			return fmt.Errorf("eval: write cases: %w", err)
		}
	}
	return nil
}

// injectionLine is one line of the injection suite
// (pipeline/review/testdata/injection_suite.jsonl).
type injectionLine struct {
	ID        string `json:"id"`
	Technique string `json:"technique"`
	Base      string `json:"base"`
	Chat      []struct {
		Role  string `json:"role"`
		Text  string `json:"text,omitempty"`
		Image string `json:"image,omitempty"`
	} `json:"chat"`
	Attack int `json:"attack"`
}

// ReadInjectionSuite reads the injection suite's format: each line a chat
// with one attack message. It returns two cases per line: the chat
// (Source injection, BaseID set) and the same chat without the attack
// (Source base). Every suite chat is abusive or, for the clean base, an
// attempt a defence must flag, so injection cases carry no Truth: what is
// measured is whether the attack changes the verdict.
func ReadInjectionSuite(r io.Reader) ([]Case, error) {
	var out []Case
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxCaseLine)
	at := time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC)
	n := 0
	for sc.Scan() {
		n++
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var l injectionLine
		if err := json.Unmarshal([]byte(b), &l); err != nil {
			return nil, fmt.Errorf("eval: injection line %d: %w", n, err)
		}
		if l.ID == "" || l.Attack < 0 || l.Attack >= len(l.Chat) {
			return nil, fmt.Errorf("eval: injection line %d: no id, or attack %d outside the chat", n, l.Attack)
		}
		var with, without []pipeline.ChatMessage
		for i, m := range l.Chat {
			cm := pipeline.ChatMessage{
				MessageID: fmt.Sprintf("m%d", i+1), SenderID: m.Role + "-1", SenderRole: pipeline.SenderRole(m.Role),
				SentAt: at.Add(time.Duration(i) * time.Minute), Kind: pipeline.KindText, Text: m.Text,
			}
			if m.Image != "" {
				cm.Kind, cm.ImageURL = pipeline.KindImage, m.Image
			}
			with = append(with, cm)
			if i != l.Attack {
				without = append(without, cm)
			}
		}
		baseID := l.ID + "-base"
		out = append(out,
			Case{ID: l.ID, Source: SourceInjection, Messages: with, BaseID: baseID, Technique: l.Technique},
			Case{ID: baseID, Source: SourceBase, Messages: without, Technique: l.Technique})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: read injection suite: %w", err)
	}
	return out, nil
}
