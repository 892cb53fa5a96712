package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsathena "github.com/aws/aws-sdk-go-v2/service/athena"
	athenatypes "github.com/aws/aws-sdk-go-v2/service/athena/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

func TestBuildSetUsageErrorsAreListedTogether(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"eval", "build-set", "--from", "2026-11-05", "--to", "2026-11-01", "--stratum-sizes", "clean=x",
		"--query-timeout", "0s", "--athena-timeout", "0s", "--athena-workgroup", ""}, func(string) string { return "" }, &out, &errOut)
	require.Equal(t, 2, code)
	for _, want := range []string{"--to 2026-11-01 is before --from", "--stratum-sizes", "--query-timeout", "chat api url is required",
		"athena timeout must be positive", "athena workgroup is required"} {
		require.Contains(t, errOut.String(), want)
	}
}

// TestBuildSetFromTheSampleLake builds a set from moderators' decisions
// on a sample lake's rooms through the Athena and chat API stand-ins, and
// checks the files the command writes.
func TestBuildSetFromTheSampleLake(t *testing.T) {
	t.Parallel()
	lakeDir, truthDir := standin.SampleLake(t, 9, 40, 1)
	rooms := standin.ReadTruth(t, truthDir)
	received := rooms[0].FirstMessageAt.Add(48 * time.Hour)
	parts := map[string][]pipeline.LakeRecord{}
	for i, r := range rooms {
		k := pipeline.ReviewKey{RoomID: r.RoomID, WindowStart: r.FirstMessageAt.UTC().Truncate(time.Second),
			WindowEnd: r.LastMessageAt.UTC().Truncate(time.Second).Add(2 * time.Second), PipelineVersion: "pv"}
		at := k.WindowEnd.Add(time.Hour).Truncate(time.Millisecond)
		evs := []pipeline.LakeEvent{
			{EventID: pipeline.VerdictEventID(k, pipeline.StatusDone), EventType: pipeline.EventVerdict, OccurredAt: at, SchemaVersion: 1,
				Payload: pipeline.VerdictEvent{RoomID: k.RoomID, WindowStart: k.WindowStart, WindowEnd: k.WindowEnd, PipelineVersion: k.PipelineVersion,
					Status: pipeline.StatusDone, Label: r.Label, Category: r.Category}},
			{EventID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(r.RoomID)).String(), EventType: pipeline.EventModeratorFeedback, OccurredAt: at, SchemaVersion: 1,
				Payload: pipeline.ModeratorFeedback{RoomID: k.RoomID, WindowStart: k.WindowStart, WindowEnd: k.WindowEnd, PipelineVersion: k.PipelineVersion,
					ModeratorID: "mod-1", VerdictLabel: r.Label, VerdictCategory: r.Category, DecidedLabel: r.Label, DecidedCategory: r.Category,
					Audit: r.Label == pipeline.LabelClean}},
		}
		switch i {
		case 0: // a later decision, undone: the first is in force again
			evs = append(evs, undoneFeedback(k, r.Label, r.Category, at.Add(time.Minute))...)
		case 1: // its only decision undone: the room has none in force
			evs = append(evs[:1], undoneFeedback(k, r.Label, r.Category, at.Add(time.Minute))...)
		}
		for _, ev := range evs {
			d, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), received)
			require.NoError(t, err)
			p := s3lake.PartitionPath(d.EventType, pipeline.LakeHour(d.OccurredAt))
			parts[p] = append(parts[p], d)
		}
	}
	for p, recs := range parts {
		var buf bytes.Buffer
		require.NoError(t, s3lake.EncodeParquet(&buf, recs[0].EventType, recs))
		dir := filepath.Join(lakeDir, "events", filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "part-a.parquet"), buf.Bytes(), 0o644))
	}
	sim := standin.StartAthena(t, standin.AthenaOptions{LakeDir: lakeDir})
	api := awsathena.New(awsathena.Options{Region: "us-east-1", BaseEndpoint: aws.String(sim.URL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})

	out := filepath.Join(t.TempDir(), "set")
	day := rooms[0].FirstMessageAt.UTC()
	args := []string{"--from", day.AddDate(0, 0, -1).Format(time.DateOnly), "--to", day.AddDate(0, 0, 2).Format(time.DateOnly),
		"--stratum-size", "2", "--stratum-sizes", "clean=5", "--out", out, "--chat-api-url", standin.StartChatAPILake(t, lakeDir)}
	var stdout, stderr bytes.Buffer
	builtAt := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	code := runBuildSet(t.Context(), args, func(string) string { return "" }, &stdout, &stderr, buildSetDeps{Athena: api, Clock: clock.NewFake(builtAt)})
	require.Zero(t, code, stderr.String())

	f, err := os.Open(filepath.Join(out, "cases.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	cases, err := eval.ReadCases(f)
	require.NoError(t, err)
	var m eval.Manifest
	b, err := os.ReadFile(filepath.Join(out, "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, builtAt, m.BuiltAt)
	require.Equal(t, len(rooms)-1, m.Decisions, "one decision per room in force: room 1's only decision was undone")
	require.Equal(t, len(cases), m.Cases)
	require.Contains(t, m.Query, "moderator_feedback_dedup")
	require.Contains(t, m.Text, "masked")
	perStratum := map[string]int{}
	for _, c := range cases {
		require.Equal(t, eval.SourceModerators, c.Source)
		require.NotEqual(t, rooms[1].RoomID, c.RoomID, "an undone decision is no label")
		if c.RoomID == rooms[0].RoomID {
			require.Equal(t, rooms[0].Label, c.Truth.Label, "the decision in force, not the undone one")
		}
		perStratum[eval.Decision{DecidedLabel: c.Truth.Label, DecidedCategory: c.Truth.Category, VerdictLabel: c.Truth.Label,
			Audit: c.Truth.Label == pipeline.LabelClean}.Stratum()]++
	}
	total := 0
	for _, s := range m.Strata {
		want := 2
		if s.Stratum == eval.StratumClean {
			want = 5
		}
		require.Equal(t, min(want, s.Available), s.Written, s.Stratum)
		require.Equal(t, s.Written, perStratum[s.Stratum], s.Stratum)
		total += s.Available
	}
	require.Equal(t, len(rooms)-1, total)
	require.Contains(t, stdout.String(), fmt.Sprintf("%d cases from %d decisions", len(cases), len(rooms)-1))
	require.False(t, strings.Contains(string(b), "\"room_id\""), "the manifest counts, it lists no rooms")
}

// undoneFeedback is a moderator's decision at at on the verdict under k
// (label and category: the pipeline's) that moves it to another label,
// and their undo a minute later, as the console sends them.
func undoneFeedback(k pipeline.ReviewKey, label pipeline.Label, cat pipeline.Category, at time.Time) []pipeline.LakeEvent {
	decided, decidedCat := pipeline.LabelClean, pipeline.CategoryClean
	if label == pipeline.LabelClean {
		decided, decidedCat = pipeline.LabelAbusive, pipeline.CategoryExternalPayment
	}
	p := pipeline.ModeratorFeedback{RoomID: k.RoomID, WindowStart: k.WindowStart, WindowEnd: k.WindowEnd, PipelineVersion: k.PipelineVersion,
		ModeratorID: "mod-2", VerdictLabel: label, VerdictCategory: cat, DecidedLabel: decided, DecidedCategory: decidedCat}
	undone := pipeline.LakeEvent{EventID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(k.RoomID+"/undone")).String(),
		EventType: pipeline.EventModeratorFeedback, OccurredAt: at, SchemaVersion: 1, Payload: p}
	p.Decision, p.ReversesEventID = pipeline.FeedbackUndo, undone.EventID
	undo := pipeline.LakeEvent{EventID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(k.RoomID+"/undo")).String(),
		EventType: pipeline.EventModeratorFeedback, OccurredAt: at.Add(time.Minute), SchemaVersion: 1, Payload: p}
	return []pipeline.LakeEvent{undone, undo}
}

// hungAthena keeps every query running and records the stops.
type hungAthena struct {
	mu      sync.Mutex
	started *awsathena.StartQueryExecutionInput
	stopped []string
}

func (h *hungAthena) StartQueryExecution(_ context.Context, in *awsathena.StartQueryExecutionInput, _ ...func(*awsathena.Options)) (*awsathena.StartQueryExecutionOutput, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = in
	return &awsathena.StartQueryExecutionOutput{QueryExecutionId: aws.String("q-hung")}, nil
}

func (h *hungAthena) GetQueryExecution(context.Context, *awsathena.GetQueryExecutionInput, ...func(*awsathena.Options)) (*awsathena.GetQueryExecutionOutput, error) {
	return &awsathena.GetQueryExecutionOutput{QueryExecution: &athenatypes.QueryExecution{
		Status: &athenatypes.QueryExecutionStatus{State: athenatypes.QueryExecutionStateRunning}}}, nil
}

func (h *hungAthena) GetQueryResults(context.Context, *awsathena.GetQueryResultsInput, ...func(*awsathena.Options)) (*awsathena.GetQueryResultsOutput, error) {
	return nil, errors.New("no results of a running query")
}

func (h *hungAthena) StopQueryExecution(_ context.Context, in *awsathena.StopQueryExecutionInput, _ ...func(*awsathena.Options)) (*awsathena.StopQueryExecutionOutput, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = append(h.stopped, aws.ToString(in.QueryExecutionId))
	return &awsathena.StopQueryExecutionOutput{}, nil
}

// TestBuildSetStopsAQueryPastTheAthenaTimeout: build-set's query goes
// through storage/athena, so the shared --athena-* flags place it and a
// query that outruns --athena-timeout is stopped, not left running.
func TestBuildSetStopsAQueryPastTheAthenaTimeout(t *testing.T) {
	t.Parallel()
	h := &hungAthena{}
	var stdout, stderr bytes.Buffer
	code := runBuildSet(t.Context(), []string{"--from", "2026-11-01", "--to", "2026-11-02", "--out", t.TempDir(),
		"--chat-api-url", "http://127.0.0.1:1", "--athena-timeout", "50ms", "--athena-poll-max", "5ms",
		"--athena-database", "lake", "--athena-workgroup", "analysts", "--athena-output-location", "s3://results/q/"},
		func(string) string { return "" }, &stdout, &stderr, buildSetDeps{Athena: h, Clock: clock.NewFake(time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC))})
	require.Equal(t, 1, code)
	require.Contains(t, stderr.String(), "athena query timed out")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, []string{"q-hung"}, h.stopped)
	require.Equal(t, "lake", aws.ToString(h.started.QueryExecutionContext.Database))
	require.Equal(t, "analysts", aws.ToString(h.started.WorkGroup))
	require.Equal(t, "s3://results/q/", aws.ToString(h.started.ResultConfiguration.OutputLocation))
	require.Equal(t, []string{"'2026-11-01'", "'2026-11-02'"}, h.started.ExecutionParameters)
}
