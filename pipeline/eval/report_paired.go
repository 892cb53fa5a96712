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
	clustering := "room"
	if len(s.Paired) > 0 {
		clustering = s.Paired[0].Clustering
	}
	fmt.Fprintf(b, "Each candidate against **%s**, the same cases on both, every repetition counted alike in estimate and interval. "+
		"Each line is decided from **one interval**, clustered by **%s**: *loss detected* when the interval of the loss "+
		"(reference minus candidate) lies above zero; *no loss beyond the margin* when it lies below the margin; "+
		"*inconclusive* otherwise, with the smallest loss this set could detect at power %.2f. "+
		"The p-value is the test the interval inverts (they cannot disagree). "+
		"The **overall** recall decision is primary, at α %.2f (margin %s points; per category where `--max-recall-loss` names one); "+
		"the per-category lines are secondary, under Holm's procedure at familywise α %.2f (each interval stated at its Holm step's level). "+
		"The flag-rate line decides the moderators' load: the share of labelled cases the candidate flags, minus the reference's, "+
		"against `--max-flag-rate-increase` (%s points), so a candidate that buys recall with false flags is seen. "+
		"How to read them, and what each cannot conclude: docs/evaluation.md, *Reading the decision lines*. "+
		"Latency, goodput and cost are in the tables below.\n\n",
		ref, clustering, power(res.Config), Alpha, pts(res.Config.MaxRecallLoss.Default), Alpha, pts(res.Config.MaxFlagRateIncrease))
	for _, p := range s.Paired {
		name := p.Category
		if name == "overall" {
			name = "**overall** recall"
		}
		fmt.Fprintf(b, "- %s, %s: %s\n", p.Candidate, name, p.Decision)
		if p.FlagRate != nil {
			fmt.Fprintf(b, "- %s, **flag rate** (%s %% of labelled cases against %s %%): %s\n", p.Candidate, pts(p.CandFlagRate), pts(p.RefFlagRate), *p.FlagRate)
		}
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
	fmt.Fprintf(b, "\n## Paired comparison with %s\n\nPoints (%%), 95 %% intervals clustered by %s: Wilson for each endpoint's recall and precision "+
		"(every repetition at the lowest concurrency) with the sample shrunk by the clusters' design effect, the paired bootstrap "+
		"resampling whole clusters for the deltas (candidate minus reference; descriptive: the decision lines above are made from their own interval). "+
		"Only ref / only cand: positive case repetitions found by one of the two. "+
		"MDE: the smallest recall loss this set detects at power %.2f at its decision's level; needed: positives a loss of the margin needs "+
		"(Connor's normal approximation for paired proportions, times the design effect).\n\n", res.Config.Reference, s.Paired[0].Clustering, power(res.Config))
	writePairedTable(b, s.Paired)
	writePlan(b, res, s)
}

// writePairedTable is the paired comparison's table, one row per
// candidate and category.
func writePairedTable(b *strings.Builder, ps []Paired) {
	b.WriteString("| candidate | category | positives | ref recall | cand recall | ref precision | cand precision | Δ recall | Δ precision | Δ F1 | only ref | only cand | p | MDE | needed |\n")
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

// writePlan sizes the next set from this run as a pilot: its discordance,
// design effect and positives per cluster, for each candidate's overall
// comparison.
func writePlan(b *strings.Builder, res Result, s Summary) {
	fmt.Fprintf(b, "\n### Set size for the next run\n\nThis run as a pilot: the positives (and clusters) a set needs to detect a recall loss of "+
		"the margin, and to show *no loss beyond the margin* when there is none, at 80 %% and 90 %% power, clustered as above "+
		"(Connor's paired sample size at the observed discordance ψ, times the design effect). "+
		"`worker eval plan` computes the same from figures given on the command line.\n\n")
	b.WriteString("| candidate | ψ | design effect | positives per cluster | margin | power | detect a loss of the margin | show no loss beyond it |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |\n")
	for _, p := range s.Paired {
		if p.Category != "overall" {
			continue
		}
		in := PlanFrom(p, res.Config)
		for _, r := range stats.Plan(in, 0.8, 0.9) {
			fmt.Fprintf(b, "| %s | %.3f | %.2f | %.2f | %s | %.0f %% | %d positives in %d clusters | %d positives in %d clusters |\n",
				p.Candidate, in.Psi, in.Deff, in.PerCluster, pts(in.Margin), 100*r.Power,
				r.DetectPositives, r.DetectClusters, r.NoLossPositives, r.NoLossClusters)
		}
	}
}

// PlanFrom reads a comparison's pilot figures: its discordance, design
// effect and positives per cluster, the margin as the loss to detect.
// With repetitions the design effect is per positive, not per
// repetition: R repetitions of a positive that agree with one another add
// nothing, and the design effect they show (about R) is divided back out.
func PlanFrom(p Paired, _ Config) stats.PlanInput {
	per, deff := 1.0, max(p.Decision.Deff, 1)
	if p.Decision.Clusters > 0 && p.Positives > 0 {
		per = float64(p.Positives) / float64(p.Decision.Clusters)
		// Never below 1: a set is sized as if repetitions add nothing.
		deff = max(1, deff*float64(p.Positives)/float64(p.Decision.Pairs))
	}
	return stats.PlanInput{Psi: p.psi, Deff: deff, PerCluster: per, Loss: p.margin, Margin: p.margin, Alpha: Alpha}
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
