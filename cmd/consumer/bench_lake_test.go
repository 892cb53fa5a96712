//go:build lakebench

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsathena "github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/athena/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/lake"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// TestLakeCompactionBench is `make bench-lake`: it writes a simulated day
// of the lake the way the consumer does at BENCH_LAKE_RATE events/s
// (default 150) with BENCH_LAKE_REPLICAS consumers (default 2) that each
// write every partition once a minute (--flush-age 1m), into the local
// stack's S3; counts the objects per partition-hour, times two Athena
// queries over the day through the stand-in, runs `consumer compact`'s
// compactor, and counts and times again. It prints one table. It is a
// benchmark, not a test of the figures: it asserts only that no event is
// lost and every hour ends in one object per type.
func TestLakeCompactionBench(t *testing.T) {
	rate := envInt(t, "BENCH_LAKE_RATE", 150)
	replicas := envInt(t, "BENCH_LAKE_REPLICAS", 2)
	hours := envInt(t, "BENCH_LAKE_HOURS", 24)
	runs := envInt(t, "BENCH_LAKE_RUNS", 5)
	s := setupStack(t)
	prefix := s.root + "/events/"
	events, err := s3lake.NewLake(s.store, prefix, s.root+"/errors/")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()

	day := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	t0 := time.Now()
	written, objects := writeDay(ctx, t, events, day, hours, rate, replicas)
	gen := time.Since(t0)
	fmt.Printf("\nwrote %d events in %d objects (%d events/s, %d consumer replicas, one object per partition per replica-minute, %d hours) in %s\n",
		written, objects, rate, replicas, hours, gen.Round(time.Second))

	perHour := func() (minN, medN, maxN, total int) {
		keys, err := s.store.List(ctx, prefix)
		require.NoError(t, err)
		dirs := map[string]int{}
		for _, k := range keys {
			dirs[k[:strings.LastIndexByte(k, '/')]]++
		}
		var ns []int
		for _, n := range dirs {
			ns = append(ns, n)
		}
		slices.Sort(ns)
		for d, n := range dirs {
			if n > 1 && n < 20 {
				t.Logf("%s: %d objects", d, n)
			}
		}
		return ns[0], ns[len(ns)/2], ns[len(ns)-1], len(keys)
	}
	ath := startLakeAthena(t, s)
	// The analysts' own queries (lake/queries) over the day.
	var queries []struct{ name, sql string }
	for _, name := range []string{"verdicts_by_label_category_day", "fallback_rate_latency_hour"} {
		sql, err := lake.Query(name)
		require.NoError(t, err)
		queries = append(queries, struct{ name, sql string }{"`" + name + ".sql`", sql})
	}
	type timing struct{ engine, wall time.Duration }
	measure := func(sql string) timing {
		q, err := lake.WithDedupViews(sql)
		require.NoError(t, err)
		q = lake.ForDuckDB(q)
		var eng, wall []time.Duration
		for range runs {
			e, w := timeQuery(ctx, t, ath.client, q, "'2025-06-01'", "'2025-06-01'")
			eng, wall = append(eng, e), append(wall, w)
		}
		slices.Sort(eng)
		slices.Sort(wall)
		return timing{eng[len(eng)/2], wall[len(wall)/2]}
	}
	minB, medB, maxB, totalB := perHour()
	before := make([]timing, len(queries))
	for i, q := range queries {
		before[i] = measure(q.sql)
	}
	dedupBefore, _, err := ath.counts(ctx, benchTables)
	require.NoError(t, err)

	cfg := s3lake.DefaultCompactConfig()
	cfg.EventsPrefix = prefix
	cfg.Lookback = time.Duration(hours+3) * time.Hour // from the day before's last hour
	cfg.Logger = slog.New(slog.DiscardHandler)
	c, err := s3lake.NewCompactor(s.store, cfg, s3lake.CompactClock(fixedNow{clock.Real(), day.Add(time.Duration(hours)*time.Hour + 2*time.Hour)}))
	require.NoError(t, err)
	t0 = time.Now()
	report, err := c.Run(ctx)
	require.NoError(t, err)
	took := time.Since(t0)

	minA, medA, maxA, totalA := perHour()
	after := make([]timing, len(queries))
	for i, q := range queries {
		after[i] = measure(q.sql)
	}
	dedupAfter, rawAfter, err := ath.counts(ctx, benchTables)
	require.NoError(t, err)
	require.Equal(t, dedupBefore, dedupAfter, "no event lost")
	require.Equal(t, dedupAfter, rawAfter, "no duplicate left")
	require.Equal(t, 1, maxA)

	fmt.Printf("compaction: %s in %s (%.0f rows/s, %.1f MB/s read)\n\n", report, took.Round(time.Second),
		float64(report.RowsIn)/took.Seconds(), float64(report.BytesIn)/1e6/took.Seconds())
	fmt.Printf("| | before compaction | after compaction |\n| --- | --- | --- |\n")
	fmt.Printf("| objects per partition-hour (min / median / max) | %d / %d / %d | %d / %d / %d |\n", minB, medB, maxB, minA, medA, maxA)
	fmt.Printf("| objects over the day, 3 tables | %d | %d |\n", totalB, totalA)
	for i, q := range queries {
		fmt.Printf("| %s: engine / wall, median of %d | %s / %s | %s / %s |\n", q.name, runs,
			before[i].engine, before[i].wall.Round(time.Millisecond), after[i].engine, after[i].wall.Round(time.Millisecond))
	}
}

// writeDay writes hours of events at rate events/s as replicas consumers
// would: each replica receives every replicas-th event and writes, once a
// minute, one object per partition it holds. Inference logs are 4 of 5
// review events, verdicts 1 of 5, moderator feedback 1 of 50 more.
func writeDay(ctx context.Context, t *testing.T, dst *s3lake.Lake, day time.Time, hours, rate, replicas int) (events, objects int) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	seq := 0
	for m := range hours * 60 {
		minute := day.Add(time.Duration(m) * time.Minute)
		for r := range replicas {
			n := rate * 60 / replicas
			byPart := map[pipeline.LakePartition][]pipeline.LakeRecord{}
			for i := range n {
				seq++
				received := minute.Add(time.Duration(i) * time.Minute / time.Duration(n))
				// Events reach the consumer up to ~20 s after they happen.
				ev := benchEvent(seq, received.Add(-time.Duration(seq%20)*time.Second), received)
				p := pipeline.LakePartition{Type: ev.EventType, Hour: pipeline.LakeHour(ev.OccurredAt)}
				byPart[p] = append(byPart[p], ev)
			}
			events += n
			for p, recs := range byPart {
				objects++
				g.Go(func() error {
					obj, err := dst.EncodeEvents(p, []string{strconv.Itoa(r), recs[0].EventID}, recs)
					if err != nil {
						return err
					}
					return dst.Put(gctx, obj)
				})
			}
		}
	}
	require.NoError(t, g.Wait())
	return events, objects
}

var (
	benchStages = []pipeline.StageName{"triage", "extract", "vision", "judge"}
	benchCats   = []pipeline.Category{pipeline.CategoryClean, pipeline.CategoryPhishingLink}
)

// benchTables are the tables benchEvent writes to.
var benchTables = []string{"inference_log", "moderator_feedback", "verdict"}

func benchEvent(seq int, occurred, received time.Time) pipeline.LakeRecord {
	occurred = occurred.UTC().Truncate(time.Millisecond)
	id := uuid.NewSHA1(uuid.NameSpaceOID, []byte(strconv.Itoa(seq))).String()
	room := fmt.Sprintf("room-%06d", seq/5%200000)
	ws := occurred.Truncate(time.Hour).Add(-time.Hour)
	rec := pipeline.LakeRecord{ReceivedAt: received, LakeEvent: pipeline.LakeEvent{EventID: id, OccurredAt: occurred, SchemaVersion: pipeline.LakeEventSchemaVersion}}
	switch {
	case seq%50 == 0:
		rec.EventType = pipeline.EventModeratorFeedback
		rec.Payload = pipeline.ModeratorFeedback{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1",
			ModeratorID: fmt.Sprintf("mod-%02d", seq%17), VerdictLabel: pipeline.LabelAbusive, DecidedLabel: pipeline.LabelClean}
	case seq%5 == 0:
		rec.EventType = pipeline.EventVerdict
		rec.Payload = pipeline.VerdictEvent{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1",
			RunID: "run-" + ws.Format("2006010215"), Status: pipeline.StatusDone, Label: pipeline.LabelClean,
			Category: benchCats[seq%len(benchCats)], Severity: seq % 6, Confidence: float64(seq%1000) / 1000, Action: pipeline.ActionNone,
			Attempts: 1, LatencyMs: float64(seq % 30000)}
	default:
		rec.EventType = pipeline.EventInferenceLog
		rec.Payload = pipeline.InferenceLog{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1",
			RunID: "run-" + ws.Format("2006010215"), Stage: benchStages[seq%4], Pool: pipeline.PoolPrimary, Model: "qwen2.5-32b-instruct",
			Attempt: 1, Outcome: "ok", TTFTMillis: float64(seq % 900), LatencyMs: float64(seq % 9000), TokensIn: 2000 + seq%3000,
			TokensOut: seq % 300, PromptSHA256: fmt.Sprintf("%064x", seq), PromptChars: 8000 + seq%9000, Messages: seq % 60,
			Output: `{"risk":"low","categories":["clean"]}`}
	}
	return rec
}

// timeQuery runs q and returns the stand-in's engine time and the wall
// time until the client saw it succeed (polled every 10 ms).
func timeQuery(ctx context.Context, t *testing.T, client *awsathena.Client, q string, params ...string) (engine, wall time.Duration) {
	t0 := time.Now()
	out, err := client.StartQueryExecution(ctx, &awsathena.StartQueryExecutionInput{QueryString: aws.String(q),
		QueryExecutionContext: &types.QueryExecutionContext{Database: aws.String("chatguard")}, ExecutionParameters: params})
	require.NoError(t, err)
	for {
		qe, err := client.GetQueryExecution(ctx, &awsathena.GetQueryExecutionInput{QueryExecutionId: out.QueryExecutionId})
		require.NoError(t, err)
		switch qe.QueryExecution.Status.State {
		case types.QueryExecutionStateSucceeded:
			return time.Duration(aws.ToInt64(qe.QueryExecution.Statistics.EngineExecutionTimeInMillis)) * time.Millisecond, time.Since(t0)
		case types.QueryExecutionStateFailed, types.QueryExecutionStateCancelled:
			t.Fatalf("query failed: %s", aws.ToString(qe.QueryExecution.Status.StateChangeReason))
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}

// fixedNow is the wall clock reading t: the compaction covers the day's
// hours whatever today is, and its retries still wait in real time.
type fixedNow struct {
	clock.Clock
	t time.Time
}

func (c fixedNow) Now() time.Time { return c.t }
