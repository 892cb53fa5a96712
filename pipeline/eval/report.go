package eval

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/chatguard/chatguard/pipeline"
)

// ReportOptions shape the written report.
type ReportOptions struct {
	// Title heads the report; Note, when set, is printed under it as is
	// (for example: "these endpoints are simulators").
	Title, Note string
	// Command is the command line that made the report, shown so that it
	// can be rerun (API keys are never part of it).
	Command string
	// Moderators, when set, adds the agreement with moderators.
	Moderators []ModeratorPrecision
	// Format is the plots' file type: "svg" (default) or "png".
	Format string
}

// WriteReport writes dir/report.md and its plots (dir/*.svg or *.png).
func WriteReport(dir string, res Result, s Summary, opt ReportOptions) error {
	if opt.Format == "" {
		opt.Format = "svg"
	}
	if opt.Format != "svg" && opt.Format != "png" {
		return fmt.Errorf("eval: plot format %q is neither svg nor png", opt.Format)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("eval: report: %w", err)
	}
	plots := map[string]func() (*plot.Plot, error){
		"ttft": func() (*plot.Plot, error) {
			return stageBars(res, s, "Time to first token per stage (p50, lowest concurrency)", "ms", ttftOf)
		},
		"wall": func() (*plot.Plot, error) {
			return stageBars(res, s, "Stage wall time (p50, lowest concurrency)", "ms", wallOf)
		},
		"goodput": func() (*plot.Plot, error) { return goodputLines(res, s) },
	}
	for name, mk := range plots {
		p, err := mk()
		if err != nil {
			return fmt.Errorf("eval: plot %s: %w", name, err)
		}
		if err := p.Save(16*vg.Centimeter, 9*vg.Centimeter, filepath.Join(dir, name+"."+opt.Format)); err != nil {
			return fmt.Errorf("eval: plot %s: %w", name, err)
		}
	}
	f, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		return fmt.Errorf("eval: report: %w", err)
	}
	if err := writeMarkdown(f, res, s, opt); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("eval: report: %w", err)
	}
	return nil
}

func ttftOf(s StageStats) time.Duration { return s.TTFTp50 }
func wallOf(s StageStats) time.Duration { return s.Wallp50 }

func lowest(res Result) int {
	low := res.Config.Concurrency[0]
	for _, c := range res.Config.Concurrency {
		low = min(low, c)
	}
	return low
}

func stageBars(res Result, s Summary, title, unit string, of func(StageStats) time.Duration) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	low := lowest(res)
	w := vg.Points(12)
	n := len(res.Endpoints)
	for i, ep := range res.Endpoints {
		vals := make(plotter.Values, len(pipeline.Stages))
		for j, st := range pipeline.Stages {
			for _, ss := range s.Stages {
				if ss.Endpoint == ep.Name && ss.Concurrency == low && ss.Stage == st {
					vals[j] = float64(of(ss)) / float64(time.Millisecond)
				}
			}
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(bars)
		p.Legend.Add(ep.Name, bars)
	}
	p.Legend.Top = true
	names := make([]string, len(pipeline.Stages))
	for i, st := range pipeline.Stages {
		names[i] = string(st)
	}
	p.NominalX(names...)
	return p, nil
}

func goodputLines(res Result, s Summary) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Goodput: reviews/s with every stage's TTFT <= %s", res.Config.TTFTSLO)
	p.X.Label.Text = "reviews in flight"
	p.Y.Label.Text = "reviews/s"
	var args []any
	for _, ep := range res.Endpoints {
		var xy plotter.XYs
		for _, st := range s.Steps {
			if st.Endpoint == ep.Name {
				xy = append(xy, plotter.XY{X: float64(st.Concurrency), Y: st.Goodput})
			}
		}
		args = append(args, ep.Name, xy)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	p.Legend.Top = true
	return p, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }

// section writes one part of the report.
type section func(b *strings.Builder, res Result, s Summary, opt ReportOptions)

func writeMarkdown(w io.Writer, res Result, s Summary, opt ReportOptions) error {
	var b strings.Builder
	for _, sec := range []section{writeHeader, writeServers, writeDecisions, writeLatency, writeImages, writeGoodput, writeQuality,
		writePaired, writeFlips, writeRobustness, writeAgreement, writeCost, writeModerators} {
		sec(&b, res, s, opt)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("eval: report: %w", err)
	}
	return nil
}

func writeHeader(b *strings.Builder, res Result, _ Summary, opt ReportOptions) {
	title := opt.Title
	if title == "" {
		title = "chatguard endpoint evaluation"
	}
	fmt.Fprintf(b, "# %s\n\n", title)
	if opt.Note != "" {
		fmt.Fprintf(b, "%s\n\n", opt.Note)
	}
	samples, inj, decided := 0, 0, 0
	for _, c := range res.Cases {
		switch c.Source {
		case SourceSample:
			samples++
		case SourceInjection:
			inj++
		case SourceModerators:
			decided++
		}
	}
	fmt.Fprintf(b, "Run %s to %s (%s). %d cases (%d labelled sample rooms, %d injection cases with their attack-free bases), "+
		"concurrency sweep %v, %d repetition(s), TTFT SLO %s.\n\n",
		res.Started.Format(time.RFC3339), res.Finished.Format(time.RFC3339), res.Finished.Sub(res.Started).Round(time.Second),
		len(res.Cases), samples, inj, res.Config.Concurrency, res.Config.Repetitions, res.Config.TTFTSLO)
	if decided > 0 {
		fmt.Fprintf(b, "%d cases are labelled by moderators' decisions (`worker eval build-set`); their %s.\n\n", decided, MaskedTextNote)
	}
	if opt.Command != "" {
		fmt.Fprintf(b, "Command:\n\n```\n%s\n```\n\n", opt.Command)
	}
}

func writeLatency(b *strings.Builder, res Result, s Summary, opt ReportOptions) {
	fmt.Fprintf(b, "\n## Latency and tokens per stage (concurrency %d)\n\n", lowest(res))
	fmt.Fprintf(b, "![TTFT](ttft.%s)\n![wall time](wall.%s)\n\n", opt.Format, opt.Format)
	b.WriteString("| endpoint | stage | calls | TTFT p50 ms | TTFT p95 ms | TPOT p50 ms | TPOT p95 ms | wall p50 ms | wall p95 ms | prompt tok | cached tok | completion tok |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, st := range s.Stages {
		if st.Concurrency != lowest(res) {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %.1f | %.1f | %s | %s | %.0f | %.0f | %.0f |\n",
			st.Endpoint, st.Stage, st.Calls, ms(st.TTFTp50), ms(st.TTFTp95),
			float64(st.TPOTp50)/float64(time.Millisecond), float64(st.TPOTp95)/float64(time.Millisecond),
			ms(st.Wallp50), ms(st.Wallp95), st.PromptTokens, st.CachedTokens, st.CompletionTokens)
	}
}

func writeGoodput(b *strings.Builder, _ Result, s Summary, opt ReportOptions) {
	fmt.Fprintf(b, "\n## Throughput and goodput by concurrency\n\n![goodput](goodput.%s)\n\n", opt.Format)
	b.WriteString("| endpoint | in flight | reviews | failed | reviews/s | goodput/s | within SLO | review p50 ms | review p95 ms |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, st := range s.Steps {
		fmt.Fprintf(b, "| %s | %d | %d | %d | %.2f | %.2f | %.0f%% | %s | %s |\n", st.Endpoint, st.Concurrency, st.Reviews, st.Failed,
			st.Throughput, st.Goodput, 100*st.SLOShare, ms(st.Wallp50), ms(st.Wallp95))
	}
}

func writeQuality(b *strings.Builder, _ Result, s Summary, _ ReportOptions) {
	b.WriteString("\n## Quality against the labels\n\nA flag is a verdict that is not clean; a category counts when flagged with it. " +
		"Failed reviews count as misses. First repetition, lowest concurrency.\n\n")
	b.WriteString("| endpoint | category | support | TP | FP | FN | precision | recall | F1 |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, q := range s.Quality {
		fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %d | %.3f | %.3f | %.3f |\n", q.Endpoint, q.Category, q.Support, q.TP, q.FP, q.FN, q.Precision, q.Recall, q.F1)
	}
}

func writeRobustness(b *strings.Builder, _ Result, s Summary, _ ReportOptions) {
	b.WriteString("\n## Injection robustness\n\nEach injection case is reviewed with and without its attack message. " +
		"Changed: the label differs; cleaned: the attack turned a flag into clean (the attacker's aim); flagged: the attacked chat was not clean.\n\n")
	b.WriteString("| endpoint | pairs | verdict changed | cleaned by the attack | attacked chat flagged |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, r := range s.Robustness {
		fmt.Fprintf(b, "| %s | %d | %.1f%% | %.1f%% | %.1f%% |\n", r.Endpoint, r.Pairs, 100*r.Changed, 100*r.Cleaned, 100*r.Flagged)
	}
}

func writeAgreement(b *strings.Builder, _ Result, s Summary, _ ReportOptions) {
	if len(s.Agreement) == 0 {
		return
	}
	b.WriteString("\n## Agreement between endpoints\n\n| A | B | cases | same label | same label and category |\n| --- | --- | ---: | ---: | ---: |\n")
	for _, a := range s.Agreement {
		fmt.Fprintf(b, "| %s | %s | %d | %.1f%% | %.1f%% |\n", a.A, a.B, a.Cases, 100*a.Label, 100*a.LabelCategory)
	}
}

func writeCost(b *strings.Builder, _ Result, s Summary, _ ReportOptions) {
	b.WriteString("\n## Cost\n\nAt the prices given per endpoint (`--price NAME=...`; an endpoint without a price shows 0). Every review of the run counts.\n\n")
	b.WriteString("| endpoint | reviews | prompt tok/review | cached tok/review | completion tok/review | USD/review | USD per 1,000 reviews |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range s.Cost {
		fmt.Fprintf(b, "| %s | %d | %.0f | %.0f | %.0f | %.6f | %.4f |\n", c.Endpoint, c.Reviews, c.PromptTokens, c.CachedTokens, c.CompletionTokens, c.USD, c.PerThousand)
	}
}

func writeModerators(b *strings.Builder, _ Result, _ Summary, opt ReportOptions) {
	b.WriteString("\n## Agreement with moderators\n\n")
	if len(opt.Moderators) == 0 {
		b.WriteString("No moderator feedback was given (`--moderator-feedback FILE`, lake events as JSONL). " +
			"In Athena: `lake/queries/moderator_precision_category_week.sql`.\n")
		return
	}
	b.WriteString("Precision of flags as moderators judged them: of the flagged verdicts moderators decided on, the share they kept flagged.\n\n")
	b.WriteString("| week | category | decisions | kept flagged | precision |\n| --- | --- | ---: | ---: | ---: |\n")
	for _, m := range opt.Moderators {
		fmt.Fprintf(b, "| %s | %s | %d | %d | %.3f |\n", m.Week, m.Category, m.Decisions, m.Kept, m.Precision)
	}
}
