package eval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

// SourceModerators marks a case whose label is a moderator's decision
// (worker eval build-set), its chat text masked.
const SourceModerators = "moderators"

// The strata of a labelled set besides the abuse categories.
const (
	// StratumHardNegative holds windows the pipeline flagged and a
	// moderator decided were clean.
	StratumHardNegative = "hard_negative"
	// StratumClean holds the console's audit items: clean verdicts sampled
	// at random that a moderator looked at, kept clean (true negatives) or
	// overturned (missed positives, counted in StratumCount's
	// MissedPositives). Being a random sample of clean verdicts, it is
	// what recall is measured against.
	StratumClean = "clean"
	// StratumCleanUnaudited holds clean verdicts a moderator kept clean
	// outside the audit (opened from an account page, say): chosen by a
	// person, not by chance, so kept apart from StratumClean.
	StratumCleanUnaudited = "clean_unaudited"
)

// Decision is one row of lake's labelled_decisions query: the
// latest moderator decision on a done verdict, with that verdict's label.
type Decision struct {
	Key             pipeline.ReviewKey
	VerdictLabel    pipeline.Label
	VerdictCategory pipeline.Category
	DecidedLabel    pipeline.Label
	DecidedCategory pipeline.Category
	DecidedAt       time.Time
	// Decisions counts the decisions on the verdict; the latest stands.
	Decisions int
	// Audit is true when the latest decision was made on a console audit
	// item.
	Audit bool
}

// decisionColumns are labelled_decisions' columns, in order.
var decisionColumns = []string{"room_id", "window_start", "window_end", "pipeline_version", "verdict_label", "verdict_category",
	"decided_label", "decided_category", "decided_at", "decisions", "audit"}

// athenaTime is how Athena (and its stand-in) print a timestamp.
const athenaTime = "2006-01-02 15:04:05.000"

// ParseDecisions reads labelled_decisions' result, header row first. It
// fails on a header it does not expect, naming it, and on a row it cannot
// read, naming every problem of the row.
func ParseDecisions(rows [][]string) ([]Decision, error) {
	if len(rows) == 0 || !slices.Equal(rows[0], decisionColumns) {
		return nil, fmt.Errorf("eval: labelled decisions: want the columns %v", decisionColumns)
	}
	out := make([]Decision, 0, len(rows)-1)
	for i, r := range rows[1:] {
		d, err := parseDecision(r)
		if err != nil {
			return nil, fmt.Errorf("eval: labelled decisions row %d: %w", i+1, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func parseDecision(r []string) (Decision, error) {
	if len(r) != len(decisionColumns) {
		return Decision{}, fmt.Errorf("%d columns, want %d", len(r), len(decisionColumns))
	}
	var errs []error
	ts := func(s string) time.Time {
		t, err := time.Parse(athenaTime, s)
		errs = append(errs, err)
		return t.UTC()
	}
	d := Decision{
		Key:          pipeline.ReviewKey{RoomID: r[0], WindowStart: ts(r[1]), WindowEnd: ts(r[2]), PipelineVersion: r[3]},
		VerdictLabel: pipeline.Label(r[4]), VerdictCategory: pipeline.Category(r[5]),
		DecidedLabel: pipeline.Label(r[6]), DecidedCategory: pipeline.Category(r[7]), DecidedAt: ts(r[8]),
	}
	n, err := strconv.Atoi(r[9])
	d.Decisions = n
	errs = append(errs, err)
	switch r[10] {
	case "true":
		d.Audit = true
	case "false", "":
	default:
		errs = append(errs, fmt.Errorf("audit %q is not true or false", r[10]))
	}
	if !slices.Contains([]pipeline.Label{pipeline.LabelAbusive, pipeline.LabelSuspicious, pipeline.LabelClean}, d.DecidedLabel) {
		errs = append(errs, fmt.Errorf("decided_label %q is unknown", d.DecidedLabel))
	}
	if d.Key.RoomID == "" {
		errs = append(errs, errors.New("room_id is empty"))
	}
	return d, errors.Join(errs...)
}

// Stratum names the stratum of a decision: StratumClean for an audit item
// (a sampled clean verdict, whatever the moderator decided), the decided
// category of a window the moderator flagged, StratumHardNegative for a
// flagged verdict decided clean, StratumCleanUnaudited for a clean verdict
// kept clean outside the audit.
func (d Decision) Stratum() string {
	if d.Audit && d.VerdictLabel == pipeline.LabelClean {
		return StratumClean
	}
	if d.DecidedLabel != pipeline.LabelClean {
		if d.DecidedCategory == "" || d.DecidedCategory == pipeline.CategoryClean {
			return "uncategorised"
		}
		return string(d.DecidedCategory)
	}
	if d.VerdictLabel != "" && d.VerdictLabel != pipeline.LabelClean {
		return StratumHardNegative
	}
	return StratumCleanUnaudited
}

// SetConfig sizes a labelled set: Size cases per stratum, or Sizes[stratum]
// where named; Seed chooses which, the same seed the same cases.
type SetConfig struct {
	Size  int
	Sizes map[string]int
	Seed  uint64
}

// StratumCount is what a stratum held and what the set took of it.
type StratumCount struct {
	Stratum   string `json:"stratum"`
	Available int    `json:"available"`
	Wanted    int    `json:"wanted"`
	Written   int    `json:"written"`
	// Unavailable counts chosen windows whose chat the chat API did not
	// give (gone, or empty); each is replaced by the next of the stratum.
	Unavailable int `json:"unavailable"`
	// MissedPositives counts the written cases of StratumClean that the
	// moderator overturned: clean verdicts that were abusive or
	// suspicious after all.
	MissedPositives int `json:"missed_positives,omitempty"`
}

// MaskedTextNote is what a manifest and a report say about the text the
// cases hold.
const MaskedTextNote = "chat text was fetched through the chat API at build time and stored masked " +
	"(phone, account, card and registration numbers to their last two digits, e-mail and messenger ids and names " +
	"as the rest of the system masks them): the models were evaluated on masked text"

// BuildSet chooses, per stratum, up to its size of decisions in an order
// fixed by the seed, fetches each chosen window's chat from chat, masks it
// and returns the cases, labelled with the moderators' decisions, and the
// count per stratum. A window whose chat cannot be fetched is counted and
// replaced; a failure of ctx ends the build.
func BuildSet(ctx context.Context, decisions []Decision, chat pipeline.ChatSource, cfg SetConfig) ([]Case, []StratumCount, error) {
	byStratum := map[string][]Decision{}
	for _, d := range decisions {
		byStratum[d.Stratum()] = append(byStratum[d.Stratum()], d)
	}
	var (
		cases  []Case
		counts []StratumCount
	)
	for _, name := range slices.Sorted(maps.Keys(byStratum)) {
		ds := byStratum[name]
		slices.SortFunc(ds, func(a, b Decision) int {
			return cmp.Or(cmp.Compare(draw(cfg.Seed, a.Key), draw(cfg.Seed, b.Key)), cmp.Compare(caseID(a.Key), caseID(b.Key)))
		})
		want := cfg.Size
		if n, ok := cfg.Sizes[name]; ok {
			want = n
		}
		c := StratumCount{Stratum: name, Available: len(ds), Wanted: want}
		for _, d := range ds {
			if c.Written == want {
				break
			}
			msgs, err := chat.History(ctx, d.Key.RoomID, d.Key.WindowStart, d.Key.WindowEnd)
			if ctx.Err() != nil {
				return nil, nil, fmt.Errorf("eval: build set: %w", ctx.Err())
			}
			if err != nil || len(msgs) == 0 {
				c.Unavailable++
				continue
			}
			cases = append(cases, Case{ID: caseID(d.Key), Source: SourceModerators,
				Truth: &Truth{Label: d.DecidedLabel, Category: d.DecidedCategory}, Messages: maskMessages(msgs)})
			c.Written++
			if name == StratumClean && d.DecidedLabel != pipeline.LabelClean {
				c.MissedPositives++
			}
		}
		counts = append(counts, c)
	}
	return cases, counts, nil
}

// maskMessages masks the text of a chat as the rest of the system masks
// text that leaves the process.
func maskMessages(msgs []pipeline.ChatMessage) []pipeline.ChatMessage {
	out := slices.Clone(msgs)
	for i := range out {
		out[i].Text = chatprep.Redact(out[i].Text)
	}
	return out
}

// caseID names a case by its review key, so that a rebuilt set keeps ids.
func caseID(k pipeline.ReviewKey) string {
	return strings.Join([]string{k.RoomID, k.WindowStart.UTC().Format(time.RFC3339), k.WindowEnd.UTC().Format(time.RFC3339), k.PipelineVersion}, "|")
}

// draw is a decision's place in the seed's order.
func draw(seed uint64, k pipeline.ReviewKey) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%s", seed, caseID(k))
	return h.Sum64()
}

// Manifest says how a labelled set was built, written beside its cases so
// that a report over the set can be traced to the decisions it came from.
type Manifest struct {
	BuiltAt time.Time `json:"built_at"`
	// FirstDay and LastDay bound the decisions' days, inclusive.
	FirstDay string `json:"first_day"`
	LastDay  string `json:"last_day"`
	// Query is the SQL the decisions were read with.
	Query     string         `json:"query"`
	Seed      uint64         `json:"seed"`
	Decisions int            `json:"decisions"`
	Cases     int            `json:"cases"`
	Strata    []StratumCount `json:"strata"`
	Text      string         `json:"text"`
}

// NewManifest fills a manifest from a build's parts.
func NewManifest(builtAt time.Time, firstDay, lastDay, query string, cfg SetConfig, decisions int, cases []Case, strata []StratumCount) Manifest {
	return Manifest{BuiltAt: builtAt.UTC(), FirstDay: firstDay, LastDay: lastDay, Query: query, Seed: cfg.Seed,
		Decisions: decisions, Cases: len(cases), Strata: strata, Text: MaskedTextNote}
}
