package eval

import (
	"fmt"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval/stats"
)

func writeServers(b *strings.Builder, res Result, _ Summary, _ ReportOptions) {
	b.WriteString("| endpoint | base URL | model | server version | max_model_len | operator notes |\n| --- | --- | --- | --- | ---: | --- |\n")
	for _, ep := range res.Endpoints {
		f := res.Facts[ep.Name]
		version, maxLen := f.Version, "not reported"
		if version == "" {
			version = "not reported"
		}
		for _, m := range f.Models {
			if m.ID == ep.Model && m.MaxModelLen > 0 {
				maxLen = fmt.Sprint(m.MaxModelLen)
			}
		}
		notes := ep.Notes
		if notes == "" {
			notes = "none given (`--endpoint-note`)"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", ep.Name, ep.BaseURL, ep.Model, version, maxLen, notes)
	}
	b.WriteString("\nServer version and max_model_len are what the endpoint answered at GET /version and GET /v1/models " +
		"(vLLM answers both; a managed API usually neither); operator notes are as given on the command line.\n")
}

func pts(x float64) string { return fmt.Sprintf("%.1f", 100*x) }

func ci(iv stats.Interval) string { return fmt.Sprintf("[%s, %s]", pts(iv.Lo), pts(iv.Hi)) }

func writeDecisions(b *strings.Builder, res Result, s Summary, _ ReportOptions) {
	b.WriteString("\n## Decision: not worse than the reference?\n\n")
	ref := res.Config.Reference
	if ref == "" {
		b.WriteString("No `--reference` was given, so no endpoint is compared pair by pair and no decision is made.\n")
		return
	}
	fmt.Fprintf(b, "Each candidate against **%s** on recall, the same cases on both: non-inferiority at a margin of %s points "+
		"(per category where `--max-recall-loss` names one). *No loss beyond the margin*: the loss's 95 %% interval "+
		"(bootstrap by room, %d resamples, seed %d) ends below the margin; *loss detected*: McNemar's exact test finds the loss "+
		"significant at α %.2f; otherwise *inconclusive*, with the smallest loss this set could detect at power %.2f. "+
		"Latency, goodput and cost are in the tables below.\n\n",
		ref, pts(res.Config.MaxRecallLoss.Default), Resamples, res.Config.Seed, Alpha, power(res.Config))
	for _, p := range s.Paired {
		name := p.Category
		if name == "overall" {
			name = "**overall**"
		}
		fmt.Fprintf(b, "- %s, %s: %s\n", p.Candidate, name, p.Decision)
	}
}

func power(c Config) float64 {
	if c.Power == 0 {
		return DefaultPower
	}
	return c.Power
}

func writePaired(b *strings.Builder, res Result, s Summary, _ ReportOptions) {
	if len(s.Paired) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Paired comparison with %s\n\nPoints (%%), 95 %% intervals: Wilson for each endpoint's recall and precision "+
		"(every repetition at the lowest concurrency), the paired bootstrap by room for the deltas (candidate minus reference). "+
		"Only ref / only cand: positives of the first repetition found by one of the two (McNemar's pairs). "+
		"MDE: the smallest recall loss this set detects at power %.2f; needed: positives a loss of the margin needs "+
		"(Connor's normal approximation for paired proportions).\n\n", res.Config.Reference, power(res.Config))
	writePairedTable(b, s.Paired)
}

// writePairedTable is the paired comparison's table, one row per
// candidate and category.
func writePairedTable(b *strings.Builder, ps []Paired) {
	b.WriteString("| candidate | category | positives | ref recall | cand recall | ref precision | cand precision | Δ recall | Δ precision | Δ F1 | only ref | only cand | McNemar p | MDE | needed |\n")
	b.WriteString("| --- | --- | ---: | --- | --- | --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range ps {
		fmt.Fprintf(b, "| %s | %s | %d | %s %s | %s %s | %s %s | %s %s | %s %s | %s %s | %s %s | %d | %d | %.3g | %s | %d |\n",
			p.Candidate, p.Category, p.Positives,
			pts(p.Ref.Recall()), ci(p.RefRecall), pts(p.Cand.Recall()), ci(p.CandRecall),
			pts(p.Ref.Precision()), ci(p.RefPrecision), pts(p.Cand.Precision()), ci(p.CandPrecision),
			pts(p.Cand.Recall()-p.Ref.Recall()), ci(p.Deltas.Recall), pts(p.Cand.Precision()-p.Ref.Precision()), ci(p.Deltas.Precision),
			pts(p.Cand.F1()-p.Ref.F1()), ci(p.Deltas.F1), p.B, p.C, p.Decision.P, pts(p.Decision.MDE), p.NeededN)
	}
}

func writeFlips(b *strings.Builder, res Result, s Summary, _ ReportOptions) {
	if len(s.Flips) == 0 {
		return
	}
	b.WriteString("\n## Flips\n\nCases whose label differs between two runs, every case both reviewed (labelled or not), lowest concurrency. " +
		"An endpoint against itself is its first two repetitions: the noise floor a difference between endpoints must clear " +
		"(`--repetitions 2` or more). κ is Cohen's kappa of the labels.\n\n")
	b.WriteString("| A | B | cases | label flips | flipped | κ |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, f := range s.Flips {
		bName := f.B
		if f.A == f.B {
			bName = f.B + " (repetition 2)"
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %.1f%% | %.3f |\n", f.A, bName, f.Cases, f.Flipped, 100*ratio(f.Flipped, f.Cases), f.Kappa)
	}
	if res.Config.Repetitions < 2 {
		b.WriteString("\nOne repetition: no noise floor was measured.\n")
	}
}

// writeImages compares the image stage with URLs (the sweep's first
// repetition at the lowest concurrency, image cases only) and inline.
func writeImages(b *strings.Builder, res Result, _ Summary, _ ReportOptions) {
	if res.Config.InlineImages == nil {
		return
	}
	ids := map[string]bool{}
	for _, c := range imageCases(res.Cases) {
		ids[c.ID] = true
	}
	low := lowest(res)
	b.WriteString("\n## Image stage: URLs and inline\n\nThe cases with images, reviewed with their image URLs (the model server fetches them) " +
		"and again with `--image-inline` (fetched here through the worker's gate and sent as data: URLs), first repetition, " +
		fmt.Sprintf("concurrency %d.\n\n", low))
	b.WriteString("| endpoint | images | vision calls | TTFT p50 ms | TTFT p95 ms | wall p50 ms |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, ep := range res.Endpoints {
		var url, inline []Review
		for _, r := range res.Reviews {
			if r.Endpoint == ep.Name && r.Concurrency == low && r.Rep == 0 && ids[r.Case.ID] {
				url = append(url, r)
			}
		}
		for _, r := range res.Inline {
			if r.Endpoint == ep.Name {
				inline = append(inline, r)
			}
		}
		for _, m := range []struct {
			mode string
			rs   []Review
		}{{"URLs", url}, {"inline", inline}} {
			for _, st := range stageStats(ep.Name, low, m.rs) {
				if st.Stage == pipeline.StageVision {
					fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s |\n", ep.Name, m.mode, st.Calls, ms(st.TTFTp50), ms(st.TTFTp95), ms(st.Wallp50))
				}
			}
		}
	}
}
