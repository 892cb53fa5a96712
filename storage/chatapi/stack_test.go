package chatapi_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/chatapi"
)

// faultFirst adds the stand-in's fault header to the first n requests.
type faultFirst struct {
	kind  string
	n     int32
	calls atomic.Int32
}

func (f *faultFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.calls.Add(1) <= f.n {
		r = r.Clone(r.Context())
		r.Header.Set("X-Chatapi-Fault", f.kind)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestAgainstTheStack runs the client against the stack's chat stand-in:
// real rooms, a missing room, and injected 5xx, 429, stalls and resets.
func TestAgainstTheStack(t *testing.T) {
	t.Parallel()
	base := stacktest.ChatAPIURL(t)
	from, to := stacktest.SampleWindow(t)
	tests := []struct {
		fault     string
		faults    int32
		room      string
		wantCalls int32
		wantDisp  pipeline.Disposition
		wantErr   bool
	}{
		{room: "room-000001", wantCalls: 1},
		{room: "room-does-not-exist", wantCalls: 1, wantErr: true, wantDisp: pipeline.GiveUp},
		{fault: "500", faults: 1, room: "room-000001", wantCalls: 2},
		{fault: "503", faults: 2, room: "room-000001", wantCalls: 3},
		{fault: "429", faults: 1, room: "room-000001", wantCalls: 2},
		{fault: "timeout", faults: 1, room: "room-000001", wantCalls: 2},
		{fault: "reset", faults: 1, room: "room-000001", wantCalls: 2},
		{fault: "500", faults: 3, room: "room-000001", wantCalls: 3, wantErr: true, wantDisp: pipeline.RetryLater},
	}
	for _, tc := range tests {
		t.Run(tc.room+"/"+tc.fault, func(t *testing.T) {
			t.Parallel()
			tr := &faultFirst{kind: tc.fault, n: tc.faults}
			cfg := chatapi.DefaultConfig()
			cfg.BaseURL, cfg.Timeout = base, 500*time.Millisecond
			cfg.RetryBase, cfg.RetryMax = 10*time.Millisecond, 1500*time.Millisecond
			cfg.HTTPClient = &http.Client{Transport: tr}
			c, err := chatapi.New(cfg)
			require.NoError(t, err)
			// Room 1 may have no messages in the sample window: ask for a
			// week, which the stand-in serves as one window.
			msgs, err := c.History(context.Background(), tc.room, from.Add(-72*time.Hour), to.Add(72*time.Hour))
			require.Equal(t, tc.wantCalls, tr.calls.Load())
			if tc.wantErr {
				require.Error(t, err)
				d, _ := pipeline.Classify(err)
				require.Equal(t, tc.wantDisp, d)
				return
			}
			require.NoError(t, err)
			require.NotEmpty(t, msgs)
			for _, m := range msgs {
				require.NotEmpty(t, m.MessageID)
				require.False(t, m.SentAt.Before(from.Add(-72*time.Hour)))
				require.True(t, m.SentAt.Before(to.Add(72*time.Hour)))
			}
		})
	}
}
