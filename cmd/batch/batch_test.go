package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsathena "github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/athena/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/batchruns"
)

// fakeAthena serves n rooms once the query has been polled twice, or fails
// it with reason when reason is set.
type fakeAthena struct {
	mu      sync.Mutex
	n       int
	reason  string
	hang    bool
	polls   int
	stopped int
}

func (f *fakeAthena) StartQueryExecution(context.Context, *awsathena.StartQueryExecutionInput, ...func(*awsathena.Options)) (*awsathena.StartQueryExecutionOutput, error) {
	return &awsathena.StartQueryExecutionOutput{QueryExecutionId: aws.String("q-1")}, nil
}

func (f *fakeAthena) GetQueryExecution(context.Context, *awsathena.GetQueryExecutionInput, ...func(*awsathena.Options)) (*awsathena.GetQueryExecutionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	st := &types.QueryExecutionStatus{State: types.QueryExecutionStateRunning}
	switch {
	case f.hang || f.polls < 2:
	case f.reason != "":
		st.State, st.StateChangeReason = types.QueryExecutionStateFailed, aws.String(f.reason)
	default:
		st.State = types.QueryExecutionStateSucceeded
	}
	return &awsathena.GetQueryExecutionOutput{QueryExecution: &types.QueryExecution{Status: st}}, nil
}

func (f *fakeAthena) GetQueryResults(_ context.Context, in *awsathena.GetQueryResultsInput, _ ...func(*awsathena.Options)) (*awsathena.GetQueryResultsOutput, error) {
	cols := []types.ColumnInfo{}
	names := []string{"room_id", "first_message_at", "last_message_at", "message_count", "has_images"}
	for _, n := range names {
		cols = append(cols, types.ColumnInfo{Name: aws.String(n)})
	}
	mk := func(vals ...string) types.Row {
		var r types.Row
		for _, v := range vals {
			r.Data = append(r.Data, types.Datum{VarCharValue: aws.String(v)})
		}
		return r
	}
	offset := 0
	var rows []types.Row
	if in.NextToken == nil {
		rows = append(rows, mk(names...))
	} else {
		offset, _ = strconv.Atoi(*in.NextToken)
	}
	i := offset
	for ; i < f.n && len(rows) < int(*in.MaxResults); i++ {
		rows = append(rows, mk(fmt.Sprintf("room-%05d", i), "2026-11-01 00:00:01.000", "2026-11-01 00:10:00.000", "3", "false"))
	}
	out := &awsathena.GetQueryResultsOutput{ResultSet: &types.ResultSet{Rows: rows, ResultSetMetadata: &types.ResultSetMetadata{ColumnInfo: cols}}}
	if i < f.n {
		out.NextToken = aws.String(strconv.Itoa(i))
	}
	return out, nil
}

func (f *fakeAthena) StopQueryExecution(context.Context, *awsathena.StopQueryExecutionInput, ...func(*awsathena.Options)) (*awsathena.StopQueryExecutionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped++
	return &awsathena.StopQueryExecutionOutput{}, nil
}

type fakeSQS struct {
	mu     sync.Mutex
	bodies []string
}

func (q *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		q.bodies = append(q.bodies, *e.MessageBody)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

type fakeRuns struct {
	mu   sync.Mutex
	runs []batchruns.Run
}

func (s *fakeRuns) Begin(_ context.Context, runID string, start, end time.Time) (batchruns.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	attempt := 1
	for _, r := range s.runs {
		if r.RunID == runID {
			attempt = max(attempt, r.Attempt+1)
		}
	}
	r := batchruns.Run{ID: int64(len(s.runs) + 1), RunID: runID, Attempt: attempt, WindowStart: start, WindowEnd: end, Status: batchruns.StatusRunning}
	s.runs = append(s.runs, r)
	return r, nil
}

func (s *fakeRuns) Finish(ctx context.Context, r batchruns.Run) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[r.ID-1] = r
	return nil
}

type fixture struct {
	athena *fakeAthena
	sqs    *fakeSQS
	runs   *fakeRuns
	stdout bytes.Buffer
	stderr syncBuffer
}

// syncBuffer is a bytes.Buffer safe to read while the run writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	winStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	winEnd   = winStart.Add(time.Hour)
)

func setup(t *testing.T, rooms int, mutate func(*Config)) (*fixture, *Main) {
	t.Helper()
	f := &fixture{athena: &fakeAthena{n: rooms}, sqs: &fakeSQS{}, runs: &fakeRuns{}}
	cfg := DefaultConfig()
	cfg.WindowStart, cfg.WindowEnd = winStart, winEnd
	cfg.Publish.URL, cfg.MySQL.DSN = "http://q.local/review", "unused@tcp(unused:3306)/unused"
	cfg.Athena.PollMax = 5 * time.Millisecond
	cfg.ProgressInterval = 10 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	cfg = cfg.WithDefaultWindow(time.Now())
	require.NoError(t, cfg.Validate())
	return f, &Main{Config: cfg, Stdout: &f.stdout, Stderr: &f.stderr, Athena: f.athena, SQS: f.sqs, Runs: f.runs}
}

func summary(t *testing.T, f *fixture) Summary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(f.stdout.String()), "\n")
	require.Len(t, lines, 1, "exactly one line on stdout")
	var s Summary
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &s))
	return s
}

func TestRunPublishesEveryRoom(t *testing.T) {
	t.Parallel()
	f, m := setup(t, 2345, nil)
	require.NoError(t, m.Run(context.Background()))
	require.Len(t, f.sqs.bodies, 2345)
	seen := map[string]bool{}
	for _, b := range f.sqs.bodies {
		ev, err := pipeline.DecodeReviewEvent([]byte(b))
		require.NoError(t, err)
		require.Equal(t, "batch-20261101T000000Z-20261101T010000Z", ev.RunID)
		require.True(t, ev.WindowStart.Equal(winStart))
		require.True(t, ev.WindowEnd.Equal(winEnd))
		seen[ev.RoomID] = true
	}
	require.Len(t, seen, 2345)
	s := summary(t, f)
	require.Equal(t, "succeeded", s.Status)
	require.Equal(t, int64(2345), s.Rows)
	require.Equal(t, int64(2345), s.Published)
	require.Equal(t, "q-1", s.QueryExecutionID)
	require.Equal(t, 1, s.Attempt)
	require.Len(t, f.runs.runs, 1)
	require.Equal(t, batchruns.StatusSucceeded, f.runs.runs[0].Status)
	require.Equal(t, int64(2345), f.runs.runs[0].Published)
	require.Equal(t, "q-1", f.runs.runs[0].QueryExecutionID)

	// A rerun of the window keeps the run id and adds an attempt.
	f.stdout.Reset()
	require.NoError(t, m.Run(context.Background()))
	require.Equal(t, 2, summary(t, f).Attempt)
	require.Equal(t, f.runs.runs[0].RunID, f.runs.runs[1].RunID)
}

func TestRunModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		mutate        func(*Config)
		athena        func(*fakeAthena)
		wantErr       string
		wantRows      int64
		wantPublished int
		wantRecords   int
		wantStops     int
	}{
		{name: "dry run publishes and records nothing", mutate: func(c *Config) { c.DryRun = true }, wantRows: 500},
		{name: "max events", mutate: func(c *Config) { c.MaxEvents = 42 }, wantRows: 42, wantPublished: 42, wantRecords: 1},
		{name: "query failure", athena: func(a *fakeAthena) { a.reason = "SYNTAX_ERROR: line 1:8" }, wantErr: "SYNTAX_ERROR: line 1:8", wantRecords: 1},
		{name: "timeout stops the query", mutate: func(c *Config) { c.Athena.Timeout = 50 * time.Millisecond }, athena: func(a *fakeAthena) { a.hang = true },
			wantErr: "athena query timed out", wantRecords: 1, wantStops: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, m := setup(t, 500, tc.mutate)
			if tc.athena != nil {
				tc.athena(f.athena)
			}
			err := m.Run(context.Background())
			s := summary(t, f)
			require.Equal(t, tc.wantRows, s.Rows)
			require.Len(t, f.sqs.bodies, tc.wantPublished)
			require.Len(t, f.runs.runs, tc.wantRecords)
			require.Equal(t, tc.wantStops, f.athena.stopped)
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, "succeeded", s.Status)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			require.Equal(t, "failed", s.Status)
			require.Contains(t, s.Error, tc.wantErr)
			require.Equal(t, batchruns.StatusFailed, f.runs.runs[0].Status)
			require.Contains(t, f.runs.runs[0].Error, tc.wantErr)
		})
	}
}

func TestCancelStopsQueryAndRecordsFailure(t *testing.T) {
	t.Parallel()
	f, m := setup(t, 10, nil)
	f.athena.hang = true
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	require.Eventually(t, func() bool { f.athena.mu.Lock(); defer f.athena.mu.Unlock(); return f.athena.polls > 2 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(f.stderr.String(), "rows read 0") }, 5*time.Second, time.Millisecond,
		"progress is printed while the query runs")
	cancel(fmt.Errorf("received terminated"))
	err := <-done
	require.ErrorContains(t, err, "received terminated")
	require.Equal(t, 1, f.athena.stopped)
	require.Equal(t, batchruns.StatusFailed, f.runs.runs[0].Status)
	require.Contains(t, f.runs.runs[0].Error, "received terminated")
}

func TestUnreachableDatabaseFailsWithASummary(t *testing.T) {
	t.Parallel()
	f, m := setup(t, 10, func(c *Config) { c.MySQL.DSN = "root@tcp(127.0.0.1:1)/chatguard?timeout=2s" })
	m.Runs = nil // built from the DSN, as in production
	err := m.Run(context.Background())
	require.ErrorContains(t, err, "batchruns: open")
	s := summary(t, f)
	require.Equal(t, "failed", s.Status)
	require.Contains(t, s.Error, "batchruns: open")
	require.Equal(t, "batch-20261101T000000Z-20261101T010000Z", s.RunID)
	require.Empty(t, f.sqs.bodies, "nothing is published without a run record")
	f.athena.mu.Lock()
	defer f.athena.mu.Unlock()
	require.Zero(t, f.athena.polls, "no query runs without a run record")
}
