package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

type fakeLoop struct{ draining atomic.Bool }

func (f *fakeLoop) Draining() bool { return f.draining.Load() }

type fakeDB struct{ err atomic.Pointer[error] }

func (f *fakeDB) Ping(context.Context) error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

func TestAdminProbes(t *testing.T) {
	t.Parallel()
	loop, db := &fakeLoop{}, &fakeDB{}
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_worker_test_total", Help: "t"})
	reg.MustRegister(c)
	c.Inc()
	srv := httptest.NewServer(adminHandler(reg, loop, db))
	t.Cleanup(srv.Close)
	status := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, 200, status("/healthz"))
	require.Equal(t, 200, status("/readyz"))
	require.Equal(t, 200, status("/metrics"))
	// pprof and the operator API are not on the cluster-facing listener.
	require.Equal(t, 404, status("/debug/pprof/"))
	require.Equal(t, 404, status("/debug/pprof/cmdline"))
	resp, err := http.Post(srv.URL+"/v1/stop", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 404, resp.StatusCode)

	down := errors.New("connection refused")
	db.err.Store(&down)
	require.Equal(t, 503, status("/readyz"), "not ready while MySQL is unreachable")
	require.Equal(t, 200, status("/healthz"), "still alive")
	db.err.Store(nil)
	require.Equal(t, 200, status("/readyz"))
	loop.draining.Store(true)
	require.Equal(t, 503, status("/readyz"), "not ready while draining")
}
