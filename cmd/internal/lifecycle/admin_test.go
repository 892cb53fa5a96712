package lifecycle

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

type readyFlag struct{ atomic.Bool }

func (r *readyFlag) Ready() bool { return r.Load() }

func TestAdminHandlerServesProbesAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_test_things_total", Help: "x"})
	reg.MustRegister(c)
	c.Add(3)
	var ready readyFlag
	srv := httptest.NewServer(AdminHandler(reg, &ready, "not receiving"))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	code, body = get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "not receiving")
	ready.Store(true)
	code, _ = get("/readyz")
	require.Equal(t, http.StatusOK, code)
	code, body = get("/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "chatguard_test_things_total 3")
}
