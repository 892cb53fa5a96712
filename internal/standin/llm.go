package standin

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FaultHeader is the LLM simulator's request header that forces one fault
// ("429", "500", "hang", ...) or none ("none") for that request.
const FaultHeader = "X-Sim-Fault"

// OutcomeOK is the simulator's outcome of a complete answer in its stats.
const OutcomeOK = "ok"

// adminTimeout bounds one admin call.
const adminTimeout = 10 * time.Second

// LLMOptions configures a private LLM simulator.
type LLMOptions struct {
	// Name labels it in stats and logs: "primary" or "fallback".
	Name string
	// Model is the one model id served.
	Model string
	// APIKey, when set, is required as a bearer token.
	APIKey string
	// Config is a JSON document for PUT /admin/config applied before the
	// simulator is handed out, e.g. {"ttft":"20ms","faults":{"429":1}};
	// fields left out keep the simulator's defaults.
	Config string
}

// LLM is a private LLM simulator process (deploy/local/llmsim).
type LLM struct {
	// BaseURL ends in /v1, as OpenAI clients expect.
	BaseURL string
	Model   string
	APIKey  string
	// AdminURL is the simulator's admin endpoint (…/admin).
	AdminURL string
}

// StartLLM builds the simulator, starts it on a free port and applies
// o.Config. It is stopped when t ends.
func StartLLM(t testing.TB, o LLMOptions) *LLM {
	t.Helper()
	args := []string{"--addr", "127.0.0.1:0", "--name", o.Name, "--models", o.Model}
	if o.APIKey != "" {
		args = append(args, "--api-key", o.APIKey)
	}
	p := Start(t, Build(t, LLMSimCommand), args...)
	l := &LLM{BaseURL: p.URL, Model: o.Model, APIKey: o.APIKey, AdminURL: strings.TrimSuffix(p.URL, "/v1") + "/admin"}
	if o.Config != "" {
		l.Configure(t, o.Config)
	}
	return l
}

// Configure changes the simulator's configuration at run time (PUT
// /admin/config with a partial JSON document); it fails t when the
// simulator refuses it.
func (l *LLM) Configure(t testing.TB, patch string) {
	t.Helper()
	adminCall(t, http.MethodPut, l.AdminURL+"/config", patch, nil)
}

// LLMStats is the simulator's GET /admin/stats: requests counted by
// endpoint, model, stage and outcome, and the requests running and waiting
// now.
type LLMStats struct {
	Name    string `json:"name"`
	Running int    `json:"running"`
	Waiting int    `json:"waiting"`
	Rows    []struct {
		Endpoint string `json:"endpoint"`
		Model    string `json:"model"`
		Stage    string `json:"stage"`
		Outcome  string `json:"outcome"`
		Count    int64  `json:"count"`
	} `json:"requests"`
}

// ChatRequests is the number of chat-completion requests with the outcome
// ("" for all).
func (s LLMStats) ChatRequests(outcome string) int64 {
	var n int64
	for _, r := range s.Rows {
		if r.Endpoint == "chat_completions" && (outcome == "" || r.Outcome == outcome) {
			n += r.Count
		}
	}
	return n
}

// Stats reads the simulator's counters.
func (l *LLM) Stats(t testing.TB) LLMStats {
	t.Helper()
	var s LLMStats
	adminCall(t, http.MethodGet, l.AdminURL+"/stats", "", &s)
	return s
}

// adminCall sends body (when not empty) to url and decodes a 200 answer
// into out (when not nil); any other answer fails t.
func adminCall(t testing.TB, method, url, body string, out any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("standin: %s %s: %v", method, url, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := http.Client{Timeout: adminTimeout}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("standin: %s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("standin: %s %s: read: %v", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("standin: %s %s %s: %d %s", method, url, body, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("standin: %s %s: decode %s: %v", method, url, b, err)
		}
	}
}
