package eval

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// ModeratorPrecision is, for one category and ISO week, how many flagged
// verdicts (label not clean) moderators decided on and the share they kept
// flagged: the precision of flags as moderators judged them.
type ModeratorPrecision struct {
	Week      string // ISO week, "2026-W45"
	Category  string
	Decisions int
	Kept      int
	Precision float64
}

// ReadModeratorFeedback reads lake events, one JSON envelope per line (the
// feedback queue's format, or the lake exported as JSONL), and keeps the
// moderator_feedback ones. Other event types and lines that are not
// events are skipped (tolerant reader); it fails only on a read error.
func ReadModeratorFeedback(r io.Reader) ([]ModeratorPrecision, error) {
	type key struct{ week, cat string }
	agg := map[key]*ModeratorPrecision{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxCaseLine)
	for sc.Scan() {
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var ev struct {
			EventType  pipeline.EventType         `json:"event_type"`
			OccurredAt time.Time                  `json:"occurred_at"`
			Payload    pipeline.ModeratorFeedback `json:"payload"`
		}
		if json.Unmarshal([]byte(b), &ev) != nil || ev.EventType != pipeline.EventModeratorFeedback {
			continue
		}
		p := ev.Payload
		if p.VerdictLabel == "" || p.VerdictLabel == pipeline.LabelClean {
			continue // precision of flags: only flagged verdicts count
		}
		y, w := ev.OccurredAt.UTC().ISOWeek()
		k := key{fmt.Sprintf("%d-W%02d", y, w), string(p.VerdictCategory)}
		a := agg[k]
		if a == nil {
			a = &ModeratorPrecision{Week: k.week, Category: k.cat}
			agg[k] = a
		}
		a.Decisions++
		if p.DecidedLabel != pipeline.LabelClean {
			a.Kept++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: read moderator feedback: %w", err)
	}
	out := make([]ModeratorPrecision, 0, len(agg))
	for _, a := range agg {
		a.Precision = ratio(a.Kept, a.Decisions)
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b ModeratorPrecision) int {
		return cmp.Or(cmp.Compare(a.Week, b.Week), cmp.Compare(a.Category, b.Category))
	})
	return out, nil
}
