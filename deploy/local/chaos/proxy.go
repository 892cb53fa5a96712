// Package chaos is the fault suite: it drives built worker binaries on the
// local stack through real faults — a TCP fault proxy in front of MySQL and
// the chat API, the LLM simulators' fault knobs, and SIGKILL — and prints
// one table of figures, asserting each row. Its tests are the suite; `make
// chaos` runs the full sizes, `make test` a short form.
package chaos

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy is a TCP proxy whose link can be cut or stalled: while Down, every
// open connection is closed and new ones are accepted and closed at once, as
// a crashed or partitioned server looks to a client; while Stalled, bytes
// are held in both directions (connections stay open), as a hung server
// looks. It is a small stand-in for toxiproxy, with only the faults the
// suite needs.
type Proxy struct {
	ln     net.Listener
	target string
	down   atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	// flowing is closed while bytes may flow; a stall replaces it with an
	// open channel until it ends.
	flowing chan struct{}
}

// NewProxy listens on 127.0.0.1:0 and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, flowing: make(chan struct{})}
	close(p.flowing)
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDown cuts (true) or restores (false) the link.
func (p *Proxy) SetDown(down bool) {
	p.down.Store(down)
	if down {
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
	}
}

// SetStalled holds (true) or releases (false) every byte in flight.
func (p *Proxy) SetStalled(stalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing: // flowing now
		if stalled {
			p.flowing = make(chan struct{})
		}
	default:
		if !stalled {
			close(p.flowing)
		}
	}
}

func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flowing
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.SetStalled(false)
	p.SetDown(true)
	p.wg.Wait()
}

// pipe copies src to dst, holding each chunk while the proxy is stalled.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		if p.down.Load() {
			return false
		}
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !p.track(c, true) {
			_ = c.Close()
			continue
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.track(c, false)
	defer c.Close()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(up, true) {
		_ = up.Close()
		return
	}
	defer p.track(up, false)
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(up, c); done <- struct{}{} }()
	go func() { p.pipe(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
}
