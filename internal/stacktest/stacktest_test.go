package stacktest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestMain points the package at an env file of its own, so these tests
// never depend on (or load) a running stack.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stacktest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env := filepath.Join(dir, "env")
	body := "CHATGUARD_MYSQL_DSN='root@tcp(127.0.0.1:1)/x'\nCHATGUARD_REDIS_ADDR='127.0.0.1:1'\nCHATGUARD_STACK_MYSQL='embedded'\nCHATGUARD_STACK_REDIS='external'\n"
	if err := os.WriteFile(env, []byte(body), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(EnvFileVar, env)
	// The env file's values lose to variables already set: clear them.
	for _, k := range []string{"CHATGUARD_MYSQL_DSN", "CHATGUARD_REDIS_ADDR", "CHATGUARD_STACK_MYSQL", "CHATGUARD_STACK_REDIS", RedisClusterVar, RedisClusterMarker} {
		os.Unsetenv(k)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fatalTB records the first Fatalf and ends the calling goroutine, as
// testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalOf runs fn with a fatalTB and returns its Fatalf message ("" when
// fn returned normally).
func fatalOf(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	return tb.msg
}

func TestCIRefusesAStandIn(t *testing.T) {
	t.Setenv("CI", "true")
	msg := fatalOf(t, func(tb testing.TB) { Get(tb, "CHATGUARD_MYSQL_DSN") })
	if !strings.Contains(msg, "go-mysql-server") || !strings.Contains(msg, "CI is set") {
		t.Fatalf("want a CI failure naming the stand-in, got %q", msg)
	}
	// Redis is the real server in the env file: no failure.
	if msg := fatalOf(t, func(tb testing.TB) { Get(tb, "CHATGUARD_REDIS_ADDR") }); msg != "" {
		t.Fatalf("real Redis refused: %q", msg)
	}
	// Other variables are not servers.
	if msg := fatalOf(t, func(tb testing.TB) { Get(tb, "CHATGUARD_STACK_MYSQL") }); msg != "" {
		t.Fatalf("plain variable refused: %q", msg)
	}
}

func TestCIRefusesAnUnmarkedStack(t *testing.T) {
	t.Setenv("CI", "1")
	t.Setenv("CHATGUARD_STACK_REDIS", "")
	msg := fatalOf(t, func(tb testing.TB) { Get(tb, "CHATGUARD_REDIS_ADDR") })
	if !strings.Contains(msg, "does not say which Redis") {
		t.Fatalf("want a failure for a stack without the marker, got %q", msg)
	}
}

func TestStandInIsFineOutsideCI(t *testing.T) {
	for _, ci := range []string{"", "false", "0"} {
		t.Setenv("CI", ci)
		if msg := fatalOf(t, func(tb testing.TB) { Get(tb, "CHATGUARD_MYSQL_DSN") }); msg != "" {
			t.Fatalf("CI=%q: stand-in refused outside CI: %q", ci, msg)
		}
	}
}

func TestRequireRealMySQLFailsOnAStandInEvenOutsideCI(t *testing.T) {
	t.Setenv("CI", "")
	msg := fatalOf(t, func(tb testing.TB) { RequireRealMySQL(tb) })
	if !strings.Contains(msg, "needs a real MySQL") {
		t.Fatalf("want a failure, got %q", msg)
	}
	t.Setenv("CHATGUARD_STACK_MYSQL", "external")
	if msg := fatalOf(t, func(tb testing.TB) { RequireRealMySQL(tb) }); msg != "" {
		t.Fatalf("real MySQL refused: %q", msg)
	}
}

func TestRedisClusterIsRequiredInCI(t *testing.T) {
	t.Setenv(RedisClusterVar, "")
	t.Setenv("CI", "true")
	msg := fatalOf(t, func(tb testing.TB) { RedisCluster(tb) })
	if !strings.Contains(msg, "names no Redis Cluster") || !strings.Contains(msg, "CI is set") {
		t.Fatalf("want a CI failure for a stack without a cluster, got %q", msg)
	}
	t.Setenv("CI", "")
	var got RedisTarget
	if msg := fatalOf(t, func(tb testing.TB) { got = RedisCluster(tb) }); msg != "" {
		t.Fatalf("outside CI the node stands in: %q", msg)
	}
	if got.Cluster || got.Name != "cluster" || got.Addrs[0] != "127.0.0.1:1" {
		t.Fatalf("want the node under the cluster's name, got %+v", got)
	}
	t.Setenv("CI", "true")
	t.Setenv(RedisClusterVar, "127.0.0.1:2,127.0.0.1:3")
	t.Setenv(RedisClusterMarker, "external")
	if msg := fatalOf(t, func(tb testing.TB) { got = RedisCluster(tb) }); msg != "" || !got.Cluster || len(got.Addrs) != 2 {
		t.Fatalf("a stack with a cluster: %q %+v", msg, got)
	}
}
