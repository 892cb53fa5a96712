package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsathena "github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

func TestShadowEvalUsageErrorsAreListedTogether(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"eval", "shadow", "--from", "2026-11-05", "--to", "2026-11-01", "--max-recall-loss", "x",
		"--power", "1", "--athena-workgroup", ""}, func(string) string { return "" }, &out, &errOut)
	require.Equal(t, 2, code)
	for _, want := range []string{"--to 2026-11-01 is before --from", "--max-recall-loss", "--power", "athena workgroup is required"} {
		require.Contains(t, errOut.String(), want)
	}
	errOut.Reset()
	code = run(t.Context(), []string{"eval", "shadow", "--shadow-events", "x.jsonl", "--from", "2026-11-01"}, func(string) string { return "" }, &out, &errOut)
	require.Equal(t, 2, code)
	require.Contains(t, errOut.String(), "--from and --to are for the lake")
}

// shadowLakeEvents are shadow reviews by two candidates, one of them
// shadowed again later (the same event id, another answer), with done
// verdicts and moderator decisions on every fifth live review.
func shadowLakeEvents(t *testing.T) []pipeline.LakeEvent {
	t.Helper()
	start := time.Date(2026, 11, 2, 6, 0, 0, 0, time.UTC)
	evs := s3laketest.ShadowEvents(120, 7, start, 12)
	rerun := evs[0]
	p := rerun.Payload.(pipeline.ShadowVerdict)
	p.Outcome, p.ErrorKind, p.Label, p.Category = pipeline.ShadowOK, "", pipeline.LabelClean, pipeline.CategoryClean
	if p.LiveLabel == pipeline.LabelClean {
		p.Label, p.Category = pipeline.LabelAbusive, pipeline.CategorySpam
	}
	rerun.Payload, rerun.OccurredAt = p, rerun.OccurredAt.Add(3*time.Hour)
	evs = append(evs, rerun)
	for i, ev := range evs[:120] {
		if i%5 != 0 {
			continue
		}
		sv := ev.Payload.(pipeline.ShadowVerdict)
		k := pipeline.ReviewKey{RoomID: sv.RoomID, WindowStart: sv.WindowStart, WindowEnd: sv.WindowEnd, PipelineVersion: sv.PipelineVersion}
		at := sv.WindowEnd.Add(30 * time.Minute)
		decided, cat := pipeline.LabelAbusive, pipeline.CategoryPhishingLink
		if i%10 == 0 {
			decided, cat = pipeline.LabelClean, pipeline.CategoryClean
		}
		evs = append(evs,
			pipeline.LakeEvent{EventID: pipeline.VerdictEventID(k, pipeline.StatusDone), EventType: pipeline.EventVerdict, OccurredAt: at, SchemaVersion: 1,
				Payload: pipeline.VerdictEvent{RoomID: k.RoomID, WindowStart: k.WindowStart, WindowEnd: k.WindowEnd, PipelineVersion: k.PipelineVersion,
					Status: pipeline.StatusDone, Label: sv.LiveLabel, Category: sv.LiveCategory}},
			pipeline.LakeEvent{EventID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), EventType: pipeline.EventModeratorFeedback, OccurredAt: at.Add(time.Hour),
				SchemaVersion: 1, Payload: pipeline.ModeratorFeedback{RoomID: k.RoomID, WindowStart: k.WindowStart, WindowEnd: k.WindowEnd,
					PipelineVersion: k.PipelineVersion, ModeratorID: "mod-1", VerdictLabel: sv.LiveLabel, VerdictCategory: sv.LiveCategory,
					DecidedLabel: decided, DecidedCategory: cat}})
	}
	return evs
}

// TestShadowEvalReadsTheLakeAndAnExportAlike writes shadow, verdict and
// moderator events into a lake folder as the consumer writes them
// (Parquet, one object per partition), and compares the report `worker
// eval shadow` makes through the Athena stand-in with the one it makes
// from the same events exported as JSON lines: the same comparison.
func TestShadowEvalReadsTheLakeAndAnExportAlike(t *testing.T) {
	t.Parallel()
	evs := shadowLakeEvents(t)
	lakeDir, dir := t.TempDir(), t.TempDir()
	received := time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	parts := map[string][]pipeline.LakeRecord{}
	var export bytes.Buffer
	for _, ev := range evs {
		body := s3laketest.Body(t, ev)
		export.Write(append(body, '\n'))
		d, err := pipeline.DecodeLakeEvent(body, received)
		require.NoError(t, err)
		p := s3lake.PartitionPath(d.EventType, pipeline.LakeHour(d.OccurredAt))
		parts[p] = append(parts[p], d)
	}
	for p, recs := range parts {
		var buf bytes.Buffer
		require.NoError(t, s3lake.EncodeParquet(&buf, recs[0].EventType, recs))
		full := filepath.Join(lakeDir, "events", filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(full, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(full, "part-a.parquet"), buf.Bytes(), 0o644))
	}
	exportPath := filepath.Join(dir, "shadow.jsonl")
	require.NoError(t, os.WriteFile(exportPath, export.Bytes(), 0o644))

	sim := standin.StartAthena(t, standin.AthenaOptions{LakeDir: lakeDir})
	api := awsathena.New(awsathena.Options{Region: "us-east-1", BaseEndpoint: aws.String(sim.URL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	report := func(name string, args ...string) string {
		out := filepath.Join(dir, name)
		var stdout, stderr bytes.Buffer
		code := runShadowEval(t.Context(), append(args, "--out", out, "--max-recall-loss", "5"), func(string) string { return "" }, &stdout, &stderr,
			shadowEvalDeps{Athena: api})
		require.Zero(t, code, stderr.String())
		require.Equal(t, out+"/report.md\n", stdout.String())
		b, err := os.ReadFile(filepath.Join(out, "report.md"))
		require.NoError(t, err)
		return string(b)
	}
	fromLake := report("lake", "--from", "2026-11-02", "--to", "2026-11-03")
	fromExport := report("export", "--shadow-events", exportPath)

	for _, want := range []string{
		"*agreement with the live path, not recall*",
		"121 shadow events, 1 of them older copies",
		"| managed-large | managed-large-instruct | v1.3.0-rc1 | v1.2.0 | 60 |",
		"| live | managed-large | pseudonymised text |",
		"| live | vllm-qwen3-32b | same text |",
		"- managed-large, **overall**:",
		"The compared windows a moderator decided (latest decision per window; managed-large ",
	} {
		require.Contains(t, fromLake, want)
	}
	require.NotContains(t, fromLake, "No compared window has a moderator's decision")
	// The same report but for the source line and the command.
	strip := func(s string) string {
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(l, "Source: ") && !strings.HasPrefix(l, "worker eval shadow ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	require.Equal(t, strip(fromExport), strip(fromLake))
	require.Contains(t, fromLake, "Source: the lake (Athena database `chatguard`")
	require.Contains(t, fromExport, "Source: the export `shadow.jsonl`")
}
