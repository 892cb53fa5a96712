package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/demo"
	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// fixture is one isolated run's resources on the shared stack: its own
// database, lake prefix, binaries and logs, all removed when the test ends.
type fixture struct {
	cfg    demo.Config
	db     *sql.DB
	s3     *s3.Client
	bucket string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	stacktest.Load(t)
	// The repository root: the workspace that builds the binaries.
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.work"))
	envFile := os.Getenv(stacktest.EnvFileVar)
	if envFile == "" {
		envFile = filepath.Join(root, ".stack", "env")
	}
	f := &fixture{s3: stacktest.S3(t), bucket: stacktest.LakeBucket(t)}
	db, dsn := stacktest.MySQL(t)
	f.db = db
	dbCfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)

	id := strings.ReplaceAll(stacktest.Unique("e2e"), "-", "_")
	prefix := id + "/"
	t.Cleanup(func() { f.deletePrefix(t, prefix) })
	var build []string
	if raceEnabled {
		build = []string{"-race"}
	}
	f.cfg = demo.Config{
		Root: root, EnvFile: envFile, BinDir: t.TempDir(), LogDir: t.TempDir(), BuildFlags: build,
		Database: dbCfg.DBName, RunID: id,
		LakePrefix: prefix + "events/", ErrorsPrefix: prefix + "errors/",
		Workers: 2, FlushAge: 3 * time.Second, Timeout: 8 * time.Minute, Progress: 2 * time.Second,
		Out: &lineLogger{t: t},
	}
	return f
}

// deletePrefix removes the run's lake objects.
func (f *fixture) deletePrefix(t *testing.T, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys, err := s3lake.NewStore(f.s3, f.bucket, s3lake.DefaultPartSize).List(ctx, prefix)
	if err != nil {
		t.Logf("cleanup: list %s: %v", prefix, err)
		return
	}
	for _, k := range keys {
		if _, err := f.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(f.bucket), Key: aws.String(k)}); err != nil {
			t.Logf("cleanup: delete %s: %v", k, err)
		}
	}
}

// lineLogger sends the demo's output to the test log, a line at a time.
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			return len(p), nil
		}
		l.t.Log(strings.TrimRight(line, "\n"))
	}
}

// roomsInWindow reads the sample lake's messages directly, apart from the
// batch's Athena query: the rooms with a message in [start, end).
func roomsInWindow(t *testing.T, start, end time.Time) []string {
	t.Helper()
	msgs, err := sampledata.LoadMessages(stacktest.LakeDir(t))
	require.NoError(t, err)
	var rooms []string
	for room, ms := range msgs {
		for _, m := range ms {
			if !m.SentAt.Before(start) && m.SentAt.Before(end) {
				rooms = append(rooms, room)
				break
			}
		}
	}
	slices.Sort(rooms)
	return rooms
}

// lakeLogs reads every inference-log row under prefix, for the run only,
// independently of the demo's own reader.
func (f *fixture) lakeLogs(t *testing.T, prefix, runID string) (logs []s3lake.InferenceLogRow, verdictRooms map[string]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := s3lake.NewStore(f.s3, f.bucket, s3lake.DefaultPartSize)
	keys, err := store.List(ctx, prefix)
	require.NoError(t, err)
	seen := map[string]bool{}
	verdictRooms = map[string]int{}
	for _, k := range keys {
		b, err := store.Get(ctx, k)
		require.NoError(t, err)
		switch {
		case strings.Contains(k, "/event_type=inference_log/"):
			rows, err := s3lake.ReadRows[s3lake.InferenceLogRow](b)
			require.NoError(t, err, k)
			for _, r := range rows {
				require.Equal(t, runID, r.RunID, "only this run writes under %s", prefix)
				if !seen[r.EventID] {
					seen[r.EventID] = true
					logs = append(logs, r)
				}
			}
		case strings.Contains(k, "/event_type=verdict/"):
			rows, err := s3lake.ReadRows[s3lake.VerdictRow](b)
			require.NoError(t, err, k)
			for _, r := range rows {
				if !seen[r.EventID] {
					seen[r.EventID] = true
					verdictRooms[r.RoomID]++
				}
			}
		default:
			t.Errorf("unexpected object %s (an invalid message?)", k)
		}
	}
	return logs, verdictRooms
}

// leftovers lists the processes whose command line starts in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var out []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		if argv0, _, _ := bytes.Cut(b, []byte{0}); strings.HasPrefix(string(argv0), dir+string(filepath.Separator)) {
			out = append(out, p+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// TestPipelineEndToEnd runs batch over the sample window, two workers and
// the consumer as built binaries until the review queue is drained, stops
// them with SIGTERM, and checks the outcome against the sample lake, MySQL
// and the lake, each read here on its own.
func TestPipelineEndToEnd(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	rep, err := demo.Run(ctx, f.cfg)
	require.NoError(t, err)

	// No process is left behind, and each exited 0 by itself.
	require.Empty(t, leftovers(t, f.cfg.BinDir), "processes of the run's binaries still running")
	names := map[string]bool{}
	for _, c := range rep.Children {
		names[c.Name] = true
		require.Equal(t, 0, c.ExitCode, "%s exit status; log %s", c.Name, c.Log)
		require.False(t, c.Killed, "%s needed SIGKILL", c.Name)
		require.True(t, strings.HasPrefix(c.Path, f.cfg.BinDir), "%s ran the binary built for the test", c.Name)
	}
	require.Equal(t, map[string]bool{"batch": true, "worker-1": true, "worker-2": true, "consumer": true}, names)
	require.False(t, rep.StackStarted, "the test uses the running stack")

	// Every room the batch published has exactly one verdict.
	start, end := stacktest.SampleWindow(t)
	require.True(t, rep.WindowStart.Equal(start) && rep.WindowEnd.Equal(end), "the sample window")
	want := roomsInWindow(t, start, end)
	require.Greater(t, len(want), 50, "the sample window has rooms")
	require.Equal(t, "succeeded", rep.Batch.Status)
	require.Equal(t, int64(len(want)), rep.Batch.Published)
	require.Zero(t, rep.Batch.Failed)
	rows, err := f.db.QueryContext(ctx, "SELECT room_id, COUNT(*), MIN(status) FROM verdicts WHERE run_id = ? GROUP BY room_id ORDER BY room_id", rep.RunID)
	require.NoError(t, err)
	var got []string
	statuses := map[string]int{}
	for rows.Next() {
		var room, status string
		var n int
		require.NoError(t, rows.Scan(&room, &n, &status))
		require.Equal(t, 1, n, "verdicts of room %s", room)
		got = append(got, room)
		statuses[status]++
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	require.Equal(t, want, got, "one verdict per published room, and no other")
	var total int
	require.NoError(t, f.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM verdicts").Scan(&total))
	require.Equal(t, len(want), total, "nothing else in the run's database")
	t.Logf("%d rooms, verdict statuses %v", len(want), statuses)

	// Every stage call has its inference-log row in the lake: a stage row
	// with attempts = n was n model calls, logged as attempts 1..n.
	logs, verdictRooms := f.lakeLogs(t, f.cfg.LakePrefix, rep.RunID)
	type call struct {
		room, stage string
		attempt     int
	}
	logged := map[call]int{}
	for _, l := range logs {
		logged[call{l.RoomID, l.Stage, int(l.Attempt)}]++
	}
	srows, err := f.db.QueryContext(ctx, "SELECT v.room_id, s.stage, s.attempts FROM verdict_stages s JOIN verdicts v ON v.id = s.verdict_id")
	require.NoError(t, err)
	calls, stageRows := 0, 0
	for srows.Next() {
		var room, stage string
		var n int
		require.NoError(t, srows.Scan(&room, &stage, &n))
		stageRows++
		require.GreaterOrEqual(t, n, 1, "a stage row of room %s records at least one call", room)
		for a := 1; a <= n; a++ {
			calls++
			require.GreaterOrEqual(t, logged[call{room, stage, a}], 1, "inference log of room %s stage %s attempt %d", room, stage, a)
		}
	}
	require.NoError(t, srows.Err())
	require.NoError(t, srows.Close())
	require.Greater(t, stageRows, len(want)/2, "most rooms reached a model")
	require.GreaterOrEqual(t, len(logs), calls)
	for _, l := range logs {
		require.True(t, slices.Contains(want, l.RoomID), "inference log of room %s, which was not published", l.RoomID)
	}
	for _, room := range want {
		require.GreaterOrEqual(t, verdictRooms[room], 1, "verdict event of room %s in the lake", room)
	}
	t.Logf("%d stage rows, %d model calls, %d inference-log rows in the lake (%d beyond the recorded calls: attempts of jobs that were retried)",
		stageRows, calls, len(logs), len(logs)-calls)
	require.Empty(t, rep.Missing, "the demo's own check agrees")
	if len(rep.Extra) > 0 {
		// At-least-once: a job retried after a failed save runs its stages
		// again; the worker logs say why (outcome "retry"). Not a failure.
		t.Logf("inference logs beyond the recorded calls: %v", rep.Extra)
	}

	// The queues end empty, read after every process exited.
	q := rep.Queues
	require.Len(t, rep.FinalDepths, 4)
	for _, u := range []string{q.Review, q.ReviewDLQ, q.Feedback, q.FeedbackDLQ} {
		d, ok := rep.FinalDepths[u]
		require.True(t, ok, u)
		require.Zero(t, d.Total(), "%s holds %+v", u, d)
	}

	// The sample window's scam ring is a campaign over several accounts
	// and its shop a repeat sender: the demo ran the campaign join.
	c := rep.Campaigns
	require.NotEmpty(t, c.Campaigns, "a campaign")
	require.GreaterOrEqual(t, len(c.Campaigns[0].Accounts), 2, "over several accounts: %+v", c.Campaigns[0])
	require.NotEmpty(t, c.Repeats, "a repeat sender")
	require.Equal(t, sampledata.ShopAccount, c.Repeats[0].Account, "the shop")
	var members int
	require.NoError(t, f.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM campaign_members WHERE campaign = ?", c.Campaigns[0].ID).Scan(&members))
	require.Greater(t, members, 1, "the join put the ring's marks in one campaign")

	// The summary the demo printed covers what the issue asks for.
	var b bytes.Buffer
	rep.Print(&b)
	for _, s := range []string{"Verdicts: ", "early exits", "fallback", "TTFT p50", "expired", "failed",
		"They say nothing about a model", "SELECT status, label, category", "repeat sender " + sampledata.ShopAccount, "/campaigns/" + c.Campaigns[0].ID, "s3://" + f.bucket + "/" + f.cfg.LakePrefix + "event_type=inference_log/"} {
		require.Contains(t, b.String(), s)
	}
}
