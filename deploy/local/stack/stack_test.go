package stack

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline"
)

// envKeys are the variables every binary or test may rely on
// (deploy/local/README.md).
var envKeys = []string{
	"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
	"AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_ATHENA",
	"CHATGUARD_ATHENA_DATABASE", "CHATGUARD_ATHENA_WORKGROUP", "CHATGUARD_ATHENA_OUTPUT_LOCATION", "CHATGUARD_ATHENA_ADMIN_URL",
	"CHATGUARD_S3_PATH_STYLE",
	"CHATGUARD_REVIEW_QUEUE_URL", "CHATGUARD_REVIEW_DLQ_URL",
	"CHATGUARD_FEEDBACK_QUEUE_URL", "CHATGUARD_FEEDBACK_DLQ_URL",
	"CHATGUARD_REVIEW_REALTIME_QUEUE_URL", "CHATGUARD_REVIEW_REALTIME_DLQ_URL",
	"CHATGUARD_CHAT_EVENTS_QUEUE_URL", "CHATGUARD_CHAT_EVENTS_DLQ_URL",
	"CHATGUARD_STACK_ACTIONS_QUEUE_URL", "CHATGUARD_STACK_ACTIONS_DLQ_URL",
	"CHATGUARD_MAX_RECEIVE_COUNT", "CHATGUARD_MYSQL_DSN", "CHATGUARD_REDIS_ADDR",
	"CHATGUARD_CHAT_API_URL", "CHATGUARD_LAKE_BUCKET", "CHATGUARD_LAKE_DIR", "CHATGUARD_TRUTH_DIR",
	"CHATGUARD_PRIMARY_BASE_URL", "CHATGUARD_PRIMARY_MODEL", "CHATGUARD_PRIMARY_ADMIN_URL",
	"CHATGUARD_FALLBACK_BASE_URL", "CHATGUARD_FALLBACK_MODEL", "CHATGUARD_FALLBACK_API_KEY", "CHATGUARD_FALLBACK_ADMIN_URL",
	"CHATGUARD_SAMPLE_WINDOW_START", "CHATGUARD_SAMPLE_WINDOW_END", "CHATGUARD_STACK_PID",
	"CHATGUARD_STACK_MYSQL", "CHATGUARD_STACK_REDIS", "CHATGUARD_IMAGE_HOSTS",
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.work"))
	require.NoError(t, err)
	return root
}

// freePorts returns n ports that were free a moment ago. They come from
// below the kernel's ephemeral range (32768 up on Linux): a port the kernel
// handed out for a listen on :0 is soon handed out again as the source port
// of some other test's outgoing connection, and the stack's later listen on
// it then fails with "address already in use".
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	const lo, hi = 20000, 32768
	var lns []net.Listener
	var ports []int
	for p := lo + rand.IntN(hi-lo); len(ports) < n; p++ {
		if p >= hi {
			p = lo
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		lns = append(lns, ln)
		ports = append(ports, p)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// setup returns a configuration for a private stack: its own state dir and
// ports, the repository's cache, and the embedded MySQL and miniredis.
func setup(t *testing.T) Config {
	t.Helper()
	cfg := Defaults(repoRoot(t))
	cfg.StateDir = t.TempDir()
	p := freePorts(t, 8)
	cfg.SQSPort, cfg.S3Port, cfg.AthenaPort, cfg.ChatAPIPort = p[0], p[1], p[2], p[3]
	cfg.PrimaryPort, cfg.FallbackPort, cfg.MySQLPort, cfg.RedisPort = p[4], p[5], p[6], p[7]
	cfg.ExternalMySQL, cfg.ExternalRedis = "", ""
	cfg.RedisClusterPort = 0 // TestRedisClusterStarts starts one
	cfg.Rooms = 40
	cfg.MaxReceiveCount = 3
	return cfg
}

// startStale leaves behind what a killed run would: an env file and a
// process that carries the fauxqs marker, recorded in the pid file. The
// returned channel closes when that process has exited.
func startStale(t *testing.T, cfg Config) (int, <-chan struct{}) {
	t.Helper()
	require.NoError(t, os.WriteFile(cfg.EnvFile(), []byte("CHATGUARD_STACK_PID='1'\n"), 0o644))
	cmd := exec.Command("bash", "-c", "sleep 300; true", fauxqsMarker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-exited })
	// Start returns when the child begins its exec, a moment before the
	// kernel shows the new command line.
	require.Eventually(t, func() bool { return cmdlineHas(cmd.Process.Pid, fauxqsMarker) }, 10*time.Second, 10*time.Millisecond,
		"the stand-in for a stale fauxqs carries the marker")
	require.NoError(t, os.WriteFile(cfg.FauxqsPIDFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644))
	return cmd.Process.Pid, exited
}

func TestStackStartsCleansUpAfterKilledRunAndStopsEverything(t *testing.T) {
	cfg := setup(t)
	stalePID, staleExited := startStale(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, cfg)
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = s.Stop(context.Background())
		}
	})
	select {
	case <-staleExited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the orphaned fauxqs (pid %d) of the killed run survived the start (marker on its command line: %v)",
			stalePID, cmdlineHas(stalePID, fauxqsMarker))
	}

	env, err := ReadEnvFile(cfg.EnvFile())
	require.NoError(t, err)
	for _, k := range envKeys {
		require.NotEmpty(t, env[k], "env file lacks %s", k)
	}
	require.Equal(t, strconv.Itoa(os.Getpid()), env["CHATGUARD_STACK_PID"], "the stale env file was replaced")
	require.Equal(t, "3", env["CHATGUARD_MAX_RECEIVE_COUNT"])
	require.Equal(t, cfg.LakeDir(), env["CHATGUARD_LAKE_DIR"])
	require.Equal(t, os.Getpid(), Running(cfg))
	_, err = WaitReady(ctx, cfg, 0, time.Second)
	require.NoError(t, err)

	rooms, err := sampledata.LoadRooms(env["CHATGUARD_LAKE_DIR"])
	require.NoError(t, err)
	require.Len(t, rooms, cfg.Rooms)

	// A second stack on the same state fails fast, naming the first.
	_, err = Start(ctx, cfg)
	require.ErrorIs(t, err, ErrRunning)
	require.ErrorContains(t, err, strconv.Itoa(os.Getpid()))

	// The env file says the stand-ins are in use, so CI can refuse them.
	require.Equal(t, "embedded", env["CHATGUARD_STACK_MYSQL"])
	require.Equal(t, "embedded", env["CHATGUARD_STACK_REDIS"])
	require.Equal(t, "absent", env["CHATGUARD_STACK_REDIS_CLUSTER"], "no cluster asked for: the env file says so")

	// The embedded MySQL takes the upsert the verdict store uses.
	db, err := sql.Open("mysql", env["CHATGUARD_MYSQL_DSN"])
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(ctx, "CREATE TABLE v (k VARCHAR(32) PRIMARY KEY, n INT NOT NULL)")
	require.NoError(t, err)
	for range 2 {
		_, err = db.ExecContext(ctx, "INSERT INTO v (k, n) VALUES ('a', 1) ON DUPLICATE KEY UPDATE n = n + 1")
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT n FROM v WHERE k = 'a'").Scan(&n))
	require.Equal(t, 2, n)
	require.NoError(t, db.Close())

	// miniredis carries pub/sub.
	rc := redis.NewClient(&redis.Options{Addr: env["CHATGUARD_REDIS_ADDR"]})
	defer rc.Close()
	sub := rc.Subscribe(ctx, "stop")
	_, err = sub.Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, rc.Publish(ctx, "stop", "x").Err())
	msg, err := sub.ReceiveMessage(ctx)
	require.NoError(t, err)
	require.Equal(t, "x", msg.Payload)
	require.NoError(t, sub.Close())
	require.NoError(t, rc.Close())

	requireActionsApplied(ctx, t, env, rooms[0].RoomID)

	pidData, err := os.ReadFile(cfg.FauxqsPIDFile())
	require.NoError(t, err)
	fauxqsPID, err := strconv.Atoi(string(pidData[:len(pidData)-1]))
	require.NoError(t, err)
	require.True(t, cmdlineHas(fauxqsPID, fauxqsMarker))

	stopped = true
	require.NoError(t, s.Stop(ctx))

	require.False(t, processAlive(fauxqsPID), "fauxqs survived the stop")
	for _, p := range cfg.ports() {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.port))
		require.NoError(t, err, "port %s (%d) still taken after stop", p.name, p.port)
		ln.Close()
	}
	_, err = os.Stat(cfg.EnvFile())
	require.True(t, errors.Is(err, os.ErrNotExist), "env file left behind")
	require.Zero(t, Running(cfg))

	// The lake survives for the next start; the state can start again.
	s2, err := Start(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, s2.Stop(ctx))
}

func TestStartFailsFastOnATakenPort(t *testing.T) {
	t.Parallel()
	cfg := setup(t)
	// Take a port first, then point the config at it: re-binding a port
	// freePorts released races every other process on the machine.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cfg.ChatAPIPort = ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = Start(ctx, cfg)
	require.ErrorContains(t, err, "--chat-api-port")
	require.Zero(t, Running(cfg), "a failed start releases the lock")
	_, err = os.Stat(cfg.FauxqsPIDFile())
	require.True(t, errors.Is(err, os.ErrNotExist), "no fauxqs was started")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		edit  func(*Config)
		wants []string
	}{
		{"defaults", func(*Config) {}, nil},
		{"duplicate port", func(c *Config) { c.S3Port = c.SQSPort }, []string{"--sqs-port and --s3-port are both"}},
		{"bad port", func(c *Config) { c.RedisPort = 70000 }, []string{"--redis-port 70000"}},
		{"several", func(c *Config) { c.MaxReceiveCount = 0; c.Rooms = 0; c.VisibilityTimeout = 1500 * time.Millisecond },
			[]string{"max receive count", "rooms", "visibility timeout"}},
		{"no root", func(c *Config) { c.Root, c.StateDir, c.CacheDir = "", "", "" }, []string{"root", "state dir", "cache dir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := Defaults("/repo")
			tt.edit(&cfg)
			err := cfg.Validate()
			if tt.wants == nil {
				require.NoError(t, err)
				return
			}
			for _, w := range tt.wants {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestEnvRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     Env
		wantErr bool
	}{
		{"dsn with shell characters", Env{"CHATGUARD_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/chatguard?parseTime=true&x=y", "A": "b c"}, false},
		{"empty value", Env{"K": "", "L": "x"}, false},
		{"quote", Env{"K": "it's"}, true},
		{"newline", Env{"K": "a\nb"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "env")
			err := tt.env.WriteFile(path)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			got, err := ReadEnvFile(path)
			require.NoError(t, err)
			require.Equal(t, tt.env, got)
			// A shell reads the same values.
			for k, v := range tt.env {
				out, err := exec.Command("bash", "-c", "set -a; . "+path+"; printf %s \"$"+k+"\"").Output()
				require.NoError(t, err)
				require.Equal(t, v, string(out), k)
			}
		})
	}
}

// TestRedisClusterStarts starts the stack's three-master Redis Cluster on
// free ports and writes and reads a key of every master's slots through a
// cluster client; a machine without redis-server fails it under CI.
func TestRedisClusterStarts(t *testing.T) {
	base := 0
	for p := 20100; p < 30000 && base == 0; p += ClusterNodes {
		free := true
		for i := range ClusterNodes {
			for _, q := range []int{p + i, p + i + clusterBusOffset} {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
				if err != nil {
					free = false
					continue
				}
				ln.Close()
			}
		}
		if free {
			base = p
		}
	}
	require.NotZero(t, base, "no free block of ports")
	ctx := context.Background()
	rc, err := startRedisCluster(ctx, base, t.TempDir(), time.Minute)
	require.NoError(t, err)
	defer rc.stop()
	require.Len(t, rc.addrs, ClusterNodes)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.addrs})
	defer c.Close()
	var masters atomic.Int32 // ForEachMaster calls concurrently
	require.NoError(t, c.ForEachMaster(ctx, func(context.Context, *redis.Client) error { masters.Add(1); return nil }))
	require.EqualValues(t, ClusterNodes, masters.Load())
	for i := range 30 {
		k := fmt.Sprintf("k%d", i)
		require.NoError(t, c.Set(ctx, k, i, time.Minute).Err(), "keys of every slot are served")
		require.Equal(t, strconv.Itoa(i), c.Get(ctx, k).Val())
	}
}

// requireActionsApplied sends one protective action to the stack's
// actions queue, twice, and waits until the chat API shows its notice
// once.
func requireActionsApplied(ctx context.Context, t *testing.T, env Env, room string) {
	t.Helper()
	now := time.Now().UTC()
	a := pipeline.ProtectiveAction{
		SchemaVersion: 1, IdempotencyKey: "a1-stack-test", PolicyVersion: "test", PolicyHash: strings.Repeat("0", 64),
		VerdictRevision: 1, Source: pipeline.ActionSourceRealtime, Mode: pipeline.ModeOn, IssuedAt: now, ExpiresAt: now.Add(time.Hour),
		Item: pipeline.ActionEntity{ID: room, TypeID: pipeline.EntityRoom}, Creator: pipeline.ActionEntity{ID: "u1", TypeID: pipeline.EntityAccount},
		Action: pipeline.ActionRef{ID: pipeline.ActionWarnCounterpart}, Rules: []pipeline.ActionRule{{ID: "r", Name: "r"}},
		Custom: pipeline.ActionCustom{Template: "counterpart_external_payment", Locale: "ko", Counterpart: pipeline.RoleBuyer},
	}
	body, err := pipeline.EncodeProtectiveAction(a)
	require.NoError(t, err)
	c := sqsClient(env["AWS_ENDPOINT_URL_SQS"])
	for range 2 {
		_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env["CHATGUARD_STACK_ACTIONS_QUEUE_URL"]), MessageBody: aws.String(string(body))})
		require.NoError(t, err)
	}
	url := fmt.Sprintf("%s/rooms/%s/messages?from=%s&to=%s", env["CHATGUARD_CHAT_API_URL"], room,
		now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	notices := func() int {
		resp, err := http.Get(url)
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var h pipeline.ChatHistory
		if json.NewDecoder(resp.Body).Decode(&h) != nil {
			return -1
		}
		n := 0
		for _, m := range h.Messages {
			if pipeline.IsActionNotice(m) {
				n++
			}
		}
		return n
	}
	outcomes := func() map[string]int {
		var st struct {
			Stats struct {
				Outcomes map[string]int `json:"outcomes"`
			} `json:"stats"`
		}
		resp, err := http.Get(env["CHATGUARD_CHAT_API_URL"] + "/actions")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&st)
		return st.Stats.Outcomes
	}
	require.Eventually(t, func() bool { o := outcomes(); return o["applied"]+o["duplicate"] == 2 }, 30*time.Second, 50*time.Millisecond,
		"the chat API consumes both copies")
	require.Equal(t, 1, outcomes()["applied"], "applied once by key")
	require.Equal(t, 1, notices(), "one notice for two copies")
}

// TestALakeOfAnOlderGeneratorIsWrittenAgain: a stack writes the lake when
// it has none, and again when the generator that wrote it is older than
// this one (no version file: before the campaign rooms), so that `make
// demo` shows what this generator plants; a current lake is kept.
func TestALakeOfAnOlderGeneratorIsWrittenAgain(t *testing.T) {
	t.Parallel()
	cfg := Defaults(t.TempDir())
	cfg.StateDir = t.TempDir()
	write, _, err := lakeToWrite(cfg)
	require.NoError(t, err)
	require.True(t, write, "no lake")
	_, err = sampledata.Generate(t.Context(), sampledata.Options{LakeDir: cfg.LakeDir(), TruthDir: cfg.TruthDir(), Seed: 1, Rooms: 20, Days: 1})
	require.NoError(t, err)
	write, found, err := lakeToWrite(cfg)
	require.NoError(t, err)
	require.False(t, write, "a current lake")
	require.Equal(t, sampledata.Version, found)
	require.NoError(t, os.Remove(filepath.Join(cfg.TruthDir(), sampledata.VersionFileName)))
	write, found, err = lakeToWrite(cfg)
	require.NoError(t, err)
	require.True(t, write, "a lake of an older generator")
	require.Empty(t, found)
}
