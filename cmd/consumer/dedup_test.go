package main

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsathena "github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/lake"
	"github.com/chatguard/chatguard/pipeline"
	athenasrc "github.com/chatguard/chatguard/storage/athena"
)

// lakeAthena is a private Athena stand-in over one test's corner of the
// stack's lake.
type lakeAthena struct {
	client *awsathena.Client
}

func startLakeAthena(t *testing.T, s *stack) lakeAthena {
	t.Helper()
	tables := map[string]string{}
	for _, tb := range lake.Tables {
		tables[tb] = "s3://" + s.bucket + "/" + s.root + "/events/event_type=" + tb + "/dt=*/hour=*/*.parquet"
	}
	sim := standin.StartAthena(t, standin.AthenaOptions{LakeDir: stacktest.LakeDir(t), Bucket: s.bucket, Tables: tables})
	return lakeAthena{client: awsathena.New(awsathena.Options{Region: "us-east-1", BaseEndpoint: aws.String(sim.URL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})}
}

// counts returns, per table of tables, the rows of its _dedup view and of
// the raw table. It fails when a view returns an event id twice.
func (a lakeAthena) counts(ctx context.Context, tables []string) (dedup, raw map[string]int, err error) {
	dedup, raw = map[string]int{}, map[string]int{}
	src, err := athenasrc.New(a.client, athenasrc.DefaultConfig())
	if err != nil {
		return nil, nil, err
	}
	for _, tb := range tables {
		q, err := lake.WithDedupViews("SELECT (SELECT count(*) FROM " + tb + "_dedup), (SELECT count(DISTINCT event_id) FROM " + tb + "_dedup), (SELECT count(*) FROM " + tb + ")")
		if err != nil {
			return nil, nil, err
		}
		rows, err := src.Rows(ctx, q, nil)
		if err != nil {
			return nil, nil, err
		}
		if rows[1][0] != rows[1][1] {
			return nil, nil, fmt.Errorf("%s_dedup returns %s rows of %s events", tb, rows[1][0], rows[1][1])
		}
		dedup[tb], _ = strconv.Atoi(rows[1][0])
		raw[tb], _ = strconv.Atoi(rows[1][2])
	}
	return dedup, raw, nil
}

// tablesOf lists the tables that hold events of perType: a table with no
// objects fails a query on the stand-in, and a test that predates an event
// type writes none of it.
func tablesOf(perType map[string]int) []string {
	var tables []string
	for _, tb := range lake.Tables {
		if perType[tb] > 0 {
			tables = append(tables, tb)
		}
	}
	return tables
}

// requireDedupViews runs the lake dedup views through the real
// Athena client against a private Athena stand-in process whose tables are
// this test's part of the stack's lake directory: each event once (an
// undo and the decision it undid: not at all), though the raw tables hold
// dups extra copies.
func requireDedupViews(t *testing.T, s *stack, want map[string]pipeline.LakeEvent, dups int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	perType, tables := map[string]int{}, map[string]int{}
	undone := map[string]bool{}
	for _, ev := range want {
		if p, ok := ev.Payload.(pipeline.ModeratorFeedback); ok && p.Decision == pipeline.FeedbackUndo {
			undone[ev.EventID], undone[p.ReversesEventID] = true, true
		}
	}
	for _, ev := range want {
		tables[string(ev.EventType)]++
		if !undone[ev.EventID] {
			perType[string(ev.EventType)]++
		}
	}
	dedup, raw, err := startLakeAthena(t, s).counts(ctx, tablesOf(tables))
	require.NoError(t, err)
	require.Equal(t, perType, dedup, "the _dedup views return each event once, of the moderators' decisions only those in force")
	total := 0
	for _, n := range raw {
		total += n
	}
	require.Equal(t, len(want)+dups, total)
}
