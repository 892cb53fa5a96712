package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsathena "github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/athena"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
)

// requireDedupViews runs the deploy/athena dedup views through the real
// Athena client against a private Athena stand-in process whose tables are
// this test's part of the stack's lake directory: each event once, though
// the raw tables hold dups extra copies.
func requireDedupViews(t *testing.T, s *stack, want map[string]pipeline.LakeEvent, dups int) {
	t.Helper()
	tables := map[string]string{}
	for _, tb := range athena.Tables {
		tables[tb] = "s3://" + s.bucket + "/" + s.root + "/events/event_type=" + tb + "/dt=*/hour=*/*.parquet"
	}
	sim := standin.StartAthena(t, standin.AthenaOptions{LakeDir: stacktest.LakeDir(t), Bucket: s.bucket, Tables: tables})
	client := awsathena.New(awsathena.Options{Region: "us-east-1", BaseEndpoint: aws.String(sim.URL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	perType := map[string]int{}
	for _, ev := range want {
		perType[string(ev.EventType)]++
	}
	raw := 0
	for _, tb := range athena.Tables {
		q, err := athena.WithDedupViews("SELECT count(*), count(DISTINCT event_id) FROM " + tb + "_dedup")
		require.NoError(t, err)
		rows, err := athena.RunQuery(ctx, client, athena.Where{Database: "chatguard"}, q)
		require.NoError(t, err)
		n := strconv.Itoa(perType[tb])
		require.Equal(t, []string{n, n}, rows[1], "%s_dedup returns each event once", tb)
		rows, err = athena.RunQuery(ctx, client, athena.Where{Database: "chatguard"}, "SELECT count(*) FROM "+tb)
		require.NoError(t, err)
		c, _ := strconv.Atoi(rows[1][0])
		raw += c
	}
	require.Equal(t, len(want)+dups, raw)
}
