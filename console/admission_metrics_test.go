package console

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestAdmissionIsCounted(t *testing.T) {
	c := newTestConsole(t, 1)
	m := newAdmissionMetrics(nil)
	c.srv.reviews.admission = m
	hc := c.client(t, "alice@example.com")
	resp := c.startReview(t, hc)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readEvents(t, resp.Body, 1, "")
	busy := c.startReview(t, hc)
	busy.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, busy.StatusCode)
	c.srv.reviews.mu.Lock()
	c.srv.reviews.draining = true
	c.srv.reviews.mu.Unlock()
	drain := c.startReview(t, hc)
	drain.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, drain.StatusCode)
	require.Equal(t, 1.0, testutil.ToFloat64(m.results.WithLabelValues(admissionAdmitted)))
	require.Equal(t, 1.0, testutil.ToFloat64(m.results.WithLabelValues(admissionBusy)))
	require.Equal(t, 1.0, testutil.ToFloat64(m.results.WithLabelValues(admissionDraining)))
}
