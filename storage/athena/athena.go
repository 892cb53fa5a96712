// Package athena is the one way the binaries query Athena. It is the
// batch's source: it asks Athena for the chat rooms that had messages in a
// time window and streams them, page by page, to the caller through a
// channel, so that a large result never sits in memory. Rows runs any other
// query with a small result (an evaluation set's decisions) through the
// same bounded wait, stop and paging.
package athena

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/athena/types"

	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

//go:embed rooms.sql
var roomsQuery string

//go:embed sweep_rooms.sql
var sweepRoomsQuery string

// MaxSweepWindow is the longest window of the sweep's rooms query, whose
// active seconds (at most one per second of the window) a row holds.
const MaxSweepWindow = time.Hour

// RoomsQuery returns the embedded SQL of the rooms query and the execution
// parameters it takes for the window [start, end), so tests can run the very
// same statement elsewhere (DuckDB) and compare.
func RoomsQuery(start, end time.Time) (string, []string) {
	return roomsQuery, roomsParams(start, end)
}

// API is the part of the Athena client the source uses; *athena.Client
// satisfies it.
type API interface {
	StartQueryExecution(ctx context.Context, in *athena.StartQueryExecutionInput, opts ...func(*athena.Options)) (*athena.StartQueryExecutionOutput, error)
	GetQueryExecution(ctx context.Context, in *athena.GetQueryExecutionInput, opts ...func(*athena.Options)) (*athena.GetQueryExecutionOutput, error)
	GetQueryResults(ctx context.Context, in *athena.GetQueryResultsInput, opts ...func(*athena.Options)) (*athena.GetQueryResultsOutput, error)
	StopQueryExecution(ctx context.Context, in *athena.StopQueryExecutionInput, opts ...func(*athena.Options)) (*athena.StopQueryExecutionOutput, error)
}

var _ API = (*athena.Client)(nil)

var _ pipeline.RoomSource = (*Source)(nil)

// Config says where and how the query runs.
type Config struct {
	// Database is the Glue/Athena database holding chat_messages.
	Database string
	// Workgroup is the Athena workgroup the query runs (and is billed) in.
	Workgroup string
	// OutputLocation is the s3:// prefix for query results; empty leaves it
	// to the workgroup's setting.
	OutputLocation string
	// Timeout bounds how long the query may stay queued or running; past it
	// the query is stopped and Rooms fails with ErrQueryTimeout.
	Timeout time.Duration
	// PollMin and PollMax shape the full-jitter backoff (internal/retry)
	// between GetQueryExecution calls: the n-th wait is uniform in
	// [0, min(PollMax, PollMin·2^(n−1))], which spreads the polls of
	// concurrent runs.
	PollMin, PollMax time.Duration
	// PageSize is GetQueryResults' MaxResults (Athena allows 1000 at most).
	PageSize int32
	// StopTimeout bounds the StopQueryExecution call made after a cancel.
	StopTimeout time.Duration
}

// DefaultConfig returns the defaults the batch command starts from.
func DefaultConfig() Config {
	return Config{
		Database:    "chatguard",
		Workgroup:   "primary",
		Timeout:     10 * time.Minute,
		PollMin:     200 * time.Millisecond,
		PollMax:     5 * time.Second,
		PageSize:    1000,
		StopTimeout: 10 * time.Second,
	}
}

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Database) == "" {
		errs = append(errs, errors.New("athena database is required"))
	}
	if strings.TrimSpace(c.Workgroup) == "" {
		errs = append(errs, errors.New("athena workgroup is required"))
	}
	if c.OutputLocation != "" && !strings.HasPrefix(c.OutputLocation, "s3://") {
		errs = append(errs, fmt.Errorf("athena output location %q is not an s3:// URL", c.OutputLocation))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("athena timeout must be positive"))
	}
	if c.PollMin <= 0 || c.PollMax < c.PollMin {
		errs = append(errs, fmt.Errorf("athena poll interval must satisfy 0 < min (%s) <= max (%s)", c.PollMin, c.PollMax))
	}
	if c.PageSize < 1 || c.PageSize > 1000 {
		errs = append(errs, fmt.Errorf("athena page size %d must be within 1..1000", c.PageSize))
	}
	if c.StopTimeout <= 0 {
		errs = append(errs, errors.New("athena stop timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Room is one row of the rooms query: a room with messages in the window.
type Room = pipeline.ActiveRoom

// Result describes the query run behind a Rooms call.
type Result = pipeline.RoomQuery

// ErrQueryTimeout is wrapped by the error of a query that outran
// Config.Timeout.
var ErrQueryTimeout = errors.New("athena query timed out")

// QueryError is a query that ended FAILED or CANCELLED; Reason is Athena's
// own explanation.
type QueryError struct {
	QueryExecutionID string
	State            types.QueryExecutionState
	Reason           string
	// Retryable is Athena's hint that resubmitting may succeed.
	Retryable bool
}

// Error implements error.
func (e *QueryError) Error() string {
	return fmt.Sprintf("query %s %s: %s", e.QueryExecutionID, strings.ToLower(string(e.State)), e.Reason)
}

// Source runs queries on Athena: the rooms query (Rooms) and small ones
// (Rows).
type Source struct {
	api API
	cfg Config
	// sleep waits between polls; tests replace it.
	sleep retry.SleepFunc
	// maxRows is MaxRows; tests lower it.
	maxRows int
	// sweep runs the sweep's rooms query (WithActiveSeconds).
	sweep bool
}

// WithActiveSeconds returns a Source whose Rooms runs the sweep's query:
// every room also carries the seconds of the window in which it had
// messages (pipeline.ActiveRoom.ActiveSeconds), at the cost of a larger
// result. Its Rooms refuses windows longer than MaxSweepWindow or not on
// whole seconds.
func (s *Source) WithActiveSeconds() *Source {
	c := *s
	c.sweep = true
	return &c
}

// New returns a Source, or the configuration's problems.
func New(api API, cfg Config) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("athena: %w", err)
	}
	return &Source{api: api, cfg: cfg, sleep: retry.Sleep, maxRows: MaxRows}, nil
}

// Rooms runs the rooms query for [start, end) and sends every room to out,
// in room-id order, blocking while out is full; it never closes out. onStart,
// when not nil, learns the query execution id as soon as Athena assigns it.
//
// When ctx ends or the query outruns Config.Timeout while the query is
// queued or running, Rooms calls StopQueryExecution (on a context of its
// own, so a cancelled caller still stops the query) and fails. A query that
// ends FAILED or CANCELLED fails with a *QueryError. The returned Result is
// valid on failure too.
func (s *Source) Rooms(ctx context.Context, start, end time.Time, onStart func(id string), out chan<- Room) (Result, error) {
	var res Result
	if !end.After(start) {
		return res, fmt.Errorf("athena: window end %s is not after start %s", end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	query, params := roomsQuery, roomsParams(start, end)
	if s.sweep {
		if end.Sub(start) > MaxSweepWindow || !start.Equal(start.Truncate(time.Second)) {
			return res, fmt.Errorf("athena: a sweep window must start on a whole second and last at most %s, not [%s, %s)",
				MaxSweepWindow, start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
		}
		query, params = sweepRoomsQuery, append([]string{timestamp(start)}, params...)
	}
	id, err := s.start(ctx, query, params)
	if err != nil {
		return res, err
	}
	res.QueryExecutionID = id
	if onStart != nil {
		onStart(res.QueryExecutionID)
	}
	if err := s.wait(ctx, res.QueryExecutionID); err != nil {
		return res, err
	}
	err = s.page(ctx, res.QueryExecutionID, func(r Room) error {
		select {
		case out <- r:
			res.Rows++
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	return res, err
}

// MaxRows bounds the rows Rows holds in memory; a larger result fails
// rather than growing without limit (Rooms streams instead).
const MaxRows = 1_000_000

// ErrTooManyRows is wrapped by the error of a Rows call whose result has
// more than MaxRows rows.
var ErrTooManyRows = errors.New("result has more rows than Rows holds")

// Rows runs sql with its positional parameters (each an SQL literal, as
// Athena's ExecutionParameters require) and returns the result as strings,
// the column names first, then one slice per row; NULL reads as "". It
// waits, stops and pages exactly as Rooms does (Config's timeout, polls and
// page size), but holds the whole result, so it is for small results: at
// most MaxRows rows.
func (s *Source) Rows(ctx context.Context, sql string, params []string) ([][]string, error) {
	if strings.TrimSpace(sql) == "" {
		return nil, errors.New("athena: empty query")
	}
	id, err := s.start(ctx, sql, params)
	if err != nil {
		return nil, err
	}
	if err := s.wait(ctx, id); err != nil {
		return nil, err
	}
	var out [][]string
	err = s.results(ctx, id, func(rs *types.ResultSet, rows []types.Row) error {
		if out == nil {
			if rs == nil || rs.ResultSetMetadata == nil {
				return errors.New("no result set metadata")
			}
			head := make([]string, len(rs.ResultSetMetadata.ColumnInfo))
			for i, c := range rs.ResultSetMetadata.ColumnInfo {
				head[i] = aws.ToString(c.Name)
			}
			out = append(out, head)
		}
		if len(out)-1+len(rows) > s.maxRows {
			return fmt.Errorf("%w (%d)", ErrTooManyRows, s.maxRows)
		}
		for _, r := range rows {
			vals := make([]string, len(r.Data))
			for i, d := range r.Data {
				vals[i] = aws.ToString(d.VarCharValue)
			}
			out = append(out, vals)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// start submits sql in the configured database and workgroup and returns
// the query execution id.
func (s *Source) start(ctx context.Context, sql string, params []string) (string, error) {
	in := &athena.StartQueryExecutionInput{
		QueryString:           aws.String(sql),
		QueryExecutionContext: &types.QueryExecutionContext{Database: aws.String(s.cfg.Database)},
		WorkGroup:             aws.String(s.cfg.Workgroup),
	}
	if len(params) > 0 {
		// Athena rejects an empty parameter list.
		in.ExecutionParameters = params
	}
	if s.cfg.OutputLocation != "" {
		in.ResultConfiguration = &types.ResultConfiguration{OutputLocation: aws.String(s.cfg.OutputLocation)}
	}
	started, err := s.api.StartQueryExecution(ctx, in)
	if err != nil {
		return "", fmt.Errorf("athena: start query: %w", err)
	}
	return aws.ToString(started.QueryExecutionId), nil
}

// wait polls the query until it succeeds, fails, or must be stopped.
func (s *Source) wait(ctx context.Context, id string) error {
	wctx, cancel := context.WithTimeoutCause(ctx, s.cfg.Timeout, ErrQueryTimeout)
	defer cancel()
	poll := retry.Policy{Initial: s.cfg.PollMin, Max: s.cfg.PollMax}
	state := types.QueryExecutionStateQueued
	for n := 0; ; n++ {
		// The first look is immediate.
		if wctx.Err() != nil || (n > 0 && s.sleep(wctx, poll.Delay(n)) != nil) {
			return s.stop(ctx, id, state, wctx)
		}
		out, err := s.api.GetQueryExecution(wctx, &athena.GetQueryExecutionInput{QueryExecutionId: aws.String(id)})
		if err != nil {
			if wctx.Err() != nil {
				return s.stop(ctx, id, state, wctx)
			}
			return errors.Join(fmt.Errorf("athena: poll query %s: %w", id, err), s.stopQuery(ctx, id))
		}
		var st types.QueryExecutionStatus
		if out.QueryExecution != nil && out.QueryExecution.Status != nil {
			st = *out.QueryExecution.Status
		}
		state = st.State
		switch state {
		case types.QueryExecutionStateSucceeded:
			return nil
		case types.QueryExecutionStateFailed, types.QueryExecutionStateCancelled:
			return fmt.Errorf("athena: %w", queryError(id, st))
		}
	}
}

// stop stops a query that the caller cancelled or that timed out and says
// which of the two happened.
func (s *Source) stop(ctx context.Context, id string, state types.QueryExecutionState, wctx context.Context) error {
	cause := context.Cause(wctx)
	var err error
	if ctx.Err() == nil && errors.Is(cause, ErrQueryTimeout) {
		err = fmt.Errorf("athena: query %s still %s after %s, stopped it: %w", id, strings.ToLower(string(state)), s.cfg.Timeout, ErrQueryTimeout)
	} else {
		err = fmt.Errorf("athena: query %s cancelled while %s, stopped it: %w", id, strings.ToLower(string(state)), cause)
	}
	return errors.Join(err, s.stopQuery(ctx, id))
}

// stopQuery calls StopQueryExecution on a context detached from the
// caller's, because the caller's is usually the one that just ended.
func (s *Source) stopQuery(ctx context.Context, id string) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StopTimeout)
	defer cancel()
	if _, err := s.api.StopQueryExecution(sctx, &athena.StopQueryExecutionInput{QueryExecutionId: aws.String(id)}); err != nil {
		return fmt.Errorf("athena: stop query %s: %w", id, err)
	}
	return nil
}

func queryError(id string, st types.QueryExecutionStatus) *QueryError {
	e := &QueryError{QueryExecutionID: id, State: st.State, Reason: aws.ToString(st.StateChangeReason)}
	if st.AthenaError != nil {
		e.Retryable = st.AthenaError.Retryable
		if e.Reason == "" {
			e.Reason = aws.ToString(st.AthenaError.ErrorMessage)
		}
	}
	if e.Reason == "" {
		e.Reason = "no reason given"
	}
	return e
}

// page walks the results and hands each room to emit, one page in memory
// at a time.
func (s *Source) page(ctx context.Context, id string, emit func(Room) error) error {
	var cols map[string]int
	return s.results(ctx, id, func(rs *types.ResultSet, rows []types.Row) error {
		if rs != nil && cols == nil {
			var err error
			if cols, err = columns(rs.ResultSetMetadata); err != nil {
				return err
			}
		}
		for _, row := range rows {
			r, err := parseRoom(row, cols)
			if err != nil {
				return err
			}
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// results walks GetQueryResults page by page, Config.PageSize rows each,
// and hands each page's result set (nil when Athena sent none) and data
// rows to fn; the header row Athena puts first on the first page is left
// out. An error of fn ends the walk.
func (s *Source) results(ctx context.Context, id string, fn func(rs *types.ResultSet, rows []types.Row) error) error {
	var token *string
	for first := true; ; first = false {
		out, err := s.api.GetQueryResults(ctx, &athena.GetQueryResultsInput{
			QueryExecutionId: aws.String(id),
			MaxResults:       aws.Int32(s.cfg.PageSize),
			NextToken:        token,
		})
		if err != nil {
			return fmt.Errorf("athena: results of query %s: %w", id, err)
		}
		var rows []types.Row
		if out.ResultSet != nil {
			rows = out.ResultSet.Rows
		}
		// Athena repeats the column names as the first row of the first
		// page of a SELECT.
		if first && len(rows) > 0 && isHeader(rows[0], out.ResultSet.ResultSetMetadata) {
			rows = rows[1:]
		}
		if err := fn(out.ResultSet, rows); err != nil {
			return fmt.Errorf("athena: results of query %s: %w", id, err)
		}
		token = out.NextToken
		if aws.ToString(token) == "" {
			return nil
		}
	}
}

var wantColumns = []string{"room_id", "first_message_at", "last_message_at", "message_count", "has_images"}

func columns(md *types.ResultSetMetadata) (map[string]int, error) {
	if md == nil {
		return nil, errors.New("no result set metadata")
	}
	idx := make(map[string]int, len(md.ColumnInfo))
	for i, c := range md.ColumnInfo {
		idx[strings.ToLower(aws.ToString(c.Name))] = i
	}
	var missing []string
	for _, w := range wantColumns {
		if _, ok := idx[w]; !ok {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("result lacks columns %s", strings.Join(missing, ", "))
	}
	return idx, nil
}

func isHeader(row types.Row, md *types.ResultSetMetadata) bool {
	if md == nil || len(row.Data) != len(md.ColumnInfo) {
		return false
	}
	for i, d := range row.Data {
		if !strings.EqualFold(aws.ToString(d.VarCharValue), aws.ToString(md.ColumnInfo[i].Name)) {
			return false
		}
	}
	return true
}

func parseRoom(row types.Row, cols map[string]int) (Room, error) {
	get := func(name string) (string, bool) {
		i := cols[name]
		if i >= len(row.Data) || row.Data[i].VarCharValue == nil {
			return "", false
		}
		return *row.Data[i].VarCharValue, true
	}
	var (
		r    Room
		errs []error
	)
	id, ok := get("room_id")
	if !ok || id == "" {
		return Room{}, errors.New("row without a room_id")
	}
	r.RoomID = id
	var err error
	if v, ok := get("first_message_at"); !ok {
		errs = append(errs, errors.New("first_message_at is null"))
	} else if r.FirstMessageAt, err = ParseTimestamp(v); err != nil {
		errs = append(errs, fmt.Errorf("first_message_at: %w", err))
	}
	if v, ok := get("last_message_at"); !ok {
		errs = append(errs, errors.New("last_message_at is null"))
	} else if r.LastMessageAt, err = ParseTimestamp(v); err != nil {
		errs = append(errs, fmt.Errorf("last_message_at: %w", err))
	}
	if v, ok := get("message_count"); !ok {
		errs = append(errs, errors.New("message_count is null"))
	} else if r.MessageCount, err = strconv.ParseInt(v, 10, 64); err != nil {
		errs = append(errs, fmt.Errorf("message_count %q is not an integer", v))
	}
	if v, ok := get("has_images"); ok {
		if r.HasImages, err = strconv.ParseBool(v); err != nil {
			errs = append(errs, fmt.Errorf("has_images %q is not a boolean", v))
		}
	}
	if _, asked := cols["active_seconds"]; asked {
		v, _ := get("active_seconds")
		if r.ActiveSeconds, err = parseSeconds(v); err != nil {
			errs = append(errs, fmt.Errorf("active_seconds: %w", err))
		}
	}
	if len(errs) > 0 {
		return Room{}, fmt.Errorf("room %s: %w", id, errors.Join(errs...))
	}
	return r, nil
}

// parseSeconds reads an array of second offsets as Athena and DuckDB
// render it ("[5, 600]"): ascending, distinct, within MaxSweepWindow.
func parseSeconds(v string) ([]int32, error) {
	body, open := strings.CutPrefix(strings.TrimSpace(v), "[")
	body, closed := strings.CutSuffix(body, "]")
	if !open || !closed {
		return nil, fmt.Errorf("%q is not an array", pipeline.ClipRunes(v, 40))
	}
	if strings.TrimSpace(body) == "" {
		return nil, errors.New("no seconds for a room with messages")
	}
	parts := strings.Split(body, ",")
	out := make([]int32, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || n < 0 || n >= int64(MaxSweepWindow/time.Second) || (len(out) > 0 && int32(n) <= out[len(out)-1]) {
			return nil, fmt.Errorf("%q is not an ascending second of the window", pipeline.ClipRunes(p, 40))
		}
		out = append(out, int32(n))
	}
	return out, nil
}

// timestampLayouts are the renderings of a timestamp in query results:
// Athena's, DuckDB's TIMESTAMP and TIMESTAMPTZ, and RFC 3339.
var timestampLayouts = []string{
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999 MST",
	time.RFC3339Nano,
}

// ParseTimestamp reads a timestamp as Athena or DuckDB renders it; a value
// without a zone is UTC. The result is always in UTC.
func ParseTimestamp(s string) (time.Time, error) {
	for _, l := range timestampLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a timestamp", s)
}

// roomsParams renders the window as the query's positional parameters, each
// an SQL literal as Athena's ExecutionParameters require.
func roomsParams(start, end time.Time) []string {
	start, end = start.UTC(), end.UTC()
	last := end.Add(-time.Nanosecond) // the window is half-open
	firstDT, firstHour := quote(start.Format(time.DateOnly)), quote(start.Format("15"))
	lastDT, lastHour := quote(last.Format(time.DateOnly)), quote(last.Format("15"))
	return []string{
		firstDT, lastDT,
		firstDT, firstHour,
		lastDT, lastHour,
		timestamp(start), timestamp(end),
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func timestamp(t time.Time) string {
	return "TIMESTAMP " + quote(t.Format("2006-01-02 15:04:05.000"))
}
