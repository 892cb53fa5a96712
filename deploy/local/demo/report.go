package demo

import (
	"fmt"
	"io"
	"net"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Print writes the human summary of a finished run.
func (r *Report) Print(w io.Writer) {
	s := r.Summary
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	if r.Realtime != nil {
		r.printRealtime(p)
		return
	}
	p("")
	p("chatguard demo: run %s, window %s to %s", r.RunID, r.WindowStart.Format(time.RFC3339), r.WindowEnd.Format(time.RFC3339))
	p("  batch published %d review events; queue drained and lake complete %s after the batch started (whole demo %s)",
		r.Batch.Published, r.DrainedAfter.Round(time.Second), r.Elapsed.Round(time.Second))

	p("")
	p("Verdicts: %d (done %d, expired %d, failed %d, stopped %d)", s.Verdicts,
		s.ByStatus[string(pipeline.StatusDone)], s.ByStatus[string(pipeline.StatusExpired)],
		s.ByStatus[string(pipeline.StatusFailed)], s.ByStatus[string(pipeline.StatusStopped)])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  label\tcategory\trooms\t")
	for _, c := range s.ByLabel {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t\n", c.Label, c.Category, c.N)
	}
	tw.Flush()
	p("  early exits (clean without the later stages): %d, of which %d without any model call (no user messages in the window)", s.EarlyExits, s.NoModelCall)
	p("  verdicts with a stage answered by the fallback pool: %d", s.FallbackVerdicts)

	p("")
	p("Stage calls: %d model calls; %d inference-log rows in the lake (%s; by pool: %s)",
		s.StageCalls, len(r.Lake.Logs), breakdown(s.LogsByOutcome), breakdown(s.LogsByPool))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  stage\trooms\tcalls\tfallback\tlatency p50\tp95\tTTFT p50\tp95\t")
	for _, st := range s.Stages {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", st.Stage, st.Rows, st.Attempts, st.Fallback,
			msStr(st.LatencyP50), msStr(st.LatencyP95), msStr(st.TTFTP50), msStr(st.TTFTP95))
	}
	tw.Flush()
	p("  (latency: the whole stage, retries included; TTFT: time to the first streamed token of the answering call)")
	if n := len(r.Extra); n > 0 {
		rooms := map[string]bool{}
		for _, c := range r.Extra {
			rooms[c.RoomID] = true
		}
		p("  %d inference-log rows beyond one per recorded call, in %d rooms: reviews that ran again after a failed attempt", n, len(rooms))
		p("  (the workers' logs say why: outcome \"retry\"; the verdict upsert kept one verdict per room)")
	}

	a := s.Agreement
	p("")
	p("Agreement with the sample's ground-truth labels (%d done verdicts):", a.Compared)
	p("  NOTE: on the local stack the model is the LLM simulator, which answers by fixed keyword rules.")
	p("  These figures measure those rules against the sample generator's labels. They say nothing about a model.")
	p("  label agrees:    %s", frac(a.LabelMatch, a.Compared))
	p("  category agrees: %s", frac(a.CategoryMatch, a.Compared))
	p("  flagged (abusive or suspicious) vs clean: precision %s, recall %s (TP %d, FP %d, FN %d, TN %d)",
		frac(a.TruePositive, a.TruePositive+a.FalsePositive), frac(a.TruePositive, a.TruePositive+a.FalseNegative),
		a.TruePositive, a.FalsePositive, a.FalseNegative, a.TrueNegative)
	p("  hard negatives judged clean: %s", frac(a.HardNegativesClean, a.HardNegatives))
	labels := []string{string(pipeline.LabelAbusive), string(pipeline.LabelSuspicious), string(pipeline.LabelClean)}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  truth \\ verdict\t"+strings.Join(labels, "\t")+"\t")
	for _, t := range labels {
		row := "  " + t + "\t"
		for _, v := range labels {
			row += fmt.Sprintf("%d\t", a.Confusion[t][v])
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()

	r.printCampaigns(p)

	p("")
	p("Queues at the end (deleted afterwards): %s", r.depths())
	var procs []string
	for _, c := range r.Children {
		procs = append(procs, fmt.Sprintf("%s exit %d", c.Name, c.ExitCode))
	}
	p("Processes: %s", strings.Join(procs, ", "))

	p("")
	p("Where the results are:")
	host, port, _ := net.SplitHostPort(r.MySQLAddr)
	p("  MySQL (database %s; tables verdicts and verdict_stages):", r.Database)
	p("    mysql -h %s -P %s -u root %s -e \"SELECT status, label, category, COUNT(*) FROM verdicts WHERE run_id = '%s' GROUP BY 1, 2, 3\"",
		host, port, r.Database, r.RunID)
	if r.StackStopped {
		p("    (if the stack used its embedded MySQL rather than the machine's, that database went with the stack)")
	}
	p("  Lake (rows of this run have run_id = '%s'; local files under %s):", r.RunID, r.LakeDir)
	for _, d := range r.partitions() {
		p("    s3://%s/%s", r.LakeBucket, d)
	}
	p("  Athena stand-in, while the stack runs (tables inference_log and verdict):")
	p("    SELECT stage, pool, outcome, count(*) FROM inference_log WHERE run_id = '%s' GROUP BY 1, 2, 3", r.RunID)
	p("  Process logs: %s", r.LogDir)
	switch {
	case r.StackStarted && !r.StackStopped:
		p("  The stack is still running (pid %d): `make stack-down` stops it.", r.StackPID)
	case r.StackStopped:
		p("  The stack the demo started is stopped; the lake stays on disk in %s.", filepath.Dir(filepath.Dir(filepath.Dir(r.LakeDir))))
	default:
		p("  The stack (pid %d) was running before the demo and still is.", r.StackPID)
	}
	r.printTrace(w, p)
}

// printTrace prints one review's trace as a span tree (Config.Trace).
func (r *Report) printTrace(w io.Writer, p func(string, ...any)) {
	if len(r.Trace) == 0 {
		return
	}
	p("")
	p("One review's trace (%d spans, trace id %s; durations, and tokens of the stages and model calls):", len(r.Trace), TraceOf(r.Trace))
	PrintTrace(w, r.Trace)
}

// printCampaigns names the campaigns and repeat senders the run found,
// and where the console shows them.
func (r *Report) printCampaigns(p func(string, ...any)) {
	c := r.Campaigns
	p("")
	p("Campaigns (campaign signals on; the console's campaign join run once after the drain; docs/campaigns.md):")
	if len(c.Campaigns) == 0 && len(c.Repeats) == 0 {
		p("  none found. A lake of the stack's size holds a scam ring and a shop repeating its greeting in the sample hour;")
		p("  a lake an older generator wrote is written again at the next `make stack-up`.")
		return
	}
	for _, k := range c.Campaigns {
		p("  campaign %s: %d rooms (%d reviewed before it was a campaign, linked by the join), from %d account(s): %s",
			k.ID, k.Rooms, k.Linked, len(k.Accounts), strings.Join(k.Accounts, ", "))
	}
	for _, k := range c.Repeats {
		p("  repeat sender %s: its own greeting or contact in %d rooms, one verified or established account: not a campaign", k.Account, k.Rooms)
	}
	console := "make console"
	if r.Database != DefaultDatabase {
		console += " CONSOLE_DB=" + r.Database
	}
	p("  In the console (`%s`, dev login; it runs the join every minute):", console)
	if len(c.Campaigns) > 0 {
		p("    the campaign's page, take and bulk decision: http://127.0.0.1:8088/campaigns/%s", c.Campaigns[0].ID)
	}
	if len(c.Repeats) > 0 {
		p("    a repeat sender's room, which says it is not a campaign: http://127.0.0.1:8088/verdicts/%d", c.Repeats[0].Verdict)
	}
}

// partitions are the lake folders that hold the run's rows.
func (r *Report) partitions() []string {
	var out []string
	for _, k := range r.Lake.Objects {
		d := path.Dir(k) + "/"
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

func (r *Report) depths() string {
	q := r.Queues
	var parts []string
	for _, u := range []string{q.Review, q.ReviewDLQ, q.Feedback, q.FeedbackDLQ} {
		if d, ok := r.FinalDepths[u]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", path.Base(u), d.Total()))
		}
	}
	return strings.Join(parts, ", ")
}

func breakdown(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func msStr(ms float64) string {
	if ms == 0 {
		return "-"
	}
	if ms >= 1000 {
		return fmt.Sprintf("%.2fs", ms/1000)
	}
	return fmt.Sprintf("%.0fms", ms)
}

func frac(n, d int) string {
	if d == 0 {
		return "n/a (none)"
	}
	return fmt.Sprintf("%d/%d (%.1f%%)", n, d, 100*float64(n)/float64(d))
}
