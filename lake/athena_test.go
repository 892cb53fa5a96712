package lake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsathena "github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/lake"
	"github.com/chatguard/chatguard/pipeline"
	athenasrc "github.com/chatguard/chatguard/storage/athena"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

func TestMain(m *testing.M) { standin.Main(m) }

func ddlColumns(t *testing.T, table string) map[string]string {
	t.Helper()
	ddl, err := lake.TableDDL(table, "s3://lake/events/")
	require.NoError(t, err)
	require.NotContains(t, ddl, lake.LocationPlaceholder)
	require.Contains(t, ddl, "'storage.location.template' = 's3://lake/events/event_type="+table+"/dt=${dt}/hour=${hour}/'")
	require.Contains(t, ddl, "'projection.enabled' = 'true'")
	_, body, ok := strings.Cut(ddl, "CREATE EXTERNAL TABLE IF NOT EXISTS "+table+" (\n")
	require.True(t, ok)
	body, _, ok = strings.Cut(body, "\n)\nPARTITIONED BY")
	require.True(t, ok)
	cols := map[string]string{}
	for _, l := range strings.Split(body, "\n") {
		f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(l), ","))
		require.GreaterOrEqual(t, len(f), 2, "line %q", l)
		cols[f[0]] = strings.TrimSuffix(f[1], ",")
	}
	return cols
}

func parquetColumns(t *testing.T, row any) map[string]string {
	t.Helper()
	cols := map[string]string{}
	for _, f := range parquet.SchemaOf(row).Fields() {
		typ := f.Type()
		var hive string
		switch {
		case typ.LogicalType() != nil && isTimestamp(typ.LogicalType().Value):
			hive = "timestamp"
		case typ.Kind() == parquet.Boolean:
			hive = "boolean"
		case typ.Kind() == parquet.Int32:
			hive = "int"
		case typ.Kind() == parquet.Int64:
			hive = "bigint"
		case typ.Kind() == parquet.Double:
			hive = "double"
		case typ.Kind() == parquet.ByteArray:
			hive = "string"
		default:
			t.Fatalf("column %s has unmapped type %v", f.Name(), typ)
		}
		cols[f.Name()] = hive
	}
	return cols
}

func isTimestamp(v any) bool {
	_, ok := v.(*format.TimestampType)
	return ok
}

func TestDDLMatchesTheParquetSchema(t *testing.T) {
	t.Parallel()
	rows := map[string]any{
		"inference_log":      s3lake.InferenceLogRow{},
		"moderator_feedback": s3lake.ModeratorFeedbackRow{},
		"verdict":            s3lake.VerdictRow{},
		"shadow_verdict":     s3lake.ShadowVerdictRow{},
		"protective_action":  s3lake.ActionRow{},
	}
	for _, table := range lake.Tables {
		t.Run(table, func(t *testing.T) {
			t.Parallel()
			ddl := ddlColumns(t, table)
			require.Equal(t, parquetColumns(t, rows[table]), ddl)
			sel, err := lake.ViewSelect(table)
			require.NoError(t, err)
			for col := range ddl {
				require.Regexp(t, `\b`+col+`\b`, sel, "the view keeps %s", col)
			}
			require.Contains(t, sel, "PARTITION BY dt, hour, event_id")
		})
	}
	_, err := lake.TableDDL("verdict", "lake/events")
	require.Error(t, err)
}

// testLake writes events as the consumer would, plus a second copy of every
// fifth event in another object of its partition (a crash between write and
// delete), and serves it through a private Athena stand-in process.
type testLake struct {
	events []pipeline.LakeEvent
	dups   int
	client *awsathena.Client
}

var day0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func setup(t *testing.T) *testLake {
	t.Helper()
	evs := withUndos(s3laketest.Events(1200, 11, day0.Add(12*time.Hour), 30), 7) // over three days
	evs = append(evs, s3laketest.ShadowEvents(300, 11, day0.Add(12*time.Hour), 30)...)
	evs = append(evs, s3laketest.ActionEvents(400, 11, day0.Add(12*time.Hour), 30)...)
	return setupEvents(t, evs)
}

// withUndos appends to evs an undo of every nth moderator_feedback event,
// as the console sends it: 50 minutes later, so that some fall in the next
// hour's or day's partition.
func withUndos(evs []pipeline.LakeEvent, n int) []pipeline.LakeEvent {
	out := slices.Clone(evs)
	i := 0
	for _, ev := range evs {
		if ev.EventType != pipeline.EventModeratorFeedback {
			continue
		}
		if i++; i%n != 0 {
			continue
		}
		p := ev.Payload.(pipeline.ModeratorFeedback)
		p.Decision, p.ReversesEventID = pipeline.FeedbackUndo, ev.EventID
		out = append(out, pipeline.LakeEvent{EventID: uuid.NewSHA1(uuid.NameSpaceOID, []byte("undo/"+ev.EventID)).String(),
			EventType: ev.EventType, OccurredAt: ev.OccurredAt.Add(50 * time.Minute), SchemaVersion: ev.SchemaVersion, Payload: p})
	}
	return out
}

// inForce is evs without the undos and the decisions they undid: what
// moderator_feedback_dedup returns (each once).
func inForce(evs []pipeline.LakeEvent) []pipeline.LakeEvent {
	undone := map[string]bool{}
	for _, ev := range evs {
		if p, ok := ev.Payload.(pipeline.ModeratorFeedback); ok && p.Decision == pipeline.FeedbackUndo {
			undone[ev.EventID], undone[p.ReversesEventID] = true, true
		}
	}
	return slices.DeleteFunc(slices.Clone(evs), func(ev pipeline.LakeEvent) bool { return undone[ev.EventID] })
}

// setupEvents is setup over the given events.
func setupEvents(t *testing.T, evs []pipeline.LakeEvent) *testLake {
	t.Helper()
	dir := t.TempDir()
	first := time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC) // received after every event
	for _, ev := range evs {
		if !ev.OccurredAt.Before(first) {
			first = ev.OccurredAt.Add(time.Minute)
		}
	}
	parts := map[string][]pipeline.LakeRecord{}
	dupParts := map[string][]pipeline.LakeRecord{}
	l := &testLake{events: evs}
	for i, ev := range evs {
		d, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), first)
		require.NoError(t, err)
		p := s3lake.PartitionPath(d.EventType, pipeline.LakeHour(d.OccurredAt))
		parts[p] = append(parts[p], d)
		if i%5 == 0 {
			d.ReceivedAt = first.Add(time.Minute)
			dupParts[p] = append(dupParts[p], d)
			l.dups++
		}
	}
	write := func(p, name string, evs []pipeline.LakeRecord) {
		full := filepath.Join(dir, "events", filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(full, 0o755))
		var buf bytes.Buffer
		require.NoError(t, s3lake.EncodeParquet(&buf, evs[0].EventType, evs))
		require.NoError(t, os.WriteFile(filepath.Join(full, name), buf.Bytes(), 0o644))
	}
	for p, evs := range parts {
		write(p, "part-a.parquet", evs)
	}
	for p, evs := range dupParts {
		write(p, "part-b.parquet", evs)
	}
	// The Athena stand-in (DuckDB over the lake folder) as a process of
	// this test: deploy/local is a module of its own.
	sim := standin.StartAthena(t, standin.AthenaOptions{LakeDir: dir})
	l.client = awsathena.New(awsathena.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(sim.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
	})
	return l
}

func (l *testLake) run(t *testing.T, sql string, params ...string) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src, err := athenasrc.New(l.client, athenasrc.DefaultConfig())
	require.NoError(t, err)
	rows, err := src.Rows(ctx, sql, params)
	require.NoError(t, err)
	return rows[1:] // header
}

func (l *testLake) query(t *testing.T, name string, params ...string) [][]string {
	t.Helper()
	q, err := lake.Query(name)
	require.NoError(t, err)
	q, err = lake.WithDedupViews(q)
	require.NoError(t, err)
	return l.run(t, lake.ForDuckDB(q), params...)
}

func TestDedupViewsAndAnalystQueries(t *testing.T) {
	t.Parallel()
	l := setup(t)
	// What the views return: each event once, and of the moderators'
	// decisions only those in force (withUndos undid some).
	byType, written := map[pipeline.EventType][]pipeline.LakeEvent{}, map[pipeline.EventType]int{}
	for _, ev := range inForce(l.events) {
		byType[ev.EventType] = append(byType[ev.EventType], ev)
	}
	for _, ev := range l.events {
		written[ev.EventType]++
	}
	require.Less(t, len(byType[pipeline.EventModeratorFeedback])+50, written[pipeline.EventModeratorFeedback], "the sample undoes decisions")
	days := []string{"'2026-11-01'", "'2026-11-03'"}

	t.Run("dedup", func(t *testing.T) {
		total := 0
		for _, table := range lake.Tables {
			raw := l.run(t, "SELECT count(*), count(DISTINCT event_id) FROM "+table)
			q, err := lake.WithDedupViews("SELECT count(*), count(DISTINCT event_id) FROM " + table + "_dedup")
			require.NoError(t, err)
			dedup := l.run(t, q)
			n := strconv.Itoa(len(byType[pipeline.EventType(table)]))
			require.Equal(t, []string{n, n}, dedup[0], "%s_dedup returns each event (in force) once", table)
			require.Equal(t, strconv.Itoa(written[pipeline.EventType(table)]), raw[0][1])
			c, _ := strconv.Atoi(raw[0][0])
			total += c
		}
		require.Equal(t, len(l.events)+l.dups, total, "the raw tables hold the duplicates")
	})

	t.Run("verdicts by label and category per day", func(t *testing.T) {
		want := map[string]int{}
		for _, ev := range byType[pipeline.EventVerdict] {
			p := ev.Payload.(pipeline.VerdictEvent)
			want[fmt.Sprintf("%s|%s|%s", ev.OccurredAt.Format(time.DateOnly), p.Label, p.Category)]++
		}
		got := map[string]int{}
		for _, r := range l.query(t, "verdicts_by_label_category_day", days...) {
			n, err := strconv.Atoi(r[3])
			require.NoError(t, err)
			got[r[0]+"|"+r[1]+"|"+r[2]] = n
		}
		require.Equal(t, want, got)
		narrow := l.query(t, "verdicts_by_label_category_day", "'2026-11-02'", "'2026-11-02'")
		require.NotEmpty(t, narrow)
		for _, r := range narrow {
			require.Equal(t, "2026-11-02", r[0], "the day filter applies")
		}
	})

	t.Run("moderator agreement", func(t *testing.T) {
		type agg struct{ n, label, both int }
		want := map[string]*agg{}
		for _, ev := range byType[pipeline.EventModeratorFeedback] {
			p := ev.Payload.(pipeline.ModeratorFeedback)
			k := ev.OccurredAt.Format(time.DateOnly) + "|" + string(p.VerdictLabel)
			if want[k] == nil {
				want[k] = &agg{}
			}
			want[k].n++
			if p.DecidedLabel == p.VerdictLabel {
				want[k].label++
				if p.DecidedCategory == p.VerdictCategory {
					want[k].both++
				}
			}
		}
		rows := l.query(t, "moderator_agreement", days...)
		require.Len(t, rows, len(want))
		for _, r := range rows {
			w := want[r[0]+"|"+r[1]]
			require.NotNil(t, w, "row %v", r)
			require.Equal(t, strconv.Itoa(w.n), r[2])
			requireClose(t, float64(w.label)/float64(w.n), r[3], 1e-9)
			requireClose(t, float64(w.both)/float64(w.n), r[4], 1e-9)
		}
	})

	t.Run("shadow agreement per day", func(t *testing.T) { testShadowAgreement(t, l, byType[pipeline.EventShadowVerdict], days) })
	t.Run("shadow pairs", func(t *testing.T) { testShadowPairs(t, l, byType[pipeline.EventShadowVerdict], days) })
	t.Run("actions by rule per day", func(t *testing.T) { testActionsByRule(t, l, byType[pipeline.EventProtectiveAction], days) })
	t.Run("no raw account id in protective_action", func(t *testing.T) { testActionsHoldNoRawIDs(t, l) })
	t.Run("cost per 1000 reviews per day", func(t *testing.T) { testCostPer1000(t, l, byType[pipeline.EventInferenceLog], days) })
	t.Run("verdicts by account history per day", func(t *testing.T) { testByAccountHistory(t, l, byType[pipeline.EventVerdict], days) })
	t.Run("moderator precision per category and week", func(t *testing.T) {
		testModeratorPrecision(t, l, byType[pipeline.EventModeratorFeedback], days)
	})

	t.Run("fallback rate and latency per hour", func(t *testing.T) {
		type agg struct {
			n, fallback int
			lat         []float64
		}
		want := map[string]*agg{}
		for _, ev := range byType[pipeline.EventInferenceLog] {
			p := ev.Payload.(pipeline.InferenceLog)
			k := ev.OccurredAt.Truncate(time.Hour).Format("2006-01-02 15:04:05.000") + "|" + string(p.Stage)
			if want[k] == nil {
				want[k] = &agg{}
			}
			want[k].n++
			if p.Pool == pipeline.PoolFallback {
				want[k].fallback++
			}
			if p.Outcome == "ok" {
				want[k].lat = append(want[k].lat, p.LatencyMs)
			}
		}
		rows := l.query(t, "fallback_rate_latency_hour", days...)
		require.Len(t, rows, len(want))
		for _, r := range rows {
			w := want[r[0]+"|"+r[1]]
			require.NotNil(t, w, "row %v", r)
			require.Equal(t, strconv.Itoa(w.n), r[2])
			requireClose(t, float64(w.fallback)/float64(w.n), r[3], 1e-9)
			if len(w.lat) == 0 {
				require.Empty(t, r[5])
				continue
			}
			sort.Float64s(w.lat)
			p50, p95 := parseF(t, r[5]), parseF(t, r[6])
			lo, hi := w.lat[0], w.lat[len(w.lat)-1]
			require.True(t, lo <= p50 && p50 <= p95 && p95 <= hi, "p50 %v p95 %v within [%v, %v]", p50, p95, lo, hi)
			// Approximate percentiles: within the neighbouring ranks.
			require.True(t, near(w.lat, 0.5, p50), "p50 %v of %v", p50, w.lat)
			require.True(t, near(w.lat, 0.95, p95), "p95 %v of %v", p95, w.lat)
		}
	})
}

// near reports whether v lies between the sorted values at ranks q±0.15.
func near(sorted []float64, q, v float64) bool {
	at := func(q float64) float64 {
		i := int(math.Round(q * float64(len(sorted)-1)))
		return sorted[max(0, min(len(sorted)-1, i))]
	}
	return at(q-0.15) <= v && v <= at(q+0.15)
}

func parseF(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err, "%q", s)
	return f
}

func requireClose(t *testing.T, want float64, got string, tol float64) {
	t.Helper()
	require.InDelta(t, want, parseF(t, got), tol)
}

func TestQueriesAreParameterisedReads(t *testing.T) {
	t.Parallel()
	for _, name := range lake.Queries {
		q, err := lake.Query(name)
		require.NoError(t, err)
		require.Equal(t, 2, strings.Count(q, "?"), "%s takes first and last day", name)
		require.Contains(t, q, "_dedup", "%s reads the dedup views", name)
		require.True(t, slices.ContainsFunc(strings.Split(q, "\n"), func(l string) bool { return strings.HasPrefix(l, "SELECT") }))
	}
}

// testByAccountHistory checks verdicts_by_account_history_day against the
// generated verdicts (some shown history lines, some a timed-out lookup,
// most none), and that the view returns the account_history column as the
// consumer wrote it.
func testByAccountHistory(t *testing.T, l *testLake, verdicts []pipeline.LakeEvent, days []string) {
	want := map[string]int{}
	shown := 0
	for _, ev := range verdicts {
		p := ev.Payload.(pipeline.VerdictEvent)
		status, lines := "none", false
		if h := p.AccountHistory; h != nil {
			status, lines = string(h.Status), len(h.Lines) > 0
		}
		if lines {
			shown++
		}
		want[fmt.Sprintf("%s|%s|%t|%s", ev.OccurredAt.Format(time.DateOnly), status, lines, p.Label)]++
	}
	require.NotZero(t, shown, "the generator shows some verdicts history")
	got := map[string]int{}
	for _, r := range l.query(t, "verdicts_by_account_history_day", days...) {
		n, err := strconv.Atoi(r[4])
		require.NoError(t, err)
		got[strings.Join(r[:4], "|")] = n
	}
	require.Equal(t, want, got)

	q, err := lake.WithDedupViews("SELECT account_history FROM verdict_dedup WHERE account_history LIKE '%overturned%'")
	require.NoError(t, err)
	rows := l.run(t, q)
	require.Len(t, rows, shown, "each shown history has an overturned line, once through the view")
	var h pipeline.HistorySeen
	require.NoError(t, json.Unmarshal([]byte(rows[0][0]), &h))
	require.Equal(t, pipeline.HistoryOK, h.Status)
	require.True(t, h.Lines[1].Overturned)
}
