package lifecycle

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/chatguard/chatguard/internal/drain"
)

// Server is an HTTP listener and the server that serves it. Listen opens
// it; Run serves it (as a Service's Run, see Serve).
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Listen opens addr for srv, with TLS when srv.TLSConfig is set. name
// prefixes the error.
func Listen(name, addr string, srv *http.Server) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listen: %w", name, err)
	}
	if srv.TLSConfig != nil {
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	return &Server{srv: srv, ln: ln}, nil
}

// Addr is the listener's address (the port chosen for ":0").
func (s *Server) Addr() string { return s.ln.Addr().String() }

// AddrOrEmpty is Addr, or "" for a nil Server (a listener that is off).
func (s *Server) AddrOrEmpty() string {
	if s == nil {
		return ""
	}
	return s.Addr()
}

// Run serves until ctx ends or serving fails; then it shuts down
// gracefully, letting requests in flight finish until drain.Hard(ctx)
// ends (outside a group, where there is no hard context and ctx is
// already over, for at most DefaultDrain). It returns nil after a clean shutdown, else serving's or
// the shutdown's error.
func (s *Server) Run(ctx context.Context) error {
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	hard, ok := drain.Lookup(ctx)
	if !ok {
		// No group's hard context: a cancelled ctx would cut the shutdown
		// short at once whenever a connection is still busy.
		var cancel context.CancelFunc
		hard, cancel = context.WithTimeout(context.WithoutCancel(ctx), DefaultDrain)
		defer cancel()
	}
	err := s.srv.Shutdown(hard)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Serve is a listener as a service: its Start calls open and keeps the
// Server in *s for the services after it, its Run serves until the group
// stops, and drain bounds the graceful shutdown.
func Serve(name string, s **Server, open func() (*Server, error), drain time.Duration) Service {
	return Service{
		Name: name,
		Start: func(context.Context) (err error) {
			*s, err = open()
			return err
		},
		Run:   func(ctx context.Context) error { return (*s).Run(ctx) },
		Drain: drain,
	}
}
