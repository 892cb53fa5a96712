package main

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
)

// A server whose Serve fails ends the console's group with that error,
// and the services started before it are stopped, not left running.
func TestAFailingServerEndsTheGroup(t *testing.T) {
	t.Parallel()
	h := &httpServer{name: "console", addr: "127.0.0.1:0", log: slog.New(slog.DiscardHandler), srv: &http.Server{}}
	stopped := make(chan struct{})
	g := lifecycle.New(nil, nil)
	g.Add(lifecycle.Service{Name: "before", Stop: func(context.Context) error { close(stopped); return nil }},
		h.service(http.NotFoundHandler),
		// The listener closed under the server: its Serve fails at once.
		lifecycle.Service{Name: "breaker", Start: func(context.Context) error { return h.ln.Close() }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := g.Run(ctx)
	require.ErrorContains(t, err, "console server: serve:")
	select {
	case <-stopped:
	default:
		t.Fatal("the service started before the server was not stopped")
	}
}

// A stop shuts the server down and Run returns nil (http.ErrServerClosed
// is the clean end, not a failure).
func TestAServerStopsCleanly(t *testing.T) {
	t.Parallel()
	h := &httpServer{name: "admin", addr: "127.0.0.1:0", log: slog.New(slog.DiscardHandler), srv: &http.Server{}}
	g := lifecycle.New(nil, nil)
	ready := make(chan string, 1)
	g.Add(h.service(http.NotFoundHandler),
		lifecycle.Service{Name: "ready", Start: func(context.Context) error { ready <- h.ln.Addr().String(); return nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	resp, err := http.Get("http://" + <-ready + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	cancel()
	require.NoError(t, <-done)
}
