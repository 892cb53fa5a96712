package athena

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/athena/types"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/standin"
)

func TestRowsPagesAndPutsTheHeaderFirstOnce(t *testing.T) {
	t.Parallel()
	f := &fakeAthena{states: []types.QueryExecutionState{"QUEUED", "RUNNING", "SUCCEEDED"}, rows: 2500}
	s := setup(t, f, nil)
	rows, err := s.Rows(context.Background(), "SELECT 1", []string{"'2026-11-01'"})
	require.NoError(t, err)
	require.Len(t, rows, 2501, "the header, then every row of the three pages")
	require.Equal(t, []string{"room_id", "first_message_at", "last_message_at", "message_count", "has_images"}, rows[0])
	require.Equal(t, "room-00000", rows[1][0])
	require.Equal(t, []string{"room-02499", "2026-11-01 00:00:01.000", "2026-11-01 00:59:00.500", "2500", "false"}, rows[2500])
	require.Equal(t, 3, f.pages)
	require.Equal(t, "SELECT 1", aws.ToString(f.started.QueryString))
	require.Equal(t, []string{"'2026-11-01'"}, f.started.ExecutionParameters)
	require.Equal(t, "chatguard", aws.ToString(f.started.QueryExecutionContext.Database))
	require.Equal(t, "primary", aws.ToString(f.started.WorkGroup))
	require.Equal(t, "s3://results/athena/", aws.ToString(f.started.ResultConfiguration.OutputLocation))

	// No parameters: Athena rejects an empty list, so none is sent.
	f = &fakeAthena{states: []types.QueryExecutionState{"SUCCEEDED"}}
	rows, err = setup(t, f, nil).Rows(context.Background(), "SELECT 1", nil)
	require.NoError(t, err)
	require.Len(t, rows, 1, "an empty result still names its columns")
	require.Nil(t, f.started.ExecutionParameters)
}

// TestRowsEndsLikeRooms: Rows shares Rooms' wait, so a failed query
// carries Athena's reason and one past the timeout is stopped.
func TestRowsEndsLikeRooms(t *testing.T) {
	t.Parallel()
	f := &fakeAthena{states: []types.QueryExecutionState{"RUNNING", "FAILED"}, reason: "SYNTAX_ERROR: line 1:8"}
	_, err := setup(t, f, nil).Rows(context.Background(), "SELEC 1", nil)
	var qe *QueryError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, "SYNTAX_ERROR: line 1:8", qe.Reason)
	require.Empty(t, f.stopped)

	f = &fakeAthena{states: []types.QueryExecutionState{"RUNNING"}}
	_, err = setup(t, f, func(c *Config) { c.Timeout = 30 * time.Millisecond }).Rows(context.Background(), "SELECT 1", nil)
	require.ErrorIs(t, err, ErrQueryTimeout)
	require.Equal(t, []string{"q-1"}, f.stopped)

	_, err = setup(t, &fakeAthena{}, nil).Rows(context.Background(), " ", nil)
	require.ErrorContains(t, err, "empty query")
}

func TestRowsBoundsTheResult(t *testing.T) {
	t.Parallel()
	f := &fakeAthena{states: []types.QueryExecutionState{"SUCCEEDED"}, rows: 250}
	s := setup(t, f, func(c *Config) { c.PageSize = 100 })
	s.maxRows = 150
	_, err := s.Rows(context.Background(), "SELECT 1", nil)
	require.ErrorIs(t, err, ErrTooManyRows)
	require.ErrorContains(t, err, "query q-1")
	require.Equal(t, 2, f.pages, "the walk ends at the page that crosses the bound")

	f = &fakeAthena{states: []types.QueryExecutionState{"SUCCEEDED"}, rows: 150}
	s = setup(t, f, func(c *Config) { c.PageSize = 100 })
	s.maxRows = 150
	rows, err := s.Rows(context.Background(), "SELECT 1", nil)
	require.NoError(t, err)
	require.Len(t, rows, 151, "exactly the bound is allowed")
}

// TestRowsOnTheStandIn runs a parameterised query with a NULL through the
// Athena stand-in (deploy/local/athenasim), one row per page.
func TestRowsOnTheStandIn(t *testing.T) {
	t.Parallel()
	sim := standin.StartAthena(t, standin.AthenaOptions{LakeDir: t.TempDir()})
	api := athena.New(athena.Options{Region: "us-east-1", BaseEndpoint: aws.String(sim.URL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	cfg := DefaultConfig()
	cfg.PollMin, cfg.PollMax, cfg.PageSize = time.Millisecond, 20*time.Millisecond, 1
	s, err := New(api, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := s.Rows(ctx, "SELECT n, CASE WHEN n = 2 THEN NULL ELSE ? END AS tag FROM (VALUES (1), (2), (3)) AS t(n) ORDER BY n", []string{"'day'"})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"n", "tag"}, {"1", "day"}, {"2", ""}, {"3", "day"}}, rows, fmt.Sprint(rows))
}

// TestMain removes the stand-in binaries the tests build.
func TestMain(m *testing.M) { standin.Main(m) }
