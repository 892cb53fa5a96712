package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// operatorClient publishes stops through the worker's operator API
// (POST /v1/stop) with a bearer token read from a file at every call, so a
// rotated Secret takes effect without a restart.
type operatorClient struct {
	base      string
	tokenFile string
	hc        *http.Client
}

func newOperatorClient(base, tokenFile string) *operatorClient {
	return &operatorClient{base: strings.TrimSuffix(base, "/"), tokenFile: tokenFile, hc: &http.Client{Timeout: 10 * time.Second}}
}

// Stop implements stopper. It returns an error naming the API's status and
// message when the stop was not accepted.
func (o *operatorClient) Stop(ctx context.Context, req pipeline.StopRequest) error {
	tok, err := os.ReadFile(o.tokenFile)
	if err != nil {
		return fmt.Errorf("operator: token: %w", err)
	}
	token := strings.TrimSpace(string(tok))
	if token == "" {
		return errors.New("operator: the token file is empty")
	}
	body, _ := json.Marshal(req) // plain fields: cannot fail
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, o.base+"/v1/stop", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+token)
	resp, err := o.hc.Do(hr)
	if err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("operator: stop answered %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return nil
}
