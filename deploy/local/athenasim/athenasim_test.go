package athenasim_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/athena/types"
	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/athenasim"
	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline"
	chatathena "github.com/chatguard/chatguard/storage/athena"
)

// sampleLake is generated once for the package; tests that write into a
// lake copy nothing and use their own directory instead.
var sampleLake string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "athenasim-test-")
	if err != nil {
		panic(err)
	}
	sampleLake = filepath.Join(dir, "lake")
	if _, err := sampledata.Generate(context.Background(), sampledata.Options{
		LakeDir: sampleLake, TruthDir: filepath.Join(dir, "truth"), Seed: 5, Rooms: 300, Days: 2,
	}); err != nil {
		panic(err)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

type env struct {
	srv    *athenasim.Server
	client *athena.Client
	url    string
}

func setup(t *testing.T, cfg athenasim.Config) env {
	t.Helper()
	if cfg.LakeDir == "" {
		cfg.LakeDir = sampleLake
	}
	srv, err := athenasim.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		require.NoError(t, srv.Close())
	})
	client := athena.New(athena.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDLOCAL", "SECRETLOCAL", ""),
		BaseEndpoint:     aws.String(ts.URL),
		RetryMaxAttempts: 1,
	})
	return env{srv: srv, client: client, url: ts.URL}
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func (e env) start(t *testing.T, query string, params ...string) string {
	t.Helper()
	in := &athena.StartQueryExecutionInput{
		QueryString:           aws.String(query),
		QueryExecutionContext: &types.QueryExecutionContext{Database: aws.String("chatguard")},
		WorkGroup:             aws.String("primary"),
		ResultConfiguration:   &types.ResultConfiguration{OutputLocation: aws.String("s3://athena-results/batch/")},
	}
	if len(params) > 0 {
		in.ExecutionParameters = params
	}
	out, err := e.client.StartQueryExecution(ctx(t), in)
	require.NoError(t, err)
	require.NotEmpty(t, aws.ToString(out.QueryExecutionId))
	return aws.ToString(out.QueryExecutionId)
}

// wait polls until the query is terminal; the bound is the test context.
func (e env) wait(t *testing.T, id string) *types.QueryExecution {
	t.Helper()
	c := ctx(t)
	for {
		out, err := e.client.GetQueryExecution(c, &athena.GetQueryExecutionInput{QueryExecutionId: aws.String(id)})
		require.NoError(t, err)
		switch out.QueryExecution.Status.State {
		case types.QueryExecutionStateSucceeded, types.QueryExecutionStateFailed, types.QueryExecutionStateCancelled:
			return out.QueryExecution
		}
		select {
		case <-c.Done():
			t.Fatalf("query %s did not finish: %v", id, c.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (e env) waitState(t *testing.T, id string, state types.QueryExecutionState) {
	t.Helper()
	c := ctx(t)
	for {
		out, err := e.client.GetQueryExecution(c, &athena.GetQueryExecutionInput{QueryExecutionId: aws.String(id)})
		require.NoError(t, err)
		if out.QueryExecution.Status.State == state {
			return
		}
		select {
		case <-c.Done():
			t.Fatalf("query %s never reached %s (last %s)", id, state, out.QueryExecution.Status.State)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// results reads every page; pages holds the row count of each.
type results struct {
	cols  []types.ColumnInfo
	rows  [][]*string // data rows, header removed
	pages []int
}

func (e env) results(t *testing.T, id string, maxResults int32) results {
	t.Helper()
	var r results
	p := athena.NewGetQueryResultsPaginator(e.client, &athena.GetQueryResultsInput{QueryExecutionId: aws.String(id), MaxResults: aws.Int32(maxResults)})
	for first := true; p.HasMorePages(); first = false {
		page, err := p.NextPage(ctx(t))
		require.NoError(t, err)
		r.pages = append(r.pages, len(page.ResultSet.Rows))
		r.cols = page.ResultSet.ResultSetMetadata.ColumnInfo
		rows := page.ResultSet.Rows
		if first {
			require.NotEmpty(t, rows)
			for i, d := range rows[0].Data {
				require.Equal(t, aws.ToString(r.cols[i].Name), aws.ToString(d.VarCharValue), "the first row is the header")
			}
			rows = rows[1:]
		}
		for _, row := range rows {
			vals := make([]*string, len(row.Data))
			for i, d := range row.Data {
				vals[i] = d.VarCharValue
			}
			r.rows = append(r.rows, vals)
		}
	}
	return r
}

func (e env) run(t *testing.T, query string, params ...string) results {
	t.Helper()
	id := e.start(t, query, params...)
	qe := e.wait(t, id)
	require.Equal(t, types.QueryExecutionStateSucceeded, qe.Status.State, aws.ToString(qe.Status.StateChangeReason))
	return e.results(t, id, 1000)
}

func (e env) fail(t *testing.T, query string, params ...string) string {
	t.Helper()
	id := e.start(t, query, params...)
	qe := e.wait(t, id)
	require.Equal(t, types.QueryExecutionStateFailed, qe.Status.State)
	require.NotNil(t, qe.Status.AthenaError)
	require.Equal(t, aws.ToString(qe.Status.StateChangeReason), aws.ToString(qe.Status.AthenaError.ErrorMessage))
	return aws.ToString(qe.Status.StateChangeReason)
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

const batchQuery = `SELECT room_id, min(sent_at) AS first_message_at, max(sent_at) AS last_message_at,
       count(*) AS message_count, %s AS has_images
FROM chat_messages
WHERE dt BETWEEN ? AND ? AND sent_at >= ? AND sent_at < ?
GROUP BY room_id
ORDER BY room_id`

func TestBatchQueryOverSampleData(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{})
	from := time.Date(2026, 11, 1, 20, 0, 0, 0, time.UTC)
	to := from.Add(6 * time.Hour) // crosses midnight: two dt partitions
	params := []string{"'2026-11-01'", "'2026-11-02'", "TIMESTAMP '2026-11-01 20:00:00'", "TIMESTAMP '2026-11-02 02:00:00.000'"}

	// What the lake holds, computed without SQL.
	msgs, err := sampledata.LoadMessages(sampleLake)
	require.NoError(t, err)
	var want [][]string
	for _, room := range slices.Sorted(maps.Keys(msgs)) {
		var in []pipeline.ChatMessage
		for _, m := range msgs[room] {
			if !m.SentAt.Before(from) && m.SentAt.Before(to) {
				in = append(in, m)
			}
		}
		if len(in) == 0 {
			continue
		}
		img := slices.ContainsFunc(in, func(m pipeline.ChatMessage) bool { return m.Kind == pipeline.KindImage })
		want = append(want, []string{room, in[0].SentAt.Format("2006-01-02 15:04:05.000"), in[len(in)-1].SentAt.Format("2006-01-02 15:04:05.000"), fmt.Sprint(len(in)), fmt.Sprint(img)})
	}
	require.Greater(t, len(want), 20, "the window must hold enough rooms to paginate")

	for _, hasImages := range []string{"bool_or(kind = 'image')", "max(CASE WHEN kind = 'image' THEN 1 ELSE 0 END) > 0"} {
		id := e.start(t, fmt.Sprintf(batchQuery, hasImages), params...)
		qe := e.wait(t, id)
		require.Equal(t, types.QueryExecutionStateSucceeded, qe.Status.State, aws.ToString(qe.Status.StateChangeReason))
		require.NotNil(t, qe.Status.SubmissionDateTime)
		require.NotNil(t, qe.Status.CompletionDateTime)
		require.False(t, qe.Status.CompletionDateTime.Before(*qe.Status.SubmissionDateTime))
		require.Equal(t, "s3://athena-results/batch/"+id+".csv", aws.ToString(qe.ResultConfiguration.OutputLocation))
		require.Equal(t, "chatguard", aws.ToString(qe.QueryExecutionContext.Database))
		require.Equal(t, params, qe.ExecutionParameters)
		require.Positive(t, aws.ToInt64(qe.Statistics.DataScannedInBytes))
		require.Equal(t, types.StatementTypeDml, qe.StatementType)

		const pageSize = 7
		r := e.results(t, id, pageSize)
		var got [][]string
		for _, row := range r.rows {
			vals := make([]string, len(row))
			for i, v := range row {
				vals[i] = str(v)
			}
			got = append(got, vals)
		}
		require.Equal(t, want, got)
		require.Len(t, r.pages, (len(want)+1+pageSize-1)/pageSize, "the header row counts towards the first page")
		for _, n := range r.pages[:len(r.pages)-1] {
			require.Equal(t, pageSize, n)
		}
		var typesGot []string
		for _, c := range r.cols {
			typesGot = append(typesGot, aws.ToString(c.Type))
		}
		require.Equal(t, []string{"varchar", "timestamp", "timestamp", "bigint", "boolean"}, typesGot)
	}
}

// TestRoomsQueryParametersMatchLiteralsInDuckDB runs the batch's rooms
// query (storage/athena) through the stand-in with its execution
// parameters, and the same statement with the parameters written in as the
// SQL literals they are directly in DuckDB: the stand-in binds them as
// typed values and finds the same rooms. (cmd/batch checks the published
// rooms against the lake itself.)
func TestRoomsQueryParametersMatchLiteralsInDuckDB(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{})
	from := time.Date(2026, 11, 1, 20, 0, 0, 0, time.UTC)
	to := from.Add(6 * time.Hour) // crosses midnight: two dt partitions
	q, params := chatathena.RoomsQuery(from, to)
	var viaStandIn []string
	for _, row := range e.run(t, q, params...).rows {
		viaStandIn = append(viaStandIn, str(row[0]))
	}
	require.Greater(t, len(viaStandIn), 20, "the window holds rooms")

	db, err := sql.Open("duckdb", "")
	require.NoError(t, err)
	defer db.Close()
	db.SetMaxOpenConns(1) // the session settings below hold per connection
	glob := filepath.Join(sampleLake, "chat", "messages", "*", "*", "*.parquet")
	for _, stmt := range []string{
		"SET TimeZone = 'UTC'",
		"CREATE VIEW chat_messages AS SELECT * FROM read_parquet('" + glob + "', hive_partitioning = true, hive_types_autocast = false)",
	} {
		_, err := db.Exec(stmt)
		require.NoError(t, err, stmt)
	}
	literal := q
	for _, p := range params {
		literal = strings.Replace(literal, "?", p, 1)
	}
	rows, err := db.Query(literal)
	require.NoError(t, err)
	defer rows.Close()
	var direct []string
	for rows.Next() {
		var (
			id          string
			first, last any
			n           int64
			img         bool
		)
		require.NoError(t, rows.Scan(&id, &first, &last, &n, &img))
		direct = append(direct, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, direct, viaStandIn)
}

func TestPartitionColumnsAreStrings(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{})
	msgs, err := sampledata.LoadMessages(sampleLake)
	require.NoError(t, err)
	want := 0
	for _, ms := range msgs {
		for _, m := range ms {
			if m.SentAt.Format("2006-01-02 15") == "2026-11-01 09" {
				want++
			}
		}
	}
	r := e.run(t, "SELECT count(*) AS n, min(dt) AS dt, min(hour) AS hour FROM chatguard.chat_messages WHERE dt = '2026-11-01' AND hour = '09'")
	require.Equal(t, fmt.Sprint(want), str(r.rows[0][0]))
	require.Equal(t, "2026-11-01", str(r.rows[0][1]))
	require.Equal(t, "09", str(r.rows[0][2]))
	require.Equal(t, "varchar", aws.ToString(r.cols[1].Type))
	require.Equal(t, "varchar", aws.ToString(r.cols[2].Type))

	r = e.run(t, "SELECT room_id, has_images, message_count, created_at FROM chat_rooms WHERE room_id = 'room-000001'")
	require.Len(t, r.rows, 1)
	rooms, err := sampledata.LoadRooms(sampleLake)
	require.NoError(t, err)
	require.Equal(t, rooms[0].CreatedAt.Format("2006-01-02 15:04:05.000"), str(r.rows[0][3]))
	require.Equal(t, fmt.Sprint(rooms[0].MessageCount), str(r.rows[0][2]))
}

func TestExecutionParametersAreTyped(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{})
	r := e.run(t, "SELECT ? AS s, ? AS i, ? AS d, ? AS b, ? AS day, ? AS ts, ? AS n, ? AS e",
		"'it''s 안전결제'", "42", "-1.5", "true", "DATE '2026-11-01'", "TIMESTAMP '2026-11-01 01:02:03.5'", "NULL", " 1e3 ")
	got := make([]string, len(r.rows[0]))
	for i, v := range r.rows[0] {
		got[i] = str(v)
	}
	require.Equal(t, []string{"it's 안전결제", "42", "-1.5", "true", "2026-11-01", "2026-11-01 01:02:03.500", "<null>", "1000.0"}, got)
	var ty []string
	for _, c := range r.cols {
		ty = append(ty, aws.ToString(c.Type))
	}
	require.Equal(t, []string{"varchar", "bigint", "double", "boolean", "date", "timestamp", "integer", "double"}[:6], ty[:6])

	// Trino functions provided as macros.
	r = e.run(t, "SELECT to_iso8601(?) AS a, from_iso8601_timestamp('2026-11-01T09:00:00+09:00') AS b, to_unixtime(?) AS c, from_unixtime(1793491200) AS d",
		"TIMESTAMP '2026-11-01 00:00:00.123'", "TIMESTAMP '2026-11-01 00:00:00'")
	require.Equal(t, []string{"2026-11-01T00:00:00.123", "2026-11-01 00:00:00.000", "1.7934912E9", "2026-11-01 00:00:00.000"},
		[]string{str(r.rows[0][0]), str(r.rows[0][1]), str(r.rows[0][2]), str(r.rows[0][3])})

	// A placeholder inside a string literal or a comment is not a parameter.
	r = e.run(t, "SELECT '?' AS q, ? AS p -- trailing ?\n", "'x'")
	require.Equal(t, "?", str(r.rows[0][0]))
	require.Equal(t, "x", str(r.rows[0][1]))
}

func TestInjectionInParameterStaysAValue(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{})
	const q = "SELECT count(*) FROM chat_messages WHERE room_id = ?"
	all := e.run(t, "SELECT count(*) FROM chat_messages")
	one := e.run(t, q, "'room-000001'")
	require.NotEqual(t, "0", str(one.rows[0][0]))
	require.NotEqual(t, str(all.rows[0][0]), str(one.rows[0][0]))

	// A well-formed string that contains SQL matches nothing.
	r := e.run(t, q, "'room-000001'' OR ''1''=''1'")
	require.Equal(t, "0", str(r.rows[0][0]))
	// SQL after a literal is not a literal: the query fails instead of running it.
	reason := e.fail(t, q, "'room-000001' OR '1'='1'")
	require.Contains(t, reason, "execution parameter 1")
	reason = e.fail(t, q, "'x'; DROP VIEW chat_messages")
	require.Contains(t, reason, "execution parameter 1")
	// The view is still there.
	again := e.run(t, "SELECT count(*) FROM chat_messages")
	require.Equal(t, str(all.rows[0][0]), str(again.rows[0][0]))
}

func TestMalformedParametersFailTheQuery(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{})
	tests := []struct {
		name   string
		query  string
		params []string
		want   string
	}{
		{"bare word", "SELECT ?", []string{"abc"}, "execution parameter 1: not a SQL literal"},
		{"unterminated string", "SELECT ?", []string{"'abc"}, "execution parameter 1: unterminated string"},
		{"bad timestamp", "SELECT ?", []string{"TIMESTAMP '2026-13-01 00:00:00'"}, "is not a 'YYYY-MM-DD HH:MM:SS[.fff]' timestamp"},
		{"zoned timestamp", "SELECT ?", []string{"TIMESTAMP '2026-11-01 00:00:00 UTC'"}, "time zones are not supported"},
		{"unquoted date", "SELECT ?", []string{"DATE 2026-11-01"}, "DATE must be followed by a quoted value"},
		{"second parameter", "SELECT ?, ?", []string{"1", "1 + 1"}, "execution parameter 2"},
		{"too few", "SELECT ?, ?", []string{"1"}, "2 parameter placeholders but 1 execution parameters"},
		{"too many", "SELECT 1", []string{"1"}, "0 parameter placeholders but 1 execution parameters"},
		{"huge integer", "SELECT ?", []string{"99999999999999999999"}, "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reason := e.fail(t, tc.query, tc.params...)
			require.Contains(t, reason, tc.want)
			require.True(t, strings.HasPrefix(reason, "INVALID_PARAMETER: "), reason)
		})
	}
}

func TestFailingQueriesReportTheirReason(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{})
	tests := []struct {
		name, query, want string
	}{
		{"unknown column", "SELECT no_such_column FROM chat_messages", "no_such_column"},
		{"not a statement", "SELEC 1", "NOT_SUPPORTED"},
		{"syntax", "SELECT 1 +", "Parser Error"},
		{"unterminated", "SELECT 'abc", "SYNTAX_ERROR: unterminated string literal"},
		{"write", "CREATE TABLE x AS SELECT 1", "read-only statements only"},
		{"two statements", "SELECT 1; SELECT 2", "only one SQL statement"},
		{"local file", "SELECT * FROM read_csv('/etc/passwd')", "Cannot access file"},
		{"no data yet", "SELECT count(*) FROM inference_log", "NO_DATA: table chatguard.inference_log has no data yet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := e.start(t, tc.query)
			qe := e.wait(t, id)
			require.Equal(t, types.QueryExecutionStateFailed, qe.Status.State)
			require.Contains(t, aws.ToString(qe.Status.StateChangeReason), tc.want)
			require.Equal(t, int32(2), aws.ToInt32(qe.Status.AthenaError.ErrorCategory), "user error")
			require.False(t, qe.Status.AthenaError.Retryable)

			_, err := e.client.GetQueryResults(ctx(t), &athena.GetQueryResultsInput{QueryExecutionId: aws.String(id)})
			var ire *types.InvalidRequestException
			require.ErrorAs(t, err, &ire)
			require.Contains(t, ire.ErrorMessage(), "FAILED")
		})
	}
	// A trailing semicolon is one statement.
	r := e.run(t, "SELECT 1 AS one;")
	require.Equal(t, "1", str(r.rows[0][0]))
}

func TestTableGetsDataLater(t *testing.T) {
	t.Parallel()
	lake := t.TempDir()
	e := setup(t, athenasim.Config{LakeDir: lake, Tables: map[string]string{
		"inference_log": "s3://lake/events/event_type=inference_log/dt=*/hour=*/*.parquet",
	}})
	reason := e.fail(t, "SELECT count(*) FROM inference_log")
	require.Contains(t, reason, "no data yet")

	type row struct {
		RoomID     string    `parquet:"room_id"`
		OccurredAt time.Time `parquet:"occurred_at,timestamp(millisecond)"`
	}
	write := func(hour string, rows ...row) {
		dir := filepath.Join(lake, "events", "event_type=inference_log", "dt=2026-11-01", "hour="+hour)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, parquet.WriteFile(filepath.Join(dir, "part-0.parquet"), rows))
	}
	ts := time.Date(2026, 11, 1, 5, 6, 7, 890_000_000, time.UTC)
	write("05", row{"room-a", ts})
	r := e.run(t, "SELECT room_id, occurred_at, event_type, dt, hour FROM inference_log")
	require.Len(t, r.rows, 1)
	require.Equal(t, []string{"room-a", "2026-11-01 05:06:07.890", "inference_log", "2026-11-01", "05"},
		[]string{str(r.rows[0][0]), str(r.rows[0][1]), str(r.rows[0][2]), str(r.rows[0][3]), str(r.rows[0][4])})

	// New files are seen by the next query.
	write("06", row{"room-b", ts.Add(time.Hour)}, row{"room-c", ts.Add(time.Hour)})
	r = e.run(t, "SELECT count(*) FROM inference_log WHERE occurred_at >= ?", "TIMESTAMP '2026-11-01 06:00:00'")
	require.Equal(t, "2", str(r.rows[0][0]))
}

func TestStopLongQuery(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{MinRunTime: time.Hour})
	id := e.start(t, "SELECT count(*) FROM chat_messages")
	e.waitState(t, id, types.QueryExecutionStateRunning)

	_, err := e.client.GetQueryResults(ctx(t), &athena.GetQueryResultsInput{QueryExecutionId: aws.String(id)})
	var ire *types.InvalidRequestException
	require.ErrorAs(t, err, &ire)
	require.Contains(t, ire.ErrorMessage(), "not yet finished")

	_, err = e.client.StopQueryExecution(ctx(t), &athena.StopQueryExecutionInput{QueryExecutionId: aws.String(id)})
	require.NoError(t, err)
	qe := e.wait(t, id)
	require.Equal(t, types.QueryExecutionStateCancelled, qe.Status.State)
	require.NotNil(t, qe.Status.CompletionDateTime)
	// Stopping again is harmless.
	_, err = e.client.StopQueryExecution(ctx(t), &athena.StopQueryExecutionInput{QueryExecutionId: aws.String(id)})
	require.NoError(t, err)
	require.Equal(t, 1, e.srv.Stats().Cancelled)
	require.Zero(t, e.srv.Stats().Active)
	calls := e.srv.Stats().Calls
	require.Equal(t, 1, calls["StartQueryExecution"])
	require.Equal(t, 1, calls["GetQueryResults"])
	require.Equal(t, 2, calls["StopQueryExecution"], "both stops are counted")
	require.GreaterOrEqual(t, calls["GetQueryExecution"], 2, "waitState and wait polled")
}

func TestMinRunTimeAndFailuresViaAdmin(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{})
	admin := func(body string) map[string]any {
		resp, err := http.Post(e.url+"/admin/config", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out
	}
	cfg := admin(`{"min_run_time":"1h"}`)
	require.Equal(t, "1h0m0s", cfg["min_run_time"])
	id := e.start(t, "SELECT 1")
	e.waitState(t, id, types.QueryExecutionStateRunning)
	admin(`{"min_run_time":"0s"}`)
	qe := e.wait(t, id)
	require.Equal(t, types.QueryExecutionStateSucceeded, qe.Status.State)

	admin(`{"fail_next":1,"fail_reason":"HIVE_CURSOR_ERROR: injected","fail_retryable":true}`)
	reason := e.fail(t, "SELECT 1")
	require.Equal(t, "HIVE_CURSOR_ERROR: injected", reason)
	r := e.run(t, "SELECT 1")
	require.Equal(t, "1", str(r.rows[0][0]))

	e.srv.FailNext(1, "boom", false)
	id = e.start(t, "SELECT 1")
	qe = e.wait(t, id)
	require.Equal(t, "boom", aws.ToString(qe.Status.StateChangeReason))
	require.False(t, qe.Status.AthenaError.Retryable)

	resp, err := http.Post(e.url+"/admin/config", "application/json", strings.NewReader(`{"min_run_time":"soon"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func TestConcurrencyBoundsAndEviction(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{MaxConcurrent: 1, MaxQueued: 2, MaxRetained: 2, MinRunTime: time.Hour})
	a := e.start(t, "SELECT 1")
	b := e.start(t, "SELECT 2")
	e.waitState(t, a, types.QueryExecutionStateRunning)
	out, err := e.client.GetQueryExecution(ctx(t), &athena.GetQueryExecutionInput{QueryExecutionId: aws.String(b)})
	require.NoError(t, err)
	require.Equal(t, types.QueryExecutionStateQueued, out.QueryExecution.Status.State, "only one runs at a time")

	_, err = e.client.StartQueryExecution(ctx(t), &athena.StartQueryExecutionInput{QueryString: aws.String("SELECT 3")})
	var tmr *types.TooManyRequestsException
	require.ErrorAs(t, err, &tmr)

	e.srv.SetMinRunTime(0)
	require.Equal(t, types.QueryExecutionStateSucceeded, e.wait(t, a).Status.State)
	require.Equal(t, types.QueryExecutionStateSucceeded, e.wait(t, b).Status.State)
	c := e.start(t, "SELECT 3")
	e.wait(t, c)
	// a finished first and is forgotten beyond MaxRetained.
	_, err = e.client.GetQueryExecution(ctx(t), &athena.GetQueryExecutionInput{QueryExecutionId: aws.String(a)})
	var ire *types.InvalidRequestException
	require.ErrorAs(t, err, &ire)
	require.Equal(t, 2, e.srv.Stats().Retained)
}

func TestClientRequestTokenIsIdempotent(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{})
	tok := "token-0123456789abcdef0123456789abcdef"
	in := &athena.StartQueryExecutionInput{QueryString: aws.String("SELECT 1"), ClientRequestToken: aws.String(tok)}
	a, err := e.client.StartQueryExecution(ctx(t), in)
	require.NoError(t, err)
	b, err := e.client.StartQueryExecution(ctx(t), in)
	require.NoError(t, err)
	require.Equal(t, aws.ToString(a.QueryExecutionId), aws.ToString(b.QueryExecutionId))
	_, err = e.client.StartQueryExecution(ctx(t), &athena.StartQueryExecutionInput{QueryString: aws.String("SELECT 2"), ClientRequestToken: aws.String(tok)})
	var ire *types.InvalidRequestException
	require.ErrorAs(t, err, &ire)
	require.Contains(t, ire.ErrorMessage(), "Idempotent")
	require.Equal(t, 1, e.srv.Stats().Started)
}

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	e := setup(t, athenasim.Config{})
	var ire *types.InvalidRequestException
	_, err := e.client.GetQueryExecution(ctx(t), &athena.GetQueryExecutionInput{QueryExecutionId: aws.String("nope")})
	require.ErrorAs(t, err, &ire)
	require.Contains(t, ire.ErrorMessage(), "was not found")

	id := e.start(t, "SELECT 1")
	e.wait(t, id)
	_, err = e.client.GetQueryResults(ctx(t), &athena.GetQueryResultsInput{QueryExecutionId: aws.String(id), MaxResults: aws.Int32(1001)})
	require.ErrorAs(t, err, &ire)
	_, err = e.client.GetQueryResults(ctx(t), &athena.GetQueryResultsInput{QueryExecutionId: aws.String(id), NextToken: aws.String("garbage")})
	require.ErrorAs(t, err, &ire)
	_, err = e.client.StartQueryExecution(ctx(t), &athena.StartQueryExecutionInput{QueryString: aws.String("   ")})
	require.ErrorAs(t, err, &ire)

	// The wire format of errors, as the SDK's JSON 1.1 deserializer reads it.
	req, err := http.NewRequest(http.MethodPost, e.url+"/", bytes.NewReader([]byte(`{}`)))
	require.NoError(t, err)
	req.Header.Set("X-Amz-Target", "AmazonAthena.DeleteWorkGroup")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "application/x-amz-json-1.1", resp.Header.Get("Content-Type"))
	require.JSONEq(t, `{"__type":"UnknownOperationException","Message":"athenasim does not implement DeleteWorkGroup"}`, string(body))
}

func TestCloseCancelsRunningQueries(t *testing.T) {
	t.Parallel()
	srv, err := athenasim.New(athenasim.Config{LakeDir: sampleLake, MinRunTime: time.Hour})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	client := athena.New(athena.Options{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL),
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""), RetryMaxAttempts: 1})
	e := env{srv: srv, client: client, url: ts.URL}
	id := e.start(t, "SELECT count(*) FROM chat_messages")
	e.waitState(t, id, types.QueryExecutionStateRunning)
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close(), "Close is idempotent")
	out, err := client.GetQueryExecution(ctx(t), &athena.GetQueryExecutionInput{QueryExecutionId: aws.String(id)})
	require.NoError(t, err)
	require.Equal(t, types.QueryExecutionStateCancelled, out.QueryExecution.Status.State)
	_, err = client.StartQueryExecution(ctx(t), &athena.StartQueryExecutionInput{QueryString: aws.String("SELECT 1")})
	require.Error(t, err)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  athenasim.Config
		want []string
	}{
		{"no lake", athenasim.Config{}, []string{"lake dir is missing"}},
		{"bad names", athenasim.Config{LakeDir: "x", Database: "Bad-Name", Tables: map[string]string{"Chat Rooms": "a/*.parquet"}}, []string{`database "Bad-Name"`, `table "Chat Rooms"`}},
		{"bad locations", athenasim.Config{LakeDir: "x", Tables: map[string]string{"a": "s3://other/x/*.parquet", "b": "gs://x", "c": ""}}, []string{"not under s3://lake/", "unsupported scheme", "empty location"}},
		{"bad bounds", athenasim.Config{LakeDir: "x", MaxConcurrent: 5, MaxQueued: 2, MaxRetained: -1, MaxResultRows: -1, MinRunTime: -time.Second}, []string{"max queued 2", "max retained", "max result rows", "min run time"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := athenasim.New(tc.cfg)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}
