package chaos

import (
	"bufio"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProxyForwardsAndCuts(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // echo lines
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					_, _ = c.Write([]byte(l))
				}
			}()
		}
	}()
	p, err := NewProxy(ln.Addr().String())
	require.NoError(t, err)
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	r := bufio.NewReader(c)
	_, err = c.Write([]byte("hello\n"))
	require.NoError(t, err)
	l, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "hello\n", l)

	p.SetDown(true)
	_, err = r.ReadString('\n')
	require.Error(t, err, "an open connection is cut")
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	_, err = bufio.NewReader(c2).ReadString('\n')
	require.Error(t, err, "a new one is closed at once")

	p.SetDown(false)
	// A stall holds the answer until it ends; the connection stays open.
	cs, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	p.SetStalled(true)
	_, err = cs.Write([]byte("held\n"))
	require.NoError(t, err)
	got := make(chan string, 1)
	go func() { l, _ := bufio.NewReader(cs).ReadString('\n'); got <- l }()
	select {
	case l := <-got:
		t.Fatalf("answered %q during a stall", l)
	default:
	}
	p.SetStalled(false)
	require.Equal(t, "held\n", <-got)

	c3, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	_, err = c3.Write([]byte("back\n"))
	require.NoError(t, err)
	l, err = bufio.NewReader(c3).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "back\n", l)
}
