package eval

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval/stats"
)

// LiveReference is the reference's name in the shadow comparison: the
// live path, whose committed verdicts the candidates shadowed.
const LiveReference = "live"

// ShadowConfig is the shadow comparison's settings, the same as the
// offline report's paired comparison.
type ShadowConfig struct {
	// MaxRecallLoss is the margin: of the live path's flags the candidate
	// may drop (agreement), and of recall against moderators.
	MaxRecallLoss Margins
	// Seed seeds the bootstrap; Power is the power of the minimum
	// detectable effect (0: DefaultPower).
	Seed  uint64
	Power float64
}

func (c ShadowConfig) config() Config {
	return Config{Reference: LiveReference, MaxRecallLoss: c.MaxRecallLoss, Seed: c.Seed, Power: c.Power}
}

// ShadowFlips is one candidate's label flips against the live path on the
// reviews it answered, over all of them or only those where it saw the
// same text as the live path, or other (pseudonymised) text.
type ShadowFlips struct {
	Text string
	Flips
}

// The Text values of ShadowFlips.
const (
	TextAll      = "all"
	TextSame     = "same text"
	TextDiffered = "pseudonymised text"
)

// ShadowSummary is what the shadow report prints.
type ShadowSummary struct {
	// Agreement is each candidate against the live verdicts taken as the
	// reference's answers, overall and per category the live path
	// flagged: "recall" is the share of the live path's flags the
	// candidate kept, "precision" the share of its flags the live path
	// made too. It is agreement, not accuracy.
	Agreement []Paired
	// ByText is each candidate's overall agreement over the reviews where
	// it saw the same text as the live path, then other text; a
	// disagreement may come from the pseudonymisation.
	ByText []ShadowTextAgreement
	Flips  []ShadowFlips
	// Moderated is the offline paired comparison on the compared reviews
	// a moderator decided: the live path (reference) and each candidate
	// against the latest decision. Decided counts those reviews per
	// candidate.
	Moderated []Paired
	Decided   map[string]int
}

// ShadowTextAgreement is a candidate's overall agreement on one side of
// the text split.
type ShadowTextAgreement struct {
	Text string
	Paired
}

// SummariseShadow compares every candidate with the live path, and where
// decisions exist, both with the moderators.
func SummariseShadow(set ShadowSet, decisions map[pipeline.ReviewKey]Decision, sc ShadowConfig) ShadowSummary {
	cfg := sc.config()
	s := ShadowSummary{Decided: map[string]int{}}
	for _, c := range set.Candidates {
		var agree []Paired
		for _, cat := range liveCategories(c.Pairs) {
			agree = append(agree, liveAgreement(c.Name, c.Pairs, cat, cfg))
		}
		s.Agreement = append(s.Agreement, decideShadow(agree, cfg)...)
		same, differed := splitByText(c.Pairs)
		for _, part := range []struct {
			text  string
			pairs []ShadowRecord
		}{{TextAll, c.Pairs}, {TextSame, same}, {TextDiffered, differed}} {
			if part.text != TextAll && len(part.pairs) > 0 {
				s.ByText = append(s.ByText, ShadowTextAgreement{Text: part.text, Paired: decideShadow([]Paired{liveAgreement(c.Name, part.pairs, "overall", cfg)}, cfg)[0]})
			}
			if f := shadowFlips(c.Name, part.pairs); part.text == TextAll || f.Cases > 0 {
				s.Flips = append(s.Flips, ShadowFlips{Text: part.text, Flips: f})
			}
		}
		var decided []ShadowRecord
		for _, r := range c.Pairs {
			if _, ok := decisions[r.Key()]; ok {
				decided = append(decided, r)
			}
		}
		s.Decided[c.Name] = len(decided)
		if len(decided) == 0 {
			continue
		}
		var mod []Paired
		for _, cat := range decidedCategories(decided, decisions) {
			mod = append(mod, moderated(c.Name, decided, decisions, cat, cfg))
		}
		s.Moderated = append(s.Moderated, decideShadow(mod, cfg)...)
	}
	return s
}

func splitByText(pairs []ShadowRecord) (same, differed []ShadowRecord) {
	for _, r := range pairs {
		if r.TextDiffers {
			differed = append(differed, r)
		} else {
			same = append(same, r)
		}
	}
	return same, differed
}

// inCategory is whether a label and category flag the category ("overall":
// any flag).
func inCategory(l pipeline.Label, c pipeline.Category, category string) bool {
	return l != "" && l != pipeline.LabelClean && (category == "overall" || string(c) == category)
}

func liveCategories(pairs []ShadowRecord) []string {
	var out []string
	for _, r := range pairs {
		if inCategory(r.LiveLabel, r.LiveCategory, "overall") && r.LiveCategory != "" {
			out = addDistinct(out, string(r.LiveCategory))
		}
	}
	return append([]string{"overall"}, out...)
}

func decidedCategories(pairs []ShadowRecord, ds map[pipeline.ReviewKey]Decision) []string {
	var out []string
	for _, r := range pairs {
		if d := ds[r.Key()]; d.DecidedLabel != pipeline.LabelClean && d.DecidedCategory != "" {
			out = addDistinct(out, string(d.DecidedCategory))
		}
	}
	return append([]string{"overall"}, out...)
}

// liveAgreement compares a candidate with the live verdicts as the
// reference on one category, clustered by room (a room's windows move
// together). Only ref / only cand (B, C) are the reviews only the live
// path, or only the candidate, flagged in the category. The decision's
// estimate is the net share of the live path's flags the candidate drops
// ((B - C) over the live flags): a loss is detected only when the
// candidate flags significantly less than the live path, since without a
// moderator nobody says which of two differing flags is right; the
// interval's upper bound is no lower than Wilson's on B alone (flags the
// candidate added elsewhere do not make up for a dropped one).
func liveAgreement(name string, pairs []ShadowRecord, cat string, cfg Config) Paired {
	p := Paired{Candidate: name, Category: cat, Clustering: "room", margin: cfg.MaxRecallLoss.For(cat)}
	rooms := map[string]int{}
	var reps []caseRep
	for _, r := range pairs {
		live := inCategory(r.LiveLabel, r.LiveCategory, cat)
		cand := r.Outcome == pipeline.ShadowOK && inCategory(r.Label, r.Category, cat)
		ca := stats.Counts{TP: b2i(live)}
		cb := stats.Counts{TP: b2i(live && cand), FP: b2i(cand && !live), FN: b2i(live && !cand)}
		reps = append(reps, caseRep{cluster: roomIndex(rooms, r.RoomID), ca: ca, cb: cb})
	}
	p = fromReps(p, reps, len(rooms), cfg)
	net := make([]stats.PairedUnit, len(rooms))
	for _, r := range reps {
		d := r.ca.TP - r.cb.TP - r.cb.FP // dropped live flag +1, added flag -1
		net[r.cluster].D += float64(d)
		net[r.cluster].N += r.ca.TP
		net[r.cluster].Discordant += b2i(d != 0)
	}
	p.C = 0
	for _, r := range reps {
		p.C += r.cb.FP
	}
	p.recall = stats.ClusteredDiff(net)
	p.recallDisc = stats.Discordance{B: p.B, C: p.C, N: p.recall.N, Deff: p.recall.Deff, NoCredit: true}
	p.psi = ratio(p.B+p.C, p.recall.N)
	return p
}

func roomIndex(m map[string]int, room string) int {
	k, ok := m[room]
	if !ok {
		k = len(m)
		m[room] = k
	}
	return k
}

// moderated is the offline paired comparison on the decided reviews: the
// live verdict is the reference's review, the candidate's answer the
// candidate's (a failed one flags nothing), the latest decision the truth.
func moderated(name string, pairs []ShadowRecord, ds map[pipeline.ReviewKey]Decision, cat string, cfg Config) Paired {
	p := Paired{Candidate: name, Category: cat, Clustering: "room", margin: cfg.MaxRecallLoss.For(cat)}
	rooms := map[string]int{}
	var reps []caseRep
	for _, r := range pairs {
		d := ds[r.Key()]
		c := &Case{Truth: &Truth{Label: d.DecidedLabel, Category: d.DecidedCategory}}
		live := Review{Verdict: pipeline.Verdict{Status: pipeline.StatusDone, Label: r.LiveLabel, Category: r.LiveCategory}}
		cand := Review{Verdict: pipeline.Verdict{Status: pipeline.StatusDone, Label: r.Label, Category: r.Category}}
		ca, cb := caseCounts(c, live, true, cat), caseCounts(c, cand, r.Outcome == pipeline.ShadowOK, cat)
		reps = append(reps, caseRep{cluster: roomIndex(rooms, r.RoomID), ca: ca, cb: cb})
	}
	return fromReps(p, reps, len(rooms), cfg)
}

// decideShadow decides one candidate's comparisons (ps[0] "overall",
// primary at α; the categories under Holm).
func decideShadow(ps []Paired, cfg Config) []Paired {
	if len(ps) == 0 {
		return ps
	}
	decideRecall(&ps[0], Alpha, power(cfg), 0)
	holmCategories(ps[1:], power(cfg), nil)
	return ps
}

// shadowFlips counts label flips and κ between the live path and the
// candidate on the reviews the candidate answered.
func shadowFlips(name string, pairs []ShadowRecord) Flips {
	f := Flips{A: LiveReference, B: name}
	var la, lb []string
	for _, r := range pairs {
		if r.Outcome != pipeline.ShadowOK {
			continue
		}
		f.Cases++
		f.Flipped += b2i(r.Label != r.LiveLabel)
		la, lb = append(la, string(r.LiveLabel)), append(lb, string(r.Label))
	}
	f.Kappa = stats.Kappa(la, lb)
	return f
}

// ShadowReportOptions are the shadow report's texts.
type ShadowReportOptions struct {
	Title, Note, Command string
	// Source says where the events came from (a file, or the lake's days).
	Source string
}

// WriteShadowReport writes the shadow comparison as Markdown.
func WriteShadowReport(w io.Writer, set ShadowSet, s ShadowSummary, sc ShadowConfig, opt ShadowReportOptions) error {
	var b strings.Builder
	cfg := sc.config()
	for _, section := range []func(*strings.Builder, ShadowSet, ShadowSummary, Config, ShadowReportOptions){
		writeShadowHeader, writeShadowCoverage, writeShadowDecisions, writeShadowAgreement, writeShadowFlips, writeShadowModerated,
	} {
		section(&b, set, s, cfg, opt)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("eval: write shadow report: %w", err)
	}
	return nil
}

func writeShadowHeader(b *strings.Builder, set ShadowSet, _ ShadowSummary, _ Config, opt ShadowReportOptions) {
	title := opt.Title
	if title == "" {
		title = "chatguard shadow traffic: candidates against the live path"
	}
	fmt.Fprintf(b, "# %s\n\n", title)
	if opt.Note != "" {
		b.WriteString(opt.Note + "\n\n")
	}
	b.WriteString("**The reference is the live path, not the truth.** Each shadow review is a candidate endpoint's answer on " +
		"a live review's window, compared with the verdict the live path committed. Without moderators' decisions this is " +
		"*agreement with the live path, not recall*: a candidate that catches what the live path missed counts here as " +
		"disagreeing. Where moderators decided on the same windows, the last section compares both sides with their decisions.\n\n")
	first, last := "-", "-"
	if !set.First.IsZero() {
		first, last = set.First.Format("2006-01-02T15:04:05Z"), set.Last.Format("2006-01-02T15:04:05Z")
	}
	fmt.Fprintf(b, "Source: %s. %d shadow events, %d of them older copies of an event id superseded by a later one "+
		"(the latest answer on a window stands), occurred %s to %s.\n", opt.Source, set.Events, set.Superseded, first, last)
	if opt.Command != "" {
		fmt.Fprintf(b, "\nCommand:\n\n```\n%s\n```\n", opt.Command)
	}
}

func writeShadowCoverage(b *strings.Builder, set ShadowSet, _ ShadowSummary, _ Config, _ ShadowReportOptions) {
	b.WriteString("\n## Shadow reviews\n\nCompared: answered, and failed (a failed shadow review counts as a candidate that flagged " +
		"nothing, as the offline report counts a failed review). Not compared: canceled (a drain cut it short) and those without " +
		"the live verdict's label. Other text: compared reviews where the candidate saw other text than the live path " +
		"(a third-party candidate gets the pseudonymised chat where the live primary got the original).\n\n")
	b.WriteString("| candidate | model | candidate version | live version | shadowed | answered | failed | canceled | no live label | compared | other text | latency p50 ms | latency p95 ms | USD per 1000 answers |\n")
	b.WriteString("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range set.Candidates {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %d | %d | %d | %d | %d | %d | %.0f | %.0f | %.4f |\n",
			c.Name, orNone(c.Models), orNone(c.CandidateVersions), orNone(c.LiveVersions), c.Shadowed, c.Answered, c.Errors,
			c.Canceled, c.NoLive, len(c.Pairs), c.TextDiffers, quantile(c.LatencyMs, 0.5), quantile(c.LatencyMs, 0.95),
			1000*ratioF(c.CostUSD, c.Answered))
	}
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "-"
	}
	return strings.Join(xs, ", ")
}

func ratioF(x float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return x / float64(n)
}

// quantile is the nearest-rank quantile of sorted xs (0 when empty).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}

func writeShadowDecisions(b *strings.Builder, _ ShadowSet, s ShadowSummary, cfg Config, _ ShadowReportOptions) {
	fmt.Fprintf(b, "\n## Decision: does the candidate keep the live path's flags?\n\nEach candidate against **%s**, the same windows "+
		"on both, at a margin of %s points (per category where `--max-recall-loss` names one). The loss is the net share of the "+
		"live path's flags the candidate dropped (dropped less added, over the live flags), and each line is decided from one "+
		"interval of it, clustered by room: *loss detected* when it lies above zero (the candidate flags significantly less than "+
		"the live path); *no loss beyond the margin* when it lies below the margin, its upper bound no lower than Wilson's on the "+
		"dropped flags alone (an added flag elsewhere does not make up for a dropped one); otherwise *inconclusive*, with the "+
		"smallest loss this traffic could detect at power %.2f. Overall at α %.2f (primary); categories under Holm's procedure at "+
		"familywise α %.2f. This is agreement, not recall.\n\n",
		LiveReference, pts(cfg.MaxRecallLoss.Default), power(cfg), Alpha, Alpha)
	if len(s.Agreement) == 0 {
		b.WriteString("No shadow review could be compared.\n")
	}
	writeDecisionLines(b, s.Agreement)
}

func writeDecisionLines(b *strings.Builder, ps []Paired) {
	for _, p := range ps {
		name := p.Category
		if name == "overall" {
			name = "**overall**"
		}
		fmt.Fprintf(b, "- %s, %s: %s\n", p.Candidate, name, p.Decision)
	}
}

func writeShadowAgreement(b *strings.Builder, _ ShadowSet, s ShadowSummary, cfg Config, _ ShadowReportOptions) {
	if len(s.Agreement) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Agreement with the live path\n\nPoints (%%), 95 %% intervals clustered by room: Wilson for the shares "+
		"(shrunk by the rooms' design effect), the decision's interval for the loss. Live flags: windows the live path flagged in the category. Kept: the share of them the "+
		"candidate flagged in the same category. Confirmed: the share of the candidate's flags in the category the live path "+
		"made too. Only live / only cand: windows one of the two flagged. MDE: the smallest loss this "+
		"traffic detects at power %.2f; needed: live flags a loss of the margin needs.\n\n", power(cfg))
	b.WriteString("| candidate | category | text | live flags | kept | confirmed | loss | only live | only cand | p | MDE | needed |\n")
	b.WriteString("| --- | --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	row := func(p Paired, text string) {
		fmt.Fprintf(b, "| %s | %s | %s | %d | %s %s | %s %s | %s %s | %d | %d | %.3g | %s | %d |\n",
			p.Candidate, p.Category, text, p.Positives, pts(p.Cand.Recall()), ci(p.CandRecall), pts(p.Cand.Precision()), ci(p.CandPrecision),
			pts(p.Decision.Loss), ci(p.Decision.CI), p.B, p.C, p.Decision.P, pts(p.Decision.MDE), p.NeededN)
	}
	for _, p := range s.Agreement {
		row(p, TextAll)
		if p.Category != "overall" {
			continue
		}
		for _, t := range s.ByText {
			if t.Candidate == p.Candidate {
				row(t.Paired, t.Text)
			}
		}
	}
}

func writeShadowFlips(b *strings.Builder, _ ShadowSet, s ShadowSummary, _ Config, _ ShadowReportOptions) {
	if len(s.Flips) == 0 {
		return
	}
	b.WriteString("\n## Flips\n\nAnswered windows whose label differs between the live path and the candidate; κ is Cohen's kappa " +
		"of the labels. Split by the text the candidate saw: a flip on pseudonymised text may come from the pseudonymisation, " +
		"not the model.\n\n")
	b.WriteString("| A | B | text | windows | label flips | flipped | κ |\n| --- | --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, f := range s.Flips {
		fmt.Fprintf(b, "| %s | %s | %s | %d | %d | %.1f%% | %.3f |\n", f.A, f.B, f.Text, f.Cases, f.Flipped, 100*ratio(f.Flipped, f.Cases), f.Kappa)
	}
}

func writeShadowModerated(b *strings.Builder, set ShadowSet, s ShadowSummary, cfg Config, _ ShadowReportOptions) {
	b.WriteString("\n## Against moderators' decisions\n\n")
	names := make([]string, 0, len(s.Decided))
	for _, c := range set.Candidates {
		names = append(names, fmt.Sprintf("%s %d", c.Name, s.Decided[c.Name]))
	}
	if len(s.Moderated) == 0 {
		fmt.Fprintf(b, "No compared window has a moderator's decision (%s), so nothing here is measured against the truth.\n", orNone(names))
		return
	}
	fmt.Fprintf(b, "The compared windows a moderator decided (latest decision per window; %s), the offline report's paired "+
		"comparison on them: the live path is the reference, the decision the truth, recall and precision are against it. "+
		"Moderators see mostly what the live path flagged (and the console's audit sample of clean verdicts), so the live "+
		"path's recall here is biased upward and a candidate's flag the live path missed is rarely decided.\n\n", strings.Join(names, ", "))
	writeDecisionLines(b, s.Moderated)
	fmt.Fprintf(b, "\nPoints (%%), 95 %% intervals clustered by room: Wilson for each side's recall and precision against the decisions "+
		"(shrunk by the design effect), the paired bootstrap resampling rooms for the deltas (candidate minus live). Only ref / "+
		"only cand: decided positives found by the live path only, or the candidate only. MDE: the smallest recall loss these decisions detect at power %.2f; "+
		"needed: decided positives a loss of the margin needs.\n\n", power(cfg))
	writePairedTable(b, s.Moderated)
}
