package llmsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

// Running is a Server listening on a port.
type Running struct {
	// Server is the simulator, for SetConfig, Stats and the like.
	Server *Server
	// URL is the base URL for OpenAI clients: http://host:port/v1.
	URL string
	// Root is http://host:port, for /metrics and /admin.
	Root string

	srv  *http.Server
	done chan error
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves a new
// Server for cfg until Stop. ctx bounds only the start (the listen); it
// returns the configuration's problems or the listen error.
func Start(ctx context.Context, addr string, cfg Config) (*Running, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("llmsim: listen %s: %w", addr, err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	root := "http://" + net.JoinHostPort(host, port)
	r := &Running{
		Server: s,
		URL:    root + "/v1",
		Root:   root,
		srv: &http.Server{
			Handler:           s.Handler(),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			// Dropped connections are the point of some faults; the
			// standard library's complaints about them are noise.
			ErrorLog: log.New(io.Discard, "", 0),
		},
		done: make(chan error, 1),
	}
	go func() { r.done <- r.srv.Serve(ln) }()
	return r, nil
}

// Stop ends hangs and queued waits, lets running requests finish until ctx
// is done, then closes every connection. It returns ctx's error when it had
// to force the close, or the server's own error.
func (r *Running) Stop(ctx context.Context) error {
	r.Server.Close()
	err := r.srv.Shutdown(ctx)
	if err != nil {
		_ = r.srv.Close()
	}
	if serveErr := <-r.done; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return errors.Join(err, fmt.Errorf("llmsim: serve: %w", serveErr))
	}
	return err
}
