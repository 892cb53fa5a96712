package athena

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/athena/types"
	"github.com/stretchr/testify/require"
)

// fakeAthena runs no SQL: it reports a scripted state sequence and serves
// n generated rows in pages.
type fakeAthena struct {
	mu      sync.Mutex
	states  []types.QueryExecutionState // one per GetQueryExecution, the last repeats
	reason  string
	rows    int
	polls   int
	stopped []string
	started *athena.StartQueryExecutionInput
	pages   int
}

func (f *fakeAthena) StartQueryExecution(_ context.Context, in *athena.StartQueryExecutionInput, _ ...func(*athena.Options)) (*athena.StartQueryExecutionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = in
	return &athena.StartQueryExecutionOutput{QueryExecutionId: aws.String("q-1")}, nil
}

func (f *fakeAthena) GetQueryExecution(_ context.Context, in *athena.GetQueryExecutionInput, _ ...func(*athena.Options)) (*athena.GetQueryExecutionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.states[min(f.polls, len(f.states)-1)]
	f.polls++
	status := &types.QueryExecutionStatus{State: st}
	if st == types.QueryExecutionStateFailed {
		status.StateChangeReason = aws.String(f.reason)
		status.AthenaError = &types.AthenaError{ErrorMessage: aws.String(f.reason)}
	}
	return &athena.GetQueryExecutionOutput{QueryExecution: &types.QueryExecution{QueryExecutionId: in.QueryExecutionId, Status: status}}, nil
}

var testColumns = []types.ColumnInfo{
	{Name: aws.String("room_id"), Type: aws.String("varchar")},
	{Name: aws.String("first_message_at"), Type: aws.String("timestamp")},
	{Name: aws.String("last_message_at"), Type: aws.String("timestamp")},
	{Name: aws.String("message_count"), Type: aws.String("bigint")},
	{Name: aws.String("has_images"), Type: aws.String("boolean")},
}

func row(vals ...string) types.Row {
	r := types.Row{}
	for _, v := range vals {
		r.Data = append(r.Data, types.Datum{VarCharValue: aws.String(v)})
	}
	return r
}

func (f *fakeAthena) GetQueryResults(_ context.Context, in *athena.GetQueryResultsInput, _ ...func(*athena.Options)) (*athena.GetQueryResultsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pages++
	offset := 0
	if in.NextToken != nil {
		offset, _ = strconv.Atoi(*in.NextToken)
	}
	var rows []types.Row
	if offset == 0 {
		rows = append(rows, row("room_id", "first_message_at", "last_message_at", "message_count", "has_images"))
	}
	i := offset
	for ; i < f.rows && len(rows) < int(aws.ToInt32(in.MaxResults)); i++ {
		rows = append(rows, row(fmt.Sprintf("room-%05d", i), "2026-11-01 00:00:01.000", "2026-11-01 00:59:00.500", strconv.Itoa(i+1), strconv.FormatBool(i%2 == 0)))
	}
	out := &athena.GetQueryResultsOutput{ResultSet: &types.ResultSet{Rows: rows, ResultSetMetadata: &types.ResultSetMetadata{ColumnInfo: testColumns}}}
	if i < f.rows {
		out.NextToken = aws.String(strconv.Itoa(i))
	}
	return out, nil
}

func (f *fakeAthena) StopQueryExecution(ctx context.Context, in *athena.StopQueryExecutionInput, _ ...func(*athena.Options)) (*athena.StopQueryExecutionOutput, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, aws.ToString(in.QueryExecutionId))
	return &athena.StopQueryExecutionOutput{}, nil
}

func setup(t *testing.T, f *fakeAthena, mutate func(*Config)) *Source {
	t.Helper()
	cfg := DefaultConfig()
	cfg.OutputLocation = "s3://results/athena/"
	cfg.PollMin, cfg.PollMax = time.Millisecond, 4*time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(f, cfg)
	require.NoError(t, err)
	return s
}

var (
	winStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	winEnd   = winStart.Add(time.Hour)
)

func collect(t *testing.T, s *Source, ctx context.Context) ([]Room, Result, string, error) {
	t.Helper()
	out := make(chan Room, 8)
	var got []Room
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r := range out {
			got = append(got, r)
		}
	}()
	var started string
	res, err := s.Rooms(ctx, winStart, winEnd, func(id string) { started = id }, out)
	close(out)
	<-done
	return got, res, started, err
}

func TestRoomsPagesAndSkipsHeader(t *testing.T) {
	t.Parallel()
	f := &fakeAthena{states: []types.QueryExecutionState{"QUEUED", "RUNNING", "RUNNING", "SUCCEEDED"}, rows: 2500}
	s := setup(t, f, nil)
	got, res, started, err := collect(t, s, context.Background())
	require.NoError(t, err)
	require.Equal(t, "q-1", started)
	require.Equal(t, Result{QueryExecutionID: "q-1", Rows: 2500}, res)
	require.Len(t, got, 2500)
	require.Equal(t, 3, f.pages)
	require.Equal(t, Room{RoomID: "room-00000", FirstMessageAt: winStart.Add(time.Second), LastMessageAt: winStart.Add(59*time.Minute + 500*time.Millisecond), MessageCount: 1, HasImages: true}, got[0])
	require.Equal(t, "room-02499", got[2499].RoomID)
	require.Empty(t, f.stopped)
	require.Equal(t, "chatguard", aws.ToString(f.started.QueryExecutionContext.Database))
	require.Equal(t, "primary", aws.ToString(f.started.WorkGroup))
	require.Equal(t, "s3://results/athena/", aws.ToString(f.started.ResultConfiguration.OutputLocation))
	require.Equal(t, roomsQuery, aws.ToString(f.started.QueryString))
	require.Len(t, f.started.ExecutionParameters, 8)
}

func TestRoomsQueryEnds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		states    []types.QueryExecutionState
		timeout   time.Duration
		cancelIn  time.Duration
		wantIs    error
		wantQuery *QueryError
		wantStop  bool
	}{
		{name: "failed carries the reason", states: []types.QueryExecutionState{"RUNNING", "FAILED"},
			wantQuery: &QueryError{QueryExecutionID: "q-1", State: "FAILED", Reason: "COLUMN_NOT_FOUND: line 3:5"}},
		{name: "timeout stops the query", states: []types.QueryExecutionState{"RUNNING"}, timeout: 30 * time.Millisecond,
			wantIs: ErrQueryTimeout, wantStop: true},
		{name: "cancel stops the query", states: []types.QueryExecutionState{"QUEUED"}, cancelIn: 30 * time.Millisecond,
			wantIs: context.Canceled, wantStop: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeAthena{states: tc.states, reason: "COLUMN_NOT_FOUND: line 3:5", rows: 10}
			s := setup(t, f, func(c *Config) {
				if tc.timeout > 0 {
					c.Timeout = tc.timeout
				}
			})
			ctx := context.Background()
			if tc.cancelIn > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeoutCause(ctx, tc.cancelIn, context.Canceled)
				defer cancel()
			}
			got, res, _, err := collect(t, s, ctx)
			require.Error(t, err)
			require.Empty(t, got)
			require.Equal(t, "q-1", res.QueryExecutionID)
			if tc.wantQuery != nil {
				var qe *QueryError
				require.ErrorAs(t, err, &qe)
				require.Equal(t, tc.wantQuery, qe)
				require.ErrorContains(t, err, "COLUMN_NOT_FOUND")
			}
			if tc.wantIs != nil {
				require.ErrorIs(t, err, tc.wantIs)
			}
			if tc.wantStop {
				require.Equal(t, []string{"q-1"}, f.stopped)
			} else {
				require.Empty(t, f.stopped)
			}
		})
	}
}

func TestPollsBackOffWithFullJitter(t *testing.T) {
	t.Parallel()
	f := &fakeAthena{states: []types.QueryExecutionState{"QUEUED", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "SUCCEEDED"}, rows: 1}
	s := setup(t, f, func(c *Config) { c.PollMin, c.PollMax = time.Second, 4*time.Second })
	var (
		mu    sync.Mutex
		waits []time.Duration
	)
	s.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return context.Cause(ctx)
	}
	got, _, _, err := collect(t, s, context.Background())
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 7, f.polls)
	require.Len(t, waits, 6, "no wait before the first look, one before each later poll")
	for i, ceil := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second} {
		require.GreaterOrEqual(t, waits[i], time.Duration(0))
		require.LessOrEqual(t, waits[i], ceil, "wait %d", i+1)
	}
}

func TestRoomsParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		start, end time.Time
		want       []string
	}{
		{
			name: "one hour", start: winStart, end: winEnd,
			want: []string{"'2026-11-01'", "'2026-11-01'", "'2026-11-01'", "'00'", "'2026-11-01'", "'00'",
				"TIMESTAMP '2026-11-01 00:00:00.000'", "TIMESTAMP '2026-11-01 01:00:00.000'"},
		},
		{
			name: "across midnight, in another zone", start: time.Date(2026, 11, 1, 8, 30, 0, 0, time.FixedZone("KST", 9*3600)), end: time.Date(2026, 11, 1, 10, 0, 0, 0, time.FixedZone("KST", 9*3600)),
			want: []string{"'2026-10-31'", "'2026-11-01'", "'2026-10-31'", "'23'", "'2026-11-01'", "'00'",
				"TIMESTAMP '2026-10-31 23:30:00.000'", "TIMESTAMP '2026-11-01 01:00:00.000'"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, params := RoomsQuery(tc.start, tc.end)
			require.Equal(t, tc.want, params)
			require.Contains(t, q, "FROM chat_messages")
		})
	}
}

func TestParseTimestamp(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 11, 1, 0, 59, 0, 500_000_000, time.UTC)
	for _, s := range []string{"2026-11-01 00:59:00.500", "2026-11-01 00:59:00.5+00", "2026-11-01 09:59:00.5+09:00", "2026-11-01T00:59:00.5Z", "2026-11-01 00:59:00.500 UTC"} {
		got, err := ParseTimestamp(s)
		require.NoError(t, err, s)
		require.True(t, want.Equal(got), "%s -> %s", s, got)
		require.Equal(t, time.UTC, got.Location())
	}
	_, err := ParseTimestamp("yesterday")
	require.Error(t, err)
}

func FuzzParseTimestamp(f *testing.F) {
	f.Add("2026-11-01 00:59:00.500")
	f.Add("2026-11-01 00:59:00+00")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTimestamp(s)
		if err == nil && got.Location() != time.UTC {
			t.Fatalf("%q parsed to a non-UTC time", s)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	err := Config{OutputLocation: "results/"}.Validate()
	for _, w := range []string{"database", "workgroup", "s3://", "timeout", "poll", "page size", "stop timeout"} {
		require.ErrorContains(t, err, w)
	}
	require.NoError(t, DefaultConfig().Validate())
	_, err = New(&fakeAthena{}, Config{})
	require.ErrorContains(t, err, "athena: ")
}

func TestParseSeconds(t *testing.T) {
	t.Parallel()
	got, err := parseSeconds("[5, 600, 3599]")
	require.NoError(t, err)
	require.Equal(t, []int32{5, 600, 3599}, got)
	got, err = parseSeconds("[0]")
	require.NoError(t, err)
	require.Equal(t, []int32{0}, got)
	for _, bad := range []string{"", "5, 6", "[]", "[5, 5]", "[6, 5]", "[-1]", "[3600]", "[x]", "[1.5]"} {
		_, err := parseSeconds(bad)
		require.Error(t, err, bad)
	}
}

// TestSweepQueryRefusesWindowsItCannotHold checks the sweep's query is only
// run over windows of at most an hour starting on a whole second, and that
// it is the sweep's statement with the window start first.
func TestSweepQueryRefusesWindowsItCannotHold(t *testing.T) {
	t.Parallel()
	f := &fakeAthena{states: []types.QueryExecutionState{"SUCCEEDED"}}
	s := setup(t, f, nil).WithActiveSeconds()
	out := make(chan Room, 1)
	_, err := s.Rooms(context.Background(), winStart, winStart.Add(2*time.Hour), nil, out)
	require.ErrorContains(t, err, "at most 1h0m0s")
	_, err = s.Rooms(context.Background(), winStart.Add(time.Millisecond), winStart.Add(time.Hour), nil, out)
	require.ErrorContains(t, err, "whole second")
	require.Nil(t, f.started, "nothing was started")
	_, err = s.Rooms(context.Background(), winStart, winStart.Add(time.Hour), nil, out)
	require.NoError(t, err)
	require.Equal(t, sweepRoomsQuery, aws.ToString(f.started.QueryString))
	require.Len(t, f.started.ExecutionParameters, 9)
	require.Equal(t, timestamp(winStart), f.started.ExecutionParameters[0])
}
