package llmsim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// promptTokens is the prompt's length as the simulator counts it.
func promptTokens(req *chatRequest) int {
	n := 0
	for _, m := range req.Messages {
		n += perMessageTokens + countTokens(m.Content.text) + imageTokens*len(m.Content.images)
	}
	return n
}

// refuseOverContext answers vLLM's 400 when the prompt and the answer's
// max_tokens do not fit MaxModelLen, and reports whether it did.
func (s *Server) refuseOverContext(w http.ResponseWriter, c *call) bool {
	limit := c.cfg.MaxModelLen
	if limit <= 0 {
		return false
	}
	prompt, answer := promptTokens(&c.req), c.req.maxTokens()
	if prompt+answer <= limit {
		return false
	}
	s.count(EndpointChat, c.model, c.stage, OutcomeBadRequest)
	writeError(w, http.StatusBadRequest, "BadRequestError", "", "", fmt.Sprintf(
		"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
		limit, prompt+answer, prompt, answer))
	return true
}

// defaultMaxModelLen is what /tokenize reports when MaxModelLen is 0.
const defaultMaxModelLen = 32768

// handleTokenize serves vLLM's POST /tokenize for a prompt string or chat
// messages: {"count", "max_model_len", "tokens"}.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	cfg := s.cfg.Load()
	if !authorized(cfg, r) {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "", "Incorrect API key provided.")
		return
	}
	var req struct {
		Model    string        `json:"model"`
		Prompt   *string       `json:"prompt"`
		Messages []chatMessage `json:"messages"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", "", "", "request body is not a tokenize request: "+err.Error())
		return
	}
	n := 0
	switch {
	case req.Prompt != nil:
		n = countTokens(*req.Prompt)
	case len(req.Messages) > 0:
		n = promptTokens(&chatRequest{Messages: req.Messages})
	default:
		writeError(w, http.StatusBadRequest, "BadRequestError", "", "", "prompt or messages is required")
		return
	}
	limit := cfg.MaxModelLen
	if limit <= 0 {
		limit = defaultMaxModelLen
	}
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = 1000 + i%30000
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": n, "max_model_len": limit, "tokens": tokens})
}
