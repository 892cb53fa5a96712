package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "env")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func TestReadStackEnv(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		want       StackEnv
		err        string
	}{
		{name: "quoted values and comments", body: "# header\n\nA='x=y'\nexport B='two words'\nC=bare\n",
			want: StackEnv{"A": "x=y", "B": "two words", "C": "bare"}},
		{name: "empty value", body: "A=''\n", want: StackEnv{"A": ""}},
		{name: "malformed line", body: "A='1'\nnot a pair\n", err: "malformed line"},
		{name: "only comments", body: "# nothing\n", err: "is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ReadStackEnv(writeFile(t, tc.body))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		_, err := ReadStackEnv(filepath.Join(t.TempDir(), "none"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

func FuzzReadStackEnv(f *testing.F) {
	f.Add("A='1'\nB=2\n")
	f.Add("# c\nexport X=''\n")
	f.Add("=\n'\n")
	f.Fuzz(func(t *testing.T, body string) {
		p := filepath.Join(t.TempDir(), "env")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		env, err := ReadStackEnv(p)
		if err != nil {
			return
		}
		require.NotEmpty(t, env)
		for k := range env {
			require.NotEmpty(t, k)
			require.NotContains(t, k, "=")
		}
	})
}

func TestStackEnvRequireAndAlive(t *testing.T) {
	t.Parallel()
	env := StackEnv{"A": "1", "CHATGUARD_STACK_PID": fmt.Sprint(os.Getpid())}
	v, err := env.Require("A", "CHATGUARD_STACK_PID")
	require.NoError(t, err)
	require.Equal(t, "1", v[0])
	_, err = env.Require("A", "B", "C")
	require.EqualError(t, err, "stack env: missing B, C")
	require.True(t, env.Alive(), "this process is alive")
	require.False(t, StackEnv{"CHATGUARD_STACK_PID": "0"}.Alive())
	require.False(t, StackEnv{}.Alive())
}

func TestChildEnvDropsStrayVariablesAndLetsOverridesWin(t *testing.T) {
	t.Parallel()
	base := []string{"PATH=/bin", "CHATGUARD_MYSQL_DSN=stray", "AWS_PROFILE=prod", "HOME=/h"}
	stack := StackEnv{"CHATGUARD_MYSQL_DSN": "stack", "AWS_REGION": "us-east-1", "CHATGUARD_LAKE_BUCKET": "lake"}
	got := childEnv(base, stack, map[string]string{"CHATGUARD_MYSQL_DSN": "run", "CHATGUARD_ADMIN_ADDR": "127.0.0.1:0"})
	require.Equal(t, []string{
		"PATH=/bin", "HOME=/h",
		"AWS_REGION=us-east-1", "CHATGUARD_LAKE_BUCKET=lake",
		"CHATGUARD_ADMIN_ADDR=127.0.0.1:0", "CHATGUARD_MYSQL_DSN=run",
	}, got)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := Config{Root: "/r"}.WithDefaults(time.Date(2026, 11, 30, 3, 4, 5, 0, time.UTC))
	require.NoError(t, valid.Validate())
	require.Equal(t, "demo-20261130T030405Z", valid.RunID)
	require.Equal(t, "/r/.stack/env", valid.EnvFile)
	require.Equal(t, "/r/.stack/demo/demo-20261130T030405Z", valid.LogDir)
	require.Equal(t, 2, valid.Workers)

	at := time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		mut  func(*Config)
		want []string
	}{
		{"database with a quote", func(c *Config) { c.Database = "x'; DROP" }, []string{"database"}},
		{"run id with a space", func(c *Config) { c.RunID = "a b" }, []string{"run id"}},
		{"half a window", func(c *Config) { c.WindowStart = at }, []string{"go together"}},
		{"backwards window", func(c *Config) { c.WindowStart, c.WindowEnd = at, at }, []string{"must be before"}},
		{"prefix without slash", func(c *Config) { c.LakePrefix = "events" }, []string{"lake prefix"}},
		{"same prefixes", func(c *Config) { c.ErrorsPrefix = c.LakePrefix }, []string{"must differ"}},
		{"every problem at once", func(c *Config) { c.Workers, c.Timeout, c.Root = 9, -1, "" },
			[]string{"workers 9", "timeout must be positive", "root is required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := valid
			tc.mut(&c)
			err := c.Validate()
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	cases := []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},
		{[]float64{7}, 95, 7},
		{xs, 50, 5},
		{xs, 95, 10},
		{xs, 10, 1},
		{xs, 0, 1},
		{xs, 100, 10},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, Percentile(tc.xs, tc.p), "p%v of %v", tc.p, tc.xs)
	}
	require.Equal(t, float64(5), xs[0], "the input is not sorted in place")
}

func TestMissingLogs(t *testing.T) {
	t.Parallel()
	stages := []StageRow{{RoomID: "r1", Stage: "triage", Attempts: 2}, {RoomID: "r1", Stage: "judge", Attempts: 1}, {RoomID: "r2", Stage: "triage", Attempts: 0}}
	view := LakeView{Logs: map[string]s3lake.InferenceLogRow{
		"e1": {RoomID: "r1", Stage: "triage", Attempt: 1},
		"e2": {RoomID: "r1", Stage: "judge", Attempt: 1},
		"e3": {RoomID: "r9", Stage: "triage", Attempt: 2},
	}}
	require.Equal(t, []StageCall{{RoomID: "r1", Stage: "triage", Attempt: 2}}, MissingLogs(stages, view))
	view.Logs["e4"] = s3lake.InferenceLogRow{RoomID: "r1", Stage: "triage", Attempt: 2}
	require.Empty(t, MissingLogs(stages, view))
	require.Equal(t, []StageCall{{RoomID: "r9", Stage: "triage", Attempt: 2}}, ExtraLogs(stages, view), "a call no stage row records")
	view.Logs["e5"] = s3lake.InferenceLogRow{RoomID: "r1", Stage: "judge", Attempt: 1}
	require.Equal(t, []StageCall{{RoomID: "r1", Stage: "judge", Attempt: 1}, {RoomID: "r9", Stage: "triage", Attempt: 2}}, ExtraLogs(stages, view), "a second row of one call")
}

func sampleRun() ([]VerdictRow, []StageRow, map[string]sampledata.Truth) {
	vs := []VerdictRow{
		{RoomID: "a", Status: "done", Label: "abusive", Category: "phishing_link"},
		{RoomID: "b", Status: "done", Label: "clean", Category: "clean", EarlyExit: true},
		{RoomID: "c", Status: "done", Label: "abusive", Category: "spam", Fallback: true},
		{RoomID: "d", Status: "done", Label: "clean", Category: "clean", EarlyExit: true},
		{RoomID: "e", Status: "expired"},
		{RoomID: "f", Status: "failed"},
	}
	ss := []StageRow{
		{RoomID: "a", Stage: "triage", Pool: "primary", Attempts: 1, TTFTMs: 50, LatencyMs: 100},
		{RoomID: "a", Stage: "judge", Pool: "primary", Attempts: 2, TTFTMs: 60, LatencyMs: 300},
		{RoomID: "b", Stage: "triage", Pool: "primary", Attempts: 1, TTFTMs: 40, LatencyMs: 200},
		{RoomID: "c", Stage: "triage", Pool: "fallback", Attempts: 1, LatencyMs: 900},
	}
	truth := map[string]sampledata.Truth{
		"a": {Label: pipeline.LabelAbusive, Category: pipeline.CategoryPhishingLink},
		"b": {Label: pipeline.LabelSuspicious, Category: pipeline.CategoryOffPlatform},
		"c": {Label: pipeline.LabelClean, Category: pipeline.CategoryClean, HardNegative: true},
		"d": {Label: pipeline.LabelClean, Category: pipeline.CategoryClean, HardNegative: true},
	}
	return vs, ss, truth
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	vs, ss, truth := sampleRun()
	view := LakeView{Logs: map[string]s3lake.InferenceLogRow{
		"1": {Outcome: "ok", Pool: "primary"}, "2": {Outcome: "invalid", Pool: "primary"}, "3": {Outcome: "ok", Pool: "fallback"},
	}}
	s := Summarize(vs, ss, view, truth)
	require.Equal(t, 6, s.Verdicts)
	require.Equal(t, map[string]int{"done": 4, "expired": 1, "failed": 1}, s.ByStatus)
	require.Equal(t, []Count{{"abusive", "phishing_link", 1}, {"abusive", "spam", 1}, {"clean", "clean", 2}}, s.ByLabel)
	require.Equal(t, 2, s.EarlyExits)
	require.Equal(t, 3, s.NoModelCall, "d, e, f have no stage rows")
	require.Equal(t, 1, s.FallbackVerdicts)
	require.Equal(t, 5, s.StageCalls)
	require.Equal(t, map[string]int{"ok": 2, "invalid": 1}, s.LogsByOutcome)
	require.Equal(t, map[string]int{"primary": 2, "fallback": 1}, s.LogsByPool)

	require.Len(t, s.Stages, 2, "stages in pipeline order, only those that ran")
	tri := s.Stages[0]
	require.Equal(t, "triage", tri.Stage)
	require.Equal(t, StageStats{Stage: "triage", Rows: 3, Attempts: 3, Fallback: 1, LatencyP50: 200, LatencyP95: 900, TTFTP50: 40, TTFTP95: 50, TTFTSamples: 2}, tri)
	require.Equal(t, "judge", s.Stages[1].Stage)

	a := s.Agreement
	require.Equal(t, 4, a.Compared)
	require.Equal(t, 2, a.LabelMatch, "a and d")
	require.Equal(t, 2, a.CategoryMatch)
	require.Equal(t, [4]int{1, 1, 1, 1}, [4]int{a.TruePositive, a.FalsePositive, a.FalseNegative, a.TrueNegative})
	require.Equal(t, 2, a.HardNegatives)
	require.Equal(t, 1, a.HardNegativesClean)
	require.Equal(t, 1, a.Confusion["suspicious"]["clean"])
	require.Equal(t, 1, a.Confusion["clean"]["abusive"])
}

func TestPrintSaysWhatAgreementMeasuresAndWhereResultsAre(t *testing.T) {
	t.Parallel()
	vs, ss, truth := sampleRun()
	rep := &Report{
		RunID: "demo-x", WindowStart: time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC), WindowEnd: time.Date(2026, 11, 2, 20, 0, 0, 0, time.UTC),
		Database: "chatguard_demo", MySQLAddr: "127.0.0.1:3306", LakeBucket: "lake", LakeDir: "/s/.stack/s3/buckets/lake",
		Lake:        LakeView{Objects: []string{"events/event_type=inference_log/dt=2026-11-30/hour=03/part-1.parquet", "events/event_type=inference_log/dt=2026-11-30/hour=03/part-2.parquet"}},
		Queues:      Queues{Review: "http://q/000/demo-x-review"},
		FinalDepths: map[string]Depth{"http://q/000/demo-x-review": {}},
		Children:    []Child{{Name: "worker-1", ExitCode: 0}},
		LogDir:      "/s/.stack/demo/demo-x", StackPID: 7,
	}
	rep.Summary = Summarize(vs, ss, LakeView{}, truth)
	var b bytes.Buffer
	rep.Print(&b)
	out := b.String()
	for _, want := range []string{
		"Verdicts: 6 (done 4, expired 1, failed 1, stopped 0)",
		"measure those rules against the sample generator's labels",
		"label agrees:    2/4 (50.0%)",
		"mysql -h 127.0.0.1 -P 3306 -u root chatguard_demo",
		"run_id = 'demo-x'",
		"s3://lake/events/event_type=inference_log/dt=2026-11-30/hour=03/\n",
		"demo-x-review 0",
		"worker-1 exit 0",
		"was running before the demo and still is",
	} {
		require.Contains(t, out, want)
	}
	require.Equal(t, 1, strings.Count(out, "s3://lake/"), "one line per partition")
}

// memLake is an in-memory lake that counts reads.
type memLake struct {
	mu    sync.Mutex
	objs  map[string][]byte
	reads map[string]int
}

func (m *memLake) List(_ context.Context, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

func (m *memLake) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads[key]++
	return m.objs[key], nil
}

func (m *memLake) put(t *testing.T, key string, typ pipeline.EventType, evs ...pipeline.LakeRecord) {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, s3lake.EncodeParquet(&b, typ, evs))
	m.mu.Lock()
	m.objs[key] = b.Bytes()
	m.mu.Unlock()
}

func logEvent(id, run, room string, attempt int, at time.Time) pipeline.LakeRecord {
	return pipeline.LakeRecord{ReceivedAt: at, LakeEvent: pipeline.LakeEvent{EventID: id, EventType: pipeline.EventInferenceLog, OccurredAt: at, SchemaVersion: 1,
		Payload: pipeline.InferenceLog{RoomID: room, RunID: run, Stage: pipeline.StageTriage, Pool: pipeline.PoolPrimary, Attempt: attempt, Outcome: "ok"}}}
}

func TestLakeReaderReadsEachObjectOnceAndKeepsOnlyItsRun(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 3, 10, 0, 0, time.UTC)
	m := &memLake{objs: map[string][]byte{}, reads: map[string]int{}}
	part := "p/" + s3lake.PartitionPath(pipeline.EventInferenceLog, at)
	m.put(t, part+"a.parquet", pipeline.EventInferenceLog, logEvent("1", "run", "r1", 1, at), logEvent("2", "other", "r2", 1, at))
	m.put(t, "p/"+s3lake.PartitionPath(pipeline.EventInferenceLog, at.Add(-3*time.Hour))+"old.parquet", pipeline.EventInferenceLog, logEvent("9", "run", "r9", 1, at))
	m.put(t, "p/"+s3lake.PartitionPath(pipeline.EventVerdict, at)+"v.parquet", pipeline.EventVerdict, pipeline.LakeRecord{ReceivedAt: at, LakeEvent: pipeline.LakeEvent{
		EventID: "v1", EventType: pipeline.EventVerdict, OccurredAt: at, SchemaVersion: 1, Payload: pipeline.VerdictEvent{RoomID: "r1", RunID: "run", Status: pipeline.StatusDone}}})

	lr := newLakeReader(m, "p/", "run", at.Add(-time.Minute))
	ctx := context.Background()
	require.NoError(t, lr.refresh(ctx, at))
	require.Len(t, lr.view.Logs, 1, "another run's row and an hour before the run are left out")
	require.Len(t, lr.view.Verdicts, 1)

	// A second copy of event 1 (a consumer crash between write and delete)
	// in a new object, and another row of the run.
	m.put(t, part+"b.parquet", pipeline.EventInferenceLog, logEvent("1", "run", "r1", 1, at), logEvent("3", "run", "r1", 2, at))
	require.NoError(t, lr.refresh(ctx, at.Add(time.Hour)))
	require.Len(t, lr.view.Logs, 2)
	require.Equal(t, 1, lr.view.Copies)
	require.Equal(t, []string{part + "a.parquet", part + "b.parquet", "p/" + s3lake.PartitionPath(pipeline.EventVerdict, at) + "v.parquet"}, lr.view.Objects)
	for k, n := range m.reads {
		require.Equal(t, 1, n, "%s read once", k)
	}
	require.Zero(t, m.reads["p/"+s3lake.PartitionPath(pipeline.EventInferenceLog, at.Add(-3*time.Hour))+"old.parquet"])
}

func TestRunWithoutAStackFailsAtOnceNamingTheFix(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"no env file":                       "",
		"stale env file, its stack is gone": "CHATGUARD_STACK_PID='999999999'\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			env := filepath.Join(dir, "env")
			if body != "" {
				require.NoError(t, os.WriteFile(env, []byte(body), 0o644))
			}
			var out bytes.Buffer
			rep, err := Run(context.Background(), Config{Root: dir, EnvFile: env, LogDir: filepath.Join(dir, "logs"), Out: &out})
			require.ErrorContains(t, err, "no local stack is running")
			require.ErrorContains(t, err, "make stack-up")
			require.Empty(t, rep.Children, "nothing was started")
			require.False(t, rep.StackStarted)
		})
	}
}
