package main

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// TestStackCompactKeepsEveryEventVisible writes a lake the way consumers
// do (many small objects, some events twice), compacts one partition while
// Athena reads through the _dedup views in the moment both copies exist,
// then runs `consumer compact` over the rest, twice.
func TestStackCompactKeepsEveryEventVisible(t *testing.T) {
	t.Parallel()
	s := setupStack(t)
	prefix := s.root + "/events/"
	lake, err := s3lake.NewLake(s.store, prefix, s.root+"/errors/")
	require.NoError(t, err)
	start := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	evs := s3laketest.Events(450, 23, start, 2)
	perType := map[string]int{}
	byPart := map[pipeline.LakePartition][]pipeline.LakeRecord{}
	for i, ev := range evs {
		perType[string(ev.EventType)]++
		p := pipeline.LakePartition{Type: ev.EventType, Hour: pipeline.LakeHour(ev.OccurredAt)}
		byPart[p] = append(byPart[p], pipeline.LakeRecord{LakeEvent: ev, ReceivedAt: start.Add(time.Duration(i) * time.Second)})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for p, recs := range byPart {
		// Four objects per partition, and the first ten events once more.
		for i := 0; i < len(recs); i += len(recs)/4 + 1 {
			part := recs[i:min(len(recs), i+len(recs)/4+1)]
			obj, err := lake.EncodeEvents(p, []string{strconv.Itoa(i)}, part)
			require.NoError(t, err)
			require.NoError(t, lake.Put(ctx, obj))
		}
		obj, err := lake.EncodeEvents(p, []string{"again"}, recs[:min(10, len(recs))])
		require.NoError(t, err)
		require.NoError(t, lake.Put(ctx, obj))
	}
	ath := startLakeAthena(t, s)
	dedup, raw, err := ath.counts(ctx, tablesOf(perType))
	require.NoError(t, err)
	require.Equal(t, perType, dedup)
	rawBefore := raw

	// One partition through the API, looking at Athena between the write
	// and the delete.
	var p pipeline.LakePartition
	for p = range byPart {
		break
	}
	cfg := s3lake.DefaultCompactConfig()
	cfg.EventsPrefix = prefix
	cfg.Logger = slog.New(slog.DiscardHandler)
	looked := false
	cfg.AfterWrite = func(ctx context.Context, _ pipeline.LakePartition, written []string) {
		looked = true
		require.Len(t, written, 1)
		dedup, raw, err := ath.counts(ctx, tablesOf(perType))
		require.NoError(t, err)
		require.Equal(t, perType, dedup, "every event once through the views while both copies exist")
		require.Greater(t, raw[string(p.Type)], rawBefore[string(p.Type)], "both copies exist")
	}
	c, err := s3lake.NewCompactor(s.store, cfg)
	require.NoError(t, err)
	report, err := c.CompactPartition(ctx, p)
	require.NoError(t, err)
	require.True(t, looked)
	require.Equal(t, 5, report.ObjectsBefore)
	require.Equal(t, 1, report.ObjectsAfter)

	// The rest through the command, twice: the second run finds nothing.
	compact := func() string {
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"compact", "--lake-bucket", s.bucket, "--lake-prefix", prefix, "--s3-path-style",
			"--compact-grace", "10m", "--compact-lookback", "24h"}, cli.Environ, &out, &errOut)
		require.Zero(t, code, errOut.String())
		return out.String()
	}
	first := compact()
	require.Contains(t, first, strconv.Itoa(len(byPart)-1)+" compacted", first)
	second := compact()
	require.Contains(t, second, " 0 compacted", second)

	keys, err := s.store.List(ctx, prefix)
	require.NoError(t, err)
	dirs := map[string]int{}
	for _, k := range keys {
		require.Contains(t, k, "/"+s3lake.CompactedPrefix, "only compacted objects are left")
		dirs[k[:strings.LastIndexByte(k, '/')]]++
	}
	for d, n := range dirs {
		require.Equal(t, 1, n, d)
	}
	dedup, raw, err = ath.counts(ctx, tablesOf(perType))
	require.NoError(t, err)
	require.Equal(t, perType, dedup)
	require.Equal(t, perType, raw, "compaction dropped the duplicate copies")
}

func TestCompactConfigNamesEveryProblem(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"compact", "--compact-target-bytes", "5", "--compact-timeout", "0s"}, func(string) string { return "" }, &out, &errOut)
	require.Equal(t, cli.ExitUsage, code)
	for _, want := range []string{"--lake-bucket is required", "--compact-timeout", "--compact-target-bytes"} {
		require.Contains(t, errOut.String(), want)
	}
}

// --lake-prefix is the compactor's own EventsPrefix, shared by name with
// the consumer's flag; no flag leaves the lake's default.
func TestCompactLakePrefixIsTheCompactorsOwn(t *testing.T) {
	t.Parallel()
	c := DefaultCompactConfig()
	require.NoError(t, c.flags().Parse(nil, func(string) string { return "" }))
	require.Equal(t, s3lake.DefaultEventsPrefix, c.EventsPrefix)
	require.NoError(t, c.flags().Parse(nil, func(k string) string { return map[string]string{"CHATGUARD_LAKE_PREFIX": "lake/events/"}[k] }))
	require.Equal(t, "lake/events/", c.EventsPrefix)
}
