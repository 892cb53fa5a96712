package eval

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// ShadowRecord is one shadow_verdict event as the lake holds it: the
// candidate's answer on a live review's window, with the live verdict's
// label beside it (so pairing needs no join with the verdict table).
type ShadowRecord struct {
	EventID    string
	OccurredAt time.Time
	// ReceivedAt is when the consumer received it; zero in an export that
	// does not carry it. It breaks ties between copies of one event.
	ReceivedAt time.Time
	pipeline.ShadowVerdict
}

// Key is the live review the shadow review mirrored.
func (r ShadowRecord) Key() pipeline.ReviewKey {
	return pipeline.ReviewKey{RoomID: r.RoomID, WindowStart: r.WindowStart, WindowEnd: r.WindowEnd, PipelineVersion: r.PipelineVersion}
}

// ShadowCandidate is one candidate endpoint's shadow reviews after
// pairing: the latest copy of each event, split by what can be compared.
type ShadowCandidate struct {
	Name string
	// Models, CandidateVersions and LiveVersions are the distinct values
	// the events carry, sorted: a candidate whose model or prompts changed
	// within the range shows it here.
	Models, CandidateVersions, LiveVersions []string
	// Shadowed counts distinct shadow reviews; Answered those the
	// candidate answered, Errors those it failed (compared as a candidate
	// that flagged nothing, as the offline report counts a failed review),
	// Canceled those a drain cut short and NoLive those without the live
	// verdict's label (neither is compared).
	Shadowed, Answered, Errors, Canceled, NoLive int
	// TextDiffers counts compared reviews where the candidate saw other
	// text than the live path (pseudonymised).
	TextDiffers int
	// Pairs are the compared reviews (answered or failed, with a live
	// label), sorted by review key.
	Pairs []ShadowRecord
	// LatencyMs are the answered reviews' latencies; CostUSD their sum.
	LatencyMs []float64
	CostUSD   float64
}

// ShadowSet is every candidate's paired shadow reviews.
type ShadowSet struct {
	// Events counts the records read; Superseded the older copies of an
	// event id dropped for a later one (a rerun of the same live review by
	// the same candidate writes the same id: the latest answer stands).
	Events, Superseded int
	First, Last        time.Time // occurred_at range of the kept events
	Candidates         []ShadowCandidate
}

// PairShadow keeps the latest copy of each event id (latest occurred_at,
// then latest received_at, then the later record as given) and groups the
// rest by candidate, each pair a live verdict and the candidate's answer
// on the same window.
func PairShadow(records []ShadowRecord) ShadowSet {
	set := ShadowSet{Events: len(records)}
	latest := map[string]ShadowRecord{}
	for _, r := range records {
		old, seen := latest[r.EventID]
		if seen {
			set.Superseded++
			if r.OccurredAt.Before(old.OccurredAt) || (r.OccurredAt.Equal(old.OccurredAt) && r.ReceivedAt.Before(old.ReceivedAt)) {
				continue
			}
		}
		latest[r.EventID] = r
	}
	byName := map[string]*ShadowCandidate{}
	for _, r := range latest {
		if set.First.IsZero() || r.OccurredAt.Before(set.First) {
			set.First = r.OccurredAt
		}
		set.Last = maxTime(set.Last, r.OccurredAt)
		c := byName[r.Candidate]
		if c == nil {
			c = &ShadowCandidate{Name: r.Candidate}
			byName[r.Candidate] = c
		}
		c.add(r)
	}
	for _, c := range byName {
		slices.SortFunc(c.Pairs, func(a, b ShadowRecord) int { return compareKeys(a.Key(), b.Key()) })
		slices.Sort(c.LatencyMs)
		set.Candidates = append(set.Candidates, *c)
	}
	slices.SortFunc(set.Candidates, func(a, b ShadowCandidate) int { return cmp.Compare(a.Name, b.Name) })
	return set
}

// add counts one kept event and pairs it when it can be compared.
func (c *ShadowCandidate) add(r ShadowRecord) {
	c.Shadowed++
	c.Models = addDistinct(c.Models, r.CandidateModel)
	c.CandidateVersions = addDistinct(c.CandidateVersions, r.CandidatePipelineVersion)
	c.LiveVersions = addDistinct(c.LiveVersions, r.PipelineVersion)
	switch {
	case r.Outcome == pipeline.ShadowCanceled:
		c.Canceled++
		return
	case r.LiveLabel == "":
		c.NoLive++
		return
	case r.Outcome == pipeline.ShadowOK:
		c.Answered++
		c.LatencyMs = append(c.LatencyMs, r.LatencyMs)
		c.CostUSD += r.CostUSD
	default:
		c.Errors++
	}
	if r.TextDiffers {
		c.TextDiffers++
	}
	c.Pairs = append(c.Pairs, r)
}

func addDistinct(xs []string, x string) []string {
	if x == "" || slices.Contains(xs, x) {
		return xs
	}
	xs = append(xs, x)
	slices.Sort(xs)
	return xs
}

func compareKeys(a, b pipeline.ReviewKey) int {
	return cmp.Or(cmp.Compare(a.RoomID, b.RoomID), a.WindowStart.Compare(b.WindowStart),
		a.WindowEnd.Compare(b.WindowEnd), cmp.Compare(a.PipelineVersion, b.PipelineVersion))
}

// LatestDecisions keeps each review key's latest moderator decision
// (latest DecidedAt; Decisions counts how many there were), as the
// labelled_decisions query does in the lake.
func LatestDecisions(ds []Decision) map[pipeline.ReviewKey]Decision {
	out := map[pipeline.ReviewKey]Decision{}
	count := map[pipeline.ReviewKey]int{}
	for _, d := range ds {
		count[d.Key] += max(d.Decisions, 1)
		if old, ok := out[d.Key]; !ok || !d.DecidedAt.Before(old.DecidedAt) {
			out[d.Key] = d
		}
	}
	for k, d := range out {
		d.Decisions = count[k]
		out[k] = d
	}
	return out
}

// ReadShadowExport reads lake events, one JSON envelope per line (the
// feedback queue's format, or the lake exported as JSONL, where a
// received_at field beside the envelope is used to break ties), and keeps
// the shadow_verdict events and the moderator_feedback events as
// decisions. Lines of other types, or that are not events, are skipped
// (tolerant reader, as ReadModeratorFeedback); it fails on a read error or
// on a shadow_verdict line whose payload does not decode.
func ReadShadowExport(r io.Reader) ([]ShadowRecord, []Decision, error) {
	var (
		recs []ShadowRecord
		ds   []Decision
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxCaseLine)
	for line := 1; sc.Scan(); line++ {
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var ev struct {
			EventID    string             `json:"event_id"`
			EventType  pipeline.EventType `json:"event_type"`
			OccurredAt time.Time          `json:"occurred_at"`
			ReceivedAt time.Time          `json:"received_at"`
			Payload    json.RawMessage    `json:"payload"`
		}
		if json.Unmarshal([]byte(b), &ev) != nil {
			continue
		}
		switch ev.EventType {
		case pipeline.EventShadowVerdict:
			rec := ShadowRecord{EventID: ev.EventID, OccurredAt: ev.OccurredAt.UTC(), ReceivedAt: ev.ReceivedAt.UTC()}
			if err := json.Unmarshal(ev.Payload, &rec.ShadowVerdict); err != nil || ev.EventID == "" {
				return nil, nil, fmt.Errorf("eval: shadow export line %d: not a shadow_verdict event: %v", line, errors.Join(err, nonEmpty(ev.EventID, "event_id")))
			}
			rec.WindowStart, rec.WindowEnd = rec.WindowStart.UTC(), rec.WindowEnd.UTC()
			recs = append(recs, rec)
		case pipeline.EventModeratorFeedback:
			var p pipeline.ModeratorFeedback
			if json.Unmarshal(ev.Payload, &p) != nil {
				continue
			}
			ds = append(ds, Decision{
				Key:          pipeline.ReviewKey{RoomID: p.RoomID, WindowStart: p.WindowStart.UTC(), WindowEnd: p.WindowEnd.UTC(), PipelineVersion: p.PipelineVersion},
				VerdictLabel: p.VerdictLabel, VerdictCategory: p.VerdictCategory,
				DecidedLabel: p.DecidedLabel, DecidedCategory: p.DecidedCategory, DecidedAt: ev.OccurredAt.UTC(), Decisions: 1,
			})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("eval: read shadow export: %w", err)
	}
	return recs, ds, nil
}

func nonEmpty(v, name string) error {
	if v == "" {
		return errors.New(name + " is missing")
	}
	return nil
}

// shadowColumns are lake's shadow_pairs columns, in order.
var shadowColumns = []string{"event_id", "occurred_at", "received_at", "room_id", "window_start", "window_end", "pipeline_version",
	"candidate", "candidate_model", "candidate_pipeline_version", "outcome", "error_kind", "live_label", "live_category",
	"label", "category", "text_differs", "latency_ms", "cost_usd"}

// ParseShadowRows reads the shadow_pairs query's result, header row first
// (Athena's rows, or its CSV read back). It fails on a header it does not
// expect and on a row it cannot read, naming every problem of the row.
func ParseShadowRows(rows [][]string) ([]ShadowRecord, error) {
	if len(rows) == 0 || !slices.Equal(rows[0], shadowColumns) {
		return nil, fmt.Errorf("eval: shadow rows: want the columns %v", shadowColumns)
	}
	out := make([]ShadowRecord, 0, len(rows)-1)
	for i, r := range rows[1:] {
		rec, err := parseShadowRow(r)
		if err != nil {
			return nil, fmt.Errorf("eval: shadow rows row %d: %w", i+1, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

func parseShadowRow(r []string) (ShadowRecord, error) {
	if len(r) != len(shadowColumns) {
		return ShadowRecord{}, fmt.Errorf("%d columns, want %d", len(r), len(shadowColumns))
	}
	var errs []error
	ts := func(s string) time.Time {
		t, err := time.Parse(athenaTime, s)
		errs = append(errs, err)
		return t.UTC()
	}
	num := func(s string) float64 {
		if s == "" {
			return 0 // NULL: no answer, no cost
		}
		f, err := strconv.ParseFloat(s, 64)
		errs = append(errs, err)
		return f
	}
	rec := ShadowRecord{EventID: r[0], OccurredAt: ts(r[1]), ReceivedAt: ts(r[2])}
	rec.ShadowVerdict = pipeline.ShadowVerdict{
		RoomID: r[3], WindowStart: ts(r[4]), WindowEnd: ts(r[5]), PipelineVersion: r[6],
		Candidate: r[7], CandidateModel: r[8], CandidatePipelineVersion: r[9], Outcome: r[10], ErrorKind: r[11],
		LiveLabel: pipeline.Label(r[12]), LiveCategory: pipeline.Category(r[13]),
		Label: pipeline.Label(r[14]), Category: pipeline.Category(r[15]),
		TextDiffers: r[16] == "true", LatencyMs: num(r[17]), CostUSD: num(r[18]),
	}
	if rec.EventID == "" || rec.Candidate == "" {
		errs = append(errs, errors.New("event_id or candidate is empty"))
	}
	return rec, errors.Join(errs...)
}
