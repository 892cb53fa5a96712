package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
)

// ServerFacts are what an endpoint says about itself where it can: vLLM
// answers GET /version and lists max_model_len in GET /v1/models; a
// managed API usually answers neither, and the report says so.
type ServerFacts struct {
	// Version is /version's "version" ("" when not answered).
	Version string
	// Models are /v1/models' entries.
	Models []ModelFact
	// Errs say what could not be asked, one line per question.
	Errs []string
}

// ModelFact is one /v1/models entry.
type ModelFact struct {
	ID          string `json:"id"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
	OwnedBy     string `json:"owned_by,omitempty"`
}

// factsTimeout bounds each question: it is a small GET to a server that
// is about to be measured.
const factsTimeout = 10 * time.Second

// askServer asks ep for its version and models. It never fails: what it
// could not learn is in Errs.
func askServer(ctx context.Context, cfg Config, ep Endpoint) ServerFacts {
	var f ServerFacts
	base := strings.TrimSuffix(ep.BaseURL, "/")
	var ver struct {
		Version string `json:"version"`
	}
	// vLLM serves /version at the root, beside /v1.
	if err := getJSON(ctx, cfg, ep, strings.TrimSuffix(base, "/v1")+"/version", &ver); err != nil {
		f.Errs = append(f.Errs, "version: "+err.Error())
	}
	f.Version = ver.Version
	var models struct {
		Data []ModelFact `json:"data"`
	}
	if err := getJSON(ctx, cfg, ep, base+"/models", &models); err != nil {
		f.Errs = append(f.Errs, "models: "+err.Error())
	}
	f.Models = models.Data
	return f
}

func getJSON(ctx context.Context, cfg Config, ep Endpoint, target string, v any) error {
	ctx, cancel := clock.WithTimeout(ctx, clock.Or(cfg.Clock), factsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	if ep.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+ep.APIKey)
	}
	client := &http.Client{Transport: cfg.Transport}
	resp, err := client.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			return ue.Err // the *url.Error would repeat the URL
		}
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return json.Unmarshal(body, v)
}
