package integration_test

import (
	"bytes"
	"context"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/athena/types"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
)

func startQuery(ctx context.Context, t *testing.T, c *athena.Client, sql string, params ...string) string {
	t.Helper()
	out, err := c.StartQueryExecution(ctx, &athena.StartQueryExecutionInput{
		QueryString:           aws.String(sql),
		ExecutionParameters:   params,
		QueryExecutionContext: &types.QueryExecutionContext{Database: aws.String(stacktest.Get(t, "CHATGUARD_ATHENA_DATABASE"))},
		WorkGroup:             aws.String(stacktest.Get(t, "CHATGUARD_ATHENA_WORKGROUP")),
		ResultConfiguration:   &types.ResultConfiguration{OutputLocation: aws.String(stacktest.Get(t, "CHATGUARD_ATHENA_OUTPUT_LOCATION"))},
	})
	require.NoError(t, err)
	require.NotEmpty(t, aws.ToString(out.QueryExecutionId))
	return *out.QueryExecutionId
}

// waitQuery polls until the execution reaches a final state.
func waitQuery(ctx context.Context, t *testing.T, c *athena.Client, id string) *types.QueryExecutionStatus {
	t.Helper()
	for {
		out, err := c.GetQueryExecution(ctx, &athena.GetQueryExecutionInput{QueryExecutionId: aws.String(id)})
		require.NoError(t, err)
		st := out.QueryExecution.Status
		switch st.State {
		case types.QueryExecutionStateSucceeded, types.QueryExecutionStateFailed, types.QueryExecutionStateCancelled:
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("query %s still %s: %v", id, st.State, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sampleRoomIDs returns every room id of the ground truth, sorted.
func sampleRoomIDs(t *testing.T) []string {
	t.Helper()
	var all []string
	for _, r := range sampleRooms(t, -1) {
		all = append(all, r.RoomID)
	}
	sort.Strings(all)
	return all
}

func TestAthenaQueryPaginatesOverTheSampleLake(t *testing.T) {
	t.Parallel()
	c := stacktest.Athena(t)
	ctx := ctxFor(t, time.Minute)
	ids := sampleRoomIDs(t)

	// A real aggregate over every partition matches the ground truth.
	id := startQuery(ctx, t, c, "SELECT count(*) AS rooms FROM chat_rooms")
	st := waitQuery(ctx, t, c, id)
	require.Equal(t, types.QueryExecutionStateSucceeded, st.State, aws.ToString(st.StateChangeReason))
	res, err := c.GetQueryResults(ctx, &athena.GetQueryResultsInput{QueryExecutionId: aws.String(id)})
	require.NoError(t, err)
	require.Len(t, res.ResultSet.Rows, 2, "header and one row")
	require.Equal(t, "rooms", aws.ToString(res.ResultSet.Rows[0].Data[0].VarCharValue))
	require.Equal(t, strconv.Itoa(len(ids)), aws.ToString(res.ResultSet.Rows[1].Data[0].VarCharValue))

	// 25 rows in pages of 10: the header comes first on the first page only.
	const want = 25
	id = startQuery(ctx, t, c, "SELECT room_id, message_count FROM chat_rooms WHERE message_count > ? ORDER BY room_id LIMIT 25", "0")
	st = waitQuery(ctx, t, c, id)
	require.Equal(t, types.QueryExecutionStateSucceeded, st.State, aws.ToString(st.StateChangeReason))
	var got []string
	pages := 0
	p := athena.NewGetQueryResultsPaginator(c, &athena.GetQueryResultsInput{QueryExecutionId: aws.String(id), MaxResults: aws.Int32(10)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		rows := page.ResultSet.Rows
		if pages == 0 {
			require.Equal(t, "room_id", aws.ToString(rows[0].Data[0].VarCharValue))
			require.Equal(t, "message_count", aws.ToString(page.ResultSet.ResultSetMetadata.ColumnInfo[1].Name))
			rows = rows[1:]
		}
		for _, r := range rows {
			got = append(got, aws.ToString(r.Data[0].VarCharValue))
			n, err := strconv.Atoi(aws.ToString(r.Data[1].VarCharValue))
			require.NoError(t, err)
			require.Positive(t, n)
		}
		pages++
	}
	require.Equal(t, 3, pages)
	require.Equal(t, ids[:want], got)
}

func TestAthenaFailingQueryReportsItsReason(t *testing.T) {
	t.Parallel()
	c := stacktest.Athena(t)
	ctx := ctxFor(t, time.Minute)
	id := startQuery(ctx, t, c, "SELECT no_such_column FROM chat_rooms")
	st := waitQuery(ctx, t, c, id)
	require.Equal(t, types.QueryExecutionStateFailed, st.State)
	require.Contains(t, aws.ToString(st.StateChangeReason), "no_such_column")
	_, err := c.GetQueryResults(ctx, &athena.GetQueryResultsInput{QueryExecutionId: aws.String(id)})
	require.Error(t, err, "a failed query has no results")
}

func TestAthenaStopQuery(t *testing.T) {
	t.Parallel()
	c := stacktest.Athena(t)
	ctx := ctxFor(t, time.Minute)
	admin := stacktest.AthenaAdminURL(t) + "/config"
	setMinRunTime := func(d string) {
		resp, err := http.Post(admin, "application/json", bytes.NewBufferString(`{"min_run_time":"`+d+`"}`))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	// Hold queries RUNNING only while this one starts, so that other tests
	// against the same stack are barely slowed.
	// The stand-in re-reads the minimum run time while a query waits it
	// out, so it is reset only after the stop: resetting it earlier let the
	// query finish before the stop arrived when the machine was busy.
	setMinRunTime("30s")
	reset := sync.OnceFunc(func() { setMinRunTime("0s") })
	t.Cleanup(reset)
	id := startQuery(ctx, t, c, "SELECT count(*) FROM chat_messages")

	out, err := c.GetQueryExecution(ctx, &athena.GetQueryExecutionInput{QueryExecutionId: aws.String(id)})
	require.NoError(t, err)
	require.Contains(t, []types.QueryExecutionState{types.QueryExecutionStateQueued, types.QueryExecutionStateRunning}, out.QueryExecution.Status.State)

	_, err = c.StopQueryExecution(ctx, &athena.StopQueryExecutionInput{QueryExecutionId: aws.String(id)})
	require.NoError(t, err)
	reset()
	st := waitQuery(ctx, t, c, id)
	require.Equal(t, types.QueryExecutionStateCancelled, st.State)
}
