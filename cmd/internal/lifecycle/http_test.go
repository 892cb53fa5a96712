package lifecycle_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
)

// servedGroup runs a group of one served handler and returns its address
// and the group's stop; the result of Run comes on the returned channel.
func servedGroup(t *testing.T, ctx context.Context, h http.Handler) (addr string, stop func(), ran <-chan error) {
	t.Helper()
	var s *lifecycle.Server
	open := func() (*lifecycle.Server, error) {
		return lifecycle.Listen("test", "127.0.0.1:0", &http.Server{Handler: h, ReadHeaderTimeout: time.Second})
	}
	addrs := make(chan string, 1)
	g := lifecycle.New(nil, nil)
	g.Add(lifecycle.Serve("http", &s, open, 10*time.Second),
		// A later Start runs after the listener's: it can read s.
		lifecycle.Service{Name: "ready", Start: func(context.Context) error { addrs <- s.Addr(); return nil }})
	gctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- g.Run(gctx) }()
	select {
	case a := <-addrs:
		return a, cancel, done
	case err := <-done:
		t.Fatalf("group ended before serving: %v", err)
	case <-ctx.Done():
		t.Fatal("listener never opened")
	}
	return "", nil, nil
}

// A served listener finishes the request in flight when the group stops,
// and the group returns nil.
func TestServeFinishesTheRequestInFlight(t *testing.T) {
	ctx := within(t)
	entered, release := make(chan struct{}), make(chan struct{})
	addr, stop, ran := servedGroup(t, ctx, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "done")
	}))
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-entered
	stop()
	close(release)
	require.Equal(t, "done", <-got)
	require.NoError(t, <-ran)
}

// A port already taken fails the group's start with the listener's name.
func TestListenNamesTheListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, err = lifecycle.Listen("admin", ln.Addr().String(), &http.Server{ReadHeaderTimeout: time.Second})
	require.ErrorContains(t, err, "admin listen")
	var s *lifecycle.Server
	require.Empty(t, s.AddrOrEmpty())
}

// TestRunOutsideAGroupStillDrains: a Server run on its own (tests, tools)
// has no group's hard context; cancelling its ctx must still let the
// request in flight finish rather than end the shutdown at once.
func TestRunOutsideAGroupStillDrains(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	s, err := lifecycle.Listen("test", "127.0.0.1:0", &http.Server{Handler: h, ReadHeaderTimeout: time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + s.Addr())
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-entered
	cancel()
	// The shutdown has begun once the listener refuses connections; only
	// then is the handler let go, so a shutdown cut short by the
	// cancelled ctx would already have returned.
	dialUntilRefused(t, s.Addr())
	close(release)
	require.Equal(t, "done", <-got)
	require.NoError(t, <-ran, "a busy connection cut the shutdown short")
}

// dialUntilRefused dials addr until the listener is closed, for at most
// ten seconds.
func dialUntilRefused(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d net.Dialer
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return
		}
		_ = c.Close()
	}
	t.Fatal("the listener still accepted connections after ten seconds")
}
