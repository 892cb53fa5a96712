package chatapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline"
)

var lakeDir string

// TestMain generates one small sample lake for the whole package.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "chatapi-test-")
	if err != nil {
		panic(err)
	}
	lakeDir = filepath.Join(dir, "lake")
	_, err = sampledata.Generate(context.Background(), sampledata.Options{
		LakeDir: lakeDir, TruthDir: filepath.Join(dir, "truth"), Seed: 11, Rooms: 60, Days: 1,
	})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func sharedLake(t *testing.T) string {
	t.Helper()
	require.NotEmpty(t, lakeDir)
	return lakeDir
}

func setup(t *testing.T, cfg chatapi.Config) (*chatapi.Server, *httptest.Server) {
	t.Helper()
	if cfg.Messages == nil && cfg.LakeDir == "" {
		cfg.LakeDir = sharedLake(t)
	}
	s, err := chatapi.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

func get(t *testing.T, ts *httptest.Server, path string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

func historyPath(room string, from, to time.Time) string {
	q := url.Values{"from": {from.Format(time.RFC3339Nano)}, "to": {to.Format(time.RFC3339Nano)}}
	return "/rooms/" + url.PathEscape(room) + "/messages?" + q.Encode()
}

func TestHistoryMatchesTheLake(t *testing.T) {
	t.Parallel()
	s, ts := setup(t, chatapi.Config{})
	all, err := sampledata.LoadMessages(sharedLake(t))
	require.NoError(t, err)
	require.Len(t, s.Rooms(), len(all))

	for _, room := range s.Rooms()[:10] {
		want := all[room]
		from, to := want[0].SentAt.Add(-time.Hour), want[len(want)-1].SentAt.Add(time.Hour)
		resp, body := get(t, ts, historyPath(room, from, to), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		var h pipeline.ChatHistory
		require.NoError(t, json.Unmarshal(body, &h))
		require.Equal(t, room, h.RoomID)
		require.True(t, h.From.Equal(from))
		require.True(t, h.To.Equal(to))
		require.Equal(t, want, h.Messages)
	}
}

func TestHistoryWindowIsHalfOpen(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	msgs := map[string][]pipeline.ChatMessage{"room-a": {
		// Deliberately out of order: New must sort.
		{MessageID: "m0003", SenderID: "u2", SenderRole: pipeline.RoleSeller, SentAt: t0.Add(2 * time.Minute), Kind: pipeline.KindText, Text: "c"},
		{MessageID: "m0001", SenderID: "u1", SenderRole: pipeline.RoleBuyer, SentAt: t0, Kind: pipeline.KindText, Text: "a"},
		{MessageID: "m0002", SenderID: "u1", SenderRole: pipeline.RoleBuyer, SentAt: t0.Add(time.Minute), Kind: pipeline.KindImage, ImageURL: "https://img.example-market.test/x.jpg"},
		{MessageID: "m0004", SenderID: "system", SenderRole: pipeline.RoleSystem, SentAt: t0.Add(2 * time.Minute), Kind: pipeline.KindSystem, Text: "d"},
	}}
	_, ts := setup(t, chatapi.Config{Messages: msgs})
	tests := []struct {
		name     string
		from, to time.Time
		want     []string
	}{
		{"from is inclusive", t0, t0.Add(time.Minute), []string{"m0001"}},
		{"to is exclusive", t0.Add(time.Second), t0.Add(2 * time.Minute), []string{"m0002"}},
		{"equal timestamps kept together", t0.Add(2 * time.Minute), t0.Add(3 * time.Minute), []string{"m0003", "m0004"}},
		{"everything in order", t0.Add(-time.Hour), t0.Add(time.Hour), []string{"m0001", "m0002", "m0003", "m0004"}},
		{"empty window", t0.Add(time.Hour), t0.Add(2 * time.Hour), []string{}},
		{"non-UTC offsets", t0.In(time.FixedZone("KST", 9*3600)), t0.Add(90 * time.Second).In(time.FixedZone("KST", 9*3600)), []string{"m0001", "m0002"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, body := get(t, ts, historyPath("room-a", tc.from, tc.to), nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			var raw struct {
				From     string            `json:"from"`
				Messages []json.RawMessage `json:"messages"`
			}
			require.NoError(t, json.Unmarshal(body, &raw))
			require.NotNil(t, raw.Messages, "messages must be [] rather than null")
			require.Equal(t, tc.from.UTC().Format(time.RFC3339Nano), raw.From, "times are UTC on the wire")
			var h pipeline.ChatHistory
			require.NoError(t, json.Unmarshal(body, &h))
			got := []string{}
			for _, m := range h.Messages {
				got = append(got, m.MessageID)
				require.Equal(t, time.UTC, m.SentAt.Location())
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestHistoryErrors(t *testing.T) {
	t.Parallel()
	_, ts := setup(t, chatapi.Config{})
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	room := "room-000001"
	tests := []struct {
		name   string
		path   string
		status int
		errMsg string
	}{
		{"unknown room", historyPath("room-999999", t0, t0.Add(time.Hour)), http.StatusNotFound, "room not found"},
		{"missing from", "/rooms/" + room + "/messages?to=2026-11-01T01:00:00Z", http.StatusBadRequest, "from is missing"},
		{"missing both", "/rooms/" + room + "/messages", http.StatusBadRequest, "from is missing; to is missing"},
		{"bad from", "/rooms/" + room + "/messages?from=yesterday&to=2026-11-01T01:00:00Z", http.StatusBadRequest, `from is not an RFC 3339 time: "yesterday"`},
		{"no zone", "/rooms/" + room + "/messages?from=2026-11-01T00:00:00&to=2026-11-01T01:00:00Z", http.StatusBadRequest, "from is not an RFC 3339 time"},
		{"inverted", historyPath(room, t0.Add(time.Hour), t0), http.StatusBadRequest, "to is not after from"},
		{"empty", historyPath(room, t0, t0), http.StatusBadRequest, "to is not after from"},
		{"unknown path", "/rooms", http.StatusNotFound, "no such endpoint"},
		// A bad window is reported before the room is looked up.
		{"bad window on unknown room", "/rooms/nope/messages?from=x&to=y", http.StatusBadRequest, "from is not an RFC 3339 time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, body := get(t, ts, tc.path, nil)
			require.Equal(t, tc.status, resp.StatusCode, string(body))
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var e struct {
				Error string `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &e))
			require.Contains(t, e.Error, tc.errMsg)
		})
	}

	req, err := http.NewRequest(http.MethodPut, ts.URL+historyPath(room, t0, t0.Add(time.Hour)), nil)
	require.NoError(t, err)
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	_, ts := setup(t, chatapi.Config{})
	resp, body := get(t, ts, "/healthz", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"status":"ok"}`, string(body))
}

func TestFaultHeader(t *testing.T) {
	t.Parallel()
	s, ts := setup(t, chatapi.Config{TimeoutStall: 200 * time.Millisecond})
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	path := historyPath("room-000001", t0, t0.Add(24*time.Hour))
	tests := []struct {
		fault      string
		status     int
		retryAfter string
	}{
		{chatapi.Fault500, http.StatusInternalServerError, ""},
		{chatapi.Fault503, http.StatusServiceUnavailable, "1"},
		{chatapi.Fault429, http.StatusTooManyRequests, "1"},
		{chatapi.FaultTimeout, http.StatusGatewayTimeout, ""},
	}
	for _, tc := range tests {
		t.Run(tc.fault, func(t *testing.T) {
			t.Parallel()
			resp, body := get(t, ts, path, map[string]string{chatapi.FaultHeader: tc.fault})
			require.Equal(t, tc.status, resp.StatusCode, string(body))
			require.Equal(t, tc.retryAfter, resp.Header.Get("Retry-After"))
			// The fault is for that request only.
			resp, _ = get(t, ts, path, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
		})
	}
	t.Run("timeout stalls until the client gives up", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set(chatapi.FaultHeader, chatapi.FaultTimeout)
		_, err = ts.Client().Do(req)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("reset drops the connection", func(t *testing.T) {
		t.Parallel()
		req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set(chatapi.FaultHeader, chatapi.FaultReset)
		resp, err := ts.Client().Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		require.Error(t, err, "a dropped connection must surface as a transport error")
	})
	t.Run("unknown fault is ignored", func(t *testing.T) {
		t.Parallel()
		resp, _ := get(t, ts, path, map[string]string{chatapi.FaultHeader: "teapot"})
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})
	t.Run("stats count faults", func(t *testing.T) {
		t.Parallel()
		before := s.Stats()
		get(t, ts, path, map[string]string{chatapi.FaultHeader: chatapi.Fault500})
		after := s.Stats()
		require.GreaterOrEqual(t, after.Faults-before.Faults, int64(1))
		require.GreaterOrEqual(t, after.Requests-before.Requests, int64(1))
	})
}

func TestFaultRate(t *testing.T) {
	t.Parallel()
	s, ts := setup(t, chatapi.Config{FaultRate: 0.5, FaultKind: chatapi.Fault500, FaultSeed: 3})
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	path := historyPath("room-000002", t0, t0.Add(24*time.Hour))
	codes := map[int]int{}
	for range 200 {
		resp, _ := get(t, ts, path, nil)
		codes[resp.StatusCode]++
	}
	require.Equal(t, 200, codes[http.StatusOK]+codes[http.StatusInternalServerError], codes)
	require.InDelta(t, 100, codes[http.StatusInternalServerError], 30, codes)
	st := s.Stats()
	require.Equal(t, int64(200), st.Requests)
	require.Equal(t, int64(codes[http.StatusOK]), st.Served)
	require.Equal(t, int64(codes[http.StatusInternalServerError]), st.Faults)

	require.NoError(t, s.SetFault(1, chatapi.Fault503))
	resp, _ := get(t, ts, path, nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NoError(t, s.SetFault(0, ""))
	resp, _ = get(t, ts, path, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	require.Error(t, s.SetFault(1.5, ""))
	require.Error(t, s.SetFault(0.1, "boom"))
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  chatapi.Config
		want []string
	}{
		{"neither source", chatapi.Config{}, []string{"exactly one of lake dir and messages"}},
		{"both sources", chatapi.Config{LakeDir: "x", Messages: map[string][]pipeline.ChatMessage{}}, []string{"exactly one"}},
		{"bad fault", chatapi.Config{Messages: map[string][]pipeline.ChatMessage{}, FaultRate: -0.1, FaultKind: "418", TimeoutStall: -1}, []string{"fault rate -0.1", `fault kind "418"`, "timeout stall"}},
		{"ok", chatapi.Config{Messages: map[string][]pipeline.ChatMessage{}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.cfg.Validate()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			_, err = chatapi.New(tc.cfg)
			require.Error(t, err)
		})
	}
	_, err := chatapi.New(chatapi.Config{LakeDir: t.TempDir()})
	require.ErrorContains(t, err, "no parquet files")
}

func TestAddServesNewMessagesInOrderAndReplacesARepeat(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	msg := func(id string, at time.Duration, text string) pipeline.ChatMessage {
		return pipeline.ChatMessage{MessageID: id, SenderID: "u1", SenderRole: pipeline.RoleBuyer, SentAt: t0.Add(at), Kind: pipeline.KindText, Text: text}
	}
	s, ts := setup(t, chatapi.Config{Messages: map[string][]pipeline.ChatMessage{"room-a": {msg("m2", 2*time.Minute, "b")}}})
	ids := func(room string) []string {
		resp, body := get(t, ts, historyPath(room, t0, t0.Add(time.Hour)), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var h pipeline.ChatHistory
		require.NoError(t, json.Unmarshal(body, &h))
		var out []string
		for _, m := range h.Messages {
			out = append(out, m.MessageID+"="+m.Text)
		}
		return out
	}
	s.Add("room-a", msg("m3", 3*time.Minute, "c"), msg("m1", time.Minute, "a"))
	require.Equal(t, []string{"m1=a", "m2=b", "m3=c"}, ids("room-a"))
	s.Add("room-a", msg("m2", 2*time.Minute, "b2"))
	require.Equal(t, []string{"m1=a", "m2=b2", "m3=c"}, ids("room-a"), "a repeated id replaces, never doubles")
	s.Add("room-new", msg("n1", 0, "x"))
	require.Equal(t, []string{"n1=x"}, ids("room-new"))
	require.Equal(t, []string{"room-a", "room-new"}, s.Rooms())
}
