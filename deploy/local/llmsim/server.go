package llmsim

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chatguard/chatguard/pipeline"
)

const (
	maxRequestBody = 32 << 20 // images come as URLs, so prompts stay small
	maxAdminBody   = 1 << 20
	maxHeaderDelay = 10 * time.Minute
	stageOther     = "other"
)

// Server is one simulated endpoint. It is safe for concurrent use; its
// configuration can change while it serves.
type Server struct {
	name    string
	cfg     atomic.Pointer[Config]
	cfgMu   sync.Mutex // serializes configuration changes
	sched   *scheduler
	cache   *answerCache
	prefix  *prefixCache
	metrics *metrics
	serving serving // load-dependent latency and rate limits (serving.go)
	stats   statCounters
	seed    maphash.Seed
	seq     atomic.Uint64
	mux     *http.ServeMux

	closed    chan struct{}
	closeOnce sync.Once
}

// New returns a Server for cfg, or the configuration's problems. It starts
// no goroutines; serve its Handler and Close it when done.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("llmsim: %w", err)
	}
	cfg = cfg.clone()
	s := &Server{
		name:   cfg.Name,
		sched:  newScheduler(cfg.MaxRunning, cfg.MaxWaiting, cfg.PriorityScheduling),
		cache:  newAnswerCache(cfg.CacheSize),
		prefix: newPrefixCache(cfg.PrefixCacheBlocks),
		seed:   maphash.MakeSeed(),
		closed: make(chan struct{}),
	}
	s.cfg.Store(&cfg)
	s.metrics = newMetrics(cfg.Models[0], s.sched)
	s.serving.init(s, cfg.Models[0])
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /version", s.handleVersion)
	mux.HandleFunc("POST /tokenize", s.handleTokenize)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /admin/config", s.handleGetConfig)
	mux.HandleFunc("PUT /admin/config", s.handlePutConfig)
	mux.HandleFunc("GET /admin/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) })
	mux.HandleFunc("DELETE /admin/stats", func(w http.ResponseWriter, _ *http.Request) {
		s.ResetStats()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", "", "no route for "+r.Method+" "+r.URL.Path)
	})
	s.mux = mux
	return s, nil
}

// Handler serves the OpenAI API under /v1 (the clients' base URL is
// http://host:port/v1), /metrics, /health and the admin endpoints
// (/admin/config, /admin/stats). The admin endpoints need no key: the
// simulator is for local stacks and tests only.
func (s *Server) Handler() http.Handler { return s.mux }

// Name returns the endpoint's name (Config.Name).
func (s *Server) Name() string { return s.name }

// Config returns a copy of the current configuration.
func (s *Server) Config() Config { return s.cfg.Load().clone() }

// SetConfig replaces the configuration, or returns its problems and changes
// nothing. Name cannot change: cfg.Name is ignored. Requests already running
// keep the latencies they started with; limits apply at once (a raised
// MaxRunning admits waiters immediately).
func (s *Server) SetConfig(cfg Config) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	return s.setConfigLocked(cfg)
}

func (s *Server) setConfigLocked(cfg Config) error {
	cfg = cfg.clone()
	cfg.Name = s.name
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("llmsim: %w", err)
	}
	s.sched.setLimits(cfg.MaxRunning, cfg.MaxWaiting, cfg.PriorityScheduling)
	s.cache.resize(cfg.CacheSize)
	s.prefix.resize(cfg.PrefixCacheBlocks)
	s.cfg.Store(&cfg)
	return nil
}

// UpdateConfig applies fn to a copy of the configuration and installs the
// result if it is valid, atomically with respect to other updates.
func (s *Server) UpdateConfig(fn func(*Config)) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	cfg := s.cfg.Load().clone()
	fn(&cfg)
	return s.setConfigLocked(cfg)
}

// SetFaults replaces the fault rates, or returns their problems.
func (s *Server) SetFaults(f FaultRates) error {
	return s.UpdateConfig(func(c *Config) { c.Faults = f })
}

// Stats returns a snapshot of the request counters and the queue.
func (s *Server) Stats() Stats {
	return Stats{Name: s.name, Running: int(s.sched.nRunning.Load()), Waiting: int(s.sched.nWaiting.Load()), Rows: s.stats.rows(),
		PrefixCache: s.prefix.stats()}
}

// ResetStats zeroes the request counters (not the Prometheus metrics,
// which are cumulative by contract).
func (s *Server) ResetStats() {
	s.stats.reset()
	s.prefix.reset()
}

// Close ends every hang and every wait in the queue at once (those requests
// are dropped or refused with 503); requests already generating finish
// normally, bounded by their TTFT and ITL. It is idempotent and does not
// stop an http.Server serving the Handler.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
}

func (s *Server) count(endpoint, model, stage, outcome string) {
	s.stats.inc(statKey{endpoint, model, stage, outcome})
	if endpoint == EndpointChat {
		s.metrics.requests.WithLabelValues(outcome).Inc()
	}
}

func authorized(cfg *Config, r *http.Request) bool {
	if cfg.APIKey == "" {
		return true
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(key), []byte(cfg.APIKey)) == 1
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	cfg := s.cfg.Load()
	if !authorized(cfg, r) {
		s.count(EndpointModels, "", "", OutcomeUnauthorized)
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "", "Incorrect API key provided.")
		return
	}
	s.count(EndpointModels, "", "", OutcomeOK)
	list := modelList{Object: "list"}
	for _, m := range cfg.Models {
		list.Data = append(list.Data, modelCard{ID: m, Object: "model", Created: 1700000000, OwnedBy: "llmsim", MaxModelLen: cfg.MaxModelLen})
	}
	writeJSON(w, http.StatusOK, list)
}

// handleVersion answers as vLLM's GET /version does, when a version is
// configured; otherwise 404, as a managed API.
func (s *Server) handleVersion(w http.ResponseWriter, _ *http.Request) {
	v := s.cfg.Load().Version
	if v == "" {
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", "", "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"version": v})
}

func (s *Server) handleGetConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, redacted(s.Config()))
}

func (s *Server) handlePutConfig(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "read config: "+err.Error())
		return
	}
	var patchErr error
	err = s.UpdateConfig(func(c *Config) {
		next, err := patchConfig(*c, body)
		if err != nil {
			patchErr = err // leave c as it was: nothing changes
			return
		}
		*c = next
	})
	if err = errors.Join(patchErr, err); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, redacted(s.Config()))
}

// call is one chat-completion request on its way through.
type call struct {
	arrived time.Time
	cfg     *Config
	req     chatRequest
	model   string
	stage   string // a stage name or stageOther
	fault   Fault
	ttft    time.Duration
	itl     time.Duration
	// promptTokens is the prompt's size, cachedTokens the part of it the
	// prefix cache holds (uncachedPromptTokens in serving.go).
	promptTokens, cachedTokens int
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	c := call{arrived: time.Now(), cfg: s.cfg.Load(), stage: stageOther}
	if !authorized(c.cfg, r) {
		s.count(EndpointChat, "", "", OutcomeUnauthorized)
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "", "Incorrect API key provided.")
		return
	}
	if err := s.readCall(w, r, &c); err != nil {
		status, code, param := http.StatusBadRequest, "", ""
		outcome := OutcomeBadRequest
		var mbe *http.MaxBytesError
		var nf notFoundError
		switch {
		case errors.As(err, &mbe):
			status = http.StatusRequestEntityTooLarge
		case errors.As(err, &nf):
			status, code, param, outcome = http.StatusNotFound, "model_not_found", "model", OutcomeNotFound
		}
		s.count(EndpointChat, "", "", outcome)
		writeError(w, status, "invalid_request_error", code, param, err.Error())
		return
	}
	if s.refuseOverContext(w, &c) {
		return
	}
	if s.injectEarlyFault(w, r, &c) {
		return
	}
	c.promptTokens = promptTokens(&c.req)
	if s.refuseOverRate(w, &c) {
		return
	}
	ctx := r.Context()
	if err := s.sched.acquire(ctx, s.closed, c.req.Priority); err != nil {
		switch {
		case errors.Is(err, errQueueFull):
			s.count(EndpointChat, c.model, c.stage, OutcomeQueueFull)
			setRetryAfter(w.Header(), c.cfg.RetryAfter)
			writeError(w, c.cfg.QueueFullStatus, "server_error", "overloaded", "", "The server is overloaded: the waiting queue is full.")
		case errors.Is(err, errClosed):
			s.count(EndpointChat, c.model, c.stage, OutcomeCanceled)
			writeError(w, http.StatusServiceUnavailable, "server_error", "shutting_down", "", "The server is shutting down.")
		default:
			s.count(EndpointChat, c.model, c.stage, OutcomeCanceled)
		}
		return
	}
	defer s.sched.release()
	s.metrics.queue.Observe(time.Since(c.arrived).Seconds())
	s.generate(ctx, w, &c)
}

type notFoundError struct{ model string }

func (e notFoundError) Error() string { return fmt.Sprintf("The model `%s` does not exist.", e.model) }

// readCall parses and checks the request and its X-Sim headers.
func (s *Server) readCall(w http.ResponseWriter, r *http.Request, c *call) error {
	fault, forced, err := ParseFault(r.Header.Get(HeaderFault))
	if err != nil {
		return fmt.Errorf("%s: %w", HeaderFault, err)
	}
	c.ttft, c.itl = c.cfg.TTFT, c.cfg.ITL
	for _, h := range []struct {
		name string
		dst  *time.Duration
	}{{HeaderTTFT, &c.ttft}, {HeaderITL, &c.itl}} {
		v := r.Header.Get(h.name)
		if v == "" {
			continue
		}
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxHeaderDelay {
			return fmt.Errorf("%s: %q is not a number of milliseconds in [0, %d]", h.name, v, maxHeaderDelay.Milliseconds())
		}
		*h.dst = time.Duration(ms) * time.Millisecond
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody)).Decode(&c.req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return fmt.Errorf("request body is not a chat-completion request: %w", err)
	}
	req := &c.req
	switch {
	case req.Model == "":
		return errors.New("model is required")
	case !slices.Contains(c.cfg.Models, req.Model):
		return notFoundError{req.Model}
	case len(req.Messages) == 0:
		return errors.New("messages must not be empty")
	case req.MaxTokens != nil && *req.MaxTokens < 0, req.MaxCompletionTokens != nil && *req.MaxCompletionTokens < 0:
		return errors.New("max_tokens must not be negative")
	case req.Priority != 0 && !c.cfg.PriorityScheduling:
		// vLLM's answer under its default fcfs policy.
		return fmt.Errorf("got priority %d but priority scheduling is not enabled", req.Priority)
	}
	c.model = req.Model
	for _, m := range req.Messages {
		c.ttft += imageTTFT(c.cfg, m.Content.images)
	}
	if st := stageOf(req.ResponseFormat); st != "" {
		c.stage = string(st)
	}
	c.fault = fault
	if !forced {
		c.fault = c.cfg.Faults.pick(rand.Float64())
	}
	return nil
}

func stageOf(rf *responseFormat) pipeline.StageName {
	if rf == nil || rf.Type != "json_schema" || rf.JSONSchema == nil {
		return ""
	}
	if st := pipeline.StageName(rf.JSONSchema.Name); slices.Contains(pipeline.Stages, st) {
		return st
	}
	return ""
}

// injectEarlyFault answers the faults that happen before generation (status
// errors and hangs) and reports whether it did.
func (s *Server) injectEarlyFault(w http.ResponseWriter, r *http.Request, c *call) bool {
	switch c.fault {
	case Fault429:
		s.count(EndpointChat, c.model, c.stage, OutcomeFault429)
		setRetryAfter(w.Header(), c.cfg.RetryAfter)
		writeError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "", "Rate limit reached (simulated). Please try again later.")
	case Fault500:
		s.count(EndpointChat, c.model, c.stage, OutcomeFault500)
		writeError(w, http.StatusInternalServerError, "server_error", "internal_error", "", "The server had an error while processing your request (simulated).")
	case Fault503:
		s.count(EndpointChat, c.model, c.stage, OutcomeFault503)
		setRetryAfter(w.Header(), c.cfg.RetryAfter)
		writeError(w, http.StatusServiceUnavailable, "server_error", "overloaded", "", "The engine is currently overloaded (simulated). Please try again later.")
	case FaultHang:
		s.count(EndpointChat, c.model, c.stage, OutcomeHang)
		t := time.NewTimer(c.cfg.MaxHang)
		defer t.Stop()
		select {
		case <-r.Context().Done():
			return true
		case <-s.closed:
		case <-t.C:
		}
		panic(http.ErrAbortHandler) // close the connection without an answer
	default:
		return false
	}
	return true
}

// generate produces the answer with the configured timing.
func (s *Server) generate(ctx context.Context, w http.ResponseWriter, c *call) {
	promptTokens, cachedTokens := s.promptTokens(c)
	c.promptTokens, c.cachedTokens = promptTokens, cachedTokens
	s.metrics.promptTokens.Add(float64(promptTokens))
	c.ttft += s.prefillTime(c)

	content := s.answer(c)
	if c.cfg.Gullible {
		content = gullibleAnswer(c, content)
	}
	finish, outcome := "stop", OutcomeOK
	switch c.fault {
	case FaultMalformed:
		content, outcome = malform(content), OutcomeMalformed
	case FaultTruncate:
		end, _ := advanceTokens(content, 0, countTokens(content)/2)
		content, outcome = content[:end], OutcomeTruncate
	case FaultDrop:
		outcome = OutcomeDrop
	}
	if limit := c.req.maxTokens(); limit > 0 {
		if end, _ := advanceTokens(content, 0, limit); end < len(content) {
			content, finish = content[:end], "length"
			if outcome == OutcomeOK {
				outcome = OutcomeLength
			}
		}
	}
	u := usage{PromptTokens: promptTokens, CompletionTokens: countTokens(content)}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if c.cfg.PrefixCacheBlocks > 0 {
		u.PromptTokensDetails = &promptTokensDetails{CachedTokens: cachedTokens}
	}
	defer s.holdKV(u.TotalTokens)()

	// The outcome is counted just before the answer's last bytes go out,
	// as every other outcome is counted before its answer: a client that
	// has read the whole answer must find it in Stats at once. A client
	// that leaves during that last write is still counted as served.
	served := func() {
		s.count(EndpointChat, c.model, c.stage, outcome)
		s.metrics.genTokens.Add(float64(u.CompletionTokens))
		s.metrics.success.WithLabelValues(finish).Inc()
		s.metrics.e2e.Observe(time.Since(c.arrived).Seconds())
	}
	var ok bool
	if c.req.Stream {
		ok = s.stream(ctx, w, c, content, finish, u, served)
	} else {
		ok = s.complete(ctx, w, c, content, finish, u, served)
	}
	if !ok {
		s.count(EndpointChat, c.model, c.stage, OutcomeCanceled)
	}
}

// answer returns the content for the request. The analysis comes from the
// cache when the same transcript and images were seen before.
func (s *Server) answer(c *call) string {
	if c.stage == stageOther {
		if rf := c.req.ResponseFormat; rf != nil && (rf.Type == "json_object" || rf.Type == "json_schema") {
			return "{}"
		}
		return "llmsim is a rule-based stand-in, not a model: it answers the chatguard stages " +
			"(response_format json_schema named triage, extract, vision or judge)."
	}
	block := ""
	var images []string
	for _, m := range c.req.Messages {
		if block == "" {
			block = transcriptBlock(m.Content.text)
		}
		images = append(images, m.Content.images...)
	}
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(block)
	for _, u := range images {
		h.WriteByte(0)
		h.WriteString(u)
	}
	key := cacheKey{hash: h.Sum64(), n: len(block)}
	a, ok := s.cache.get(key)
	if !ok {
		a = analyzePrompt(block, images)
		s.cache.put(key, a)
	}
	a = applyHistory(a, historyOf(c))
	a = c.cfg.Errors.apply(a, block)
	return renderStage(pipeline.StageName(c.stage), a)
}

func jittered(d time.Duration, j float64) time.Duration {
	if d <= 0 || j == 0 {
		return d
	}
	return time.Duration(float64(d) * (1 + j*(2*rand.Float64()-1)))
}

// sleep waits d on t (reused across a request's waits), or returns false
// when the client goes away.
func (s *Server) sleep(ctx context.Context, t *time.Timer, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t.Reset(d)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// complete answers without streaming after TTFT + (n-1)·ITL, calling
// served just before it writes the answer. It reports false when the
// client went away first (served not called).
func (s *Server) complete(ctx context.Context, w http.ResponseWriter, c *call, content, finish string, u usage, served func()) bool {
	ttft := jittered(c.ttft, c.cfg.Jitter)
	wait := ttft
	if u.CompletionTokens > 1 {
		wait += jittered(s.tokenLatency(c)*time.Duration(u.CompletionTokens-1), c.cfg.Jitter)
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	if !s.sleep(ctx, t, wait) {
		return false
	}
	s.metrics.ttft.Observe((time.Since(c.arrived) - (wait - ttft)).Seconds())
	s.observeTPOT(wait-ttft, u.CompletionTokens-1)
	if c.fault == FaultDrop {
		s.count(EndpointChat, c.model, c.stage, OutcomeDrop)
		panic(http.ErrAbortHandler)
	}
	served()
	writeJSON(w, http.StatusOK, completion{
		ID: s.newID(), Object: "chat.completion", Created: time.Now().Unix(), Model: c.model,
		Choices: []choice{{Message: responseMessage{Role: "assistant", Content: content}, FinishReason: finish}},
		Usage:   u,
	})
	return true
}

// stream sends the answer as SSE chunks of TokensPerChunk tokens, the first
// after TTFT and each next after its tokens' ITL, calling served just
// before the last write (finish reason, usage, [DONE]). One timer per
// request, no goroutine per stream. It reports false when the client went
// away before that last write (served not called).
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, c *call, content, finish string, u usage, served func()) bool {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	// The headers go out with the first chunk: one write fewer per stream.
	w.WriteHeader(http.StatusOK)
	t := time.NewTimer(time.Hour)
	t.Stop()
	if !s.sleep(ctx, t, jittered(c.ttft, c.cfg.Jitter)) {
		return false
	}
	id, created := s.newID(), time.Now().Unix()
	perChunk := c.cfg.TokensPerChunk
	dropAfter := max(1, u.CompletionTokens/2)
	buf := make([]byte, 0, 256+perChunk*16)
	send := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	sent := 0
	for off, first := 0, true; first || off < len(content); first = false {
		end, n := advanceTokens(content, off, perChunk)
		if !first {
			d := jittered(s.tokenLatency(c)*time.Duration(n), c.cfg.Jitter)
			if !s.sleep(ctx, t, d) {
				return false
			}
			s.observeTPOT(d, n)
		}
		buf = appendChunk(buf[:0], id, c.model, created, first, content[off:end], "")
		if !send(buf) {
			return false
		}
		if first {
			s.metrics.ttft.Observe(time.Since(c.arrived).Seconds())
		}
		off, sent = end, sent+n
		if c.fault == FaultDrop && sent >= dropAfter {
			s.count(EndpointChat, c.model, c.stage, OutcomeDrop)
			panic(http.ErrAbortHandler) // the client sees the stream end without [DONE]
		}
	}
	buf = appendChunk(buf[:0], id, c.model, created, false, "", finish)
	if c.req.StreamOptions != nil && c.req.StreamOptions.IncludeUsage {
		buf = appendUsageChunk(buf, id, c.model, created, u)
	}
	buf = append(buf, "data: [DONE]\n\n"...)
	served()
	send(buf)
	return true
}

func (s *Server) newID() string {
	return "chatcmpl-sim" + strconv.FormatUint(s.seq.Add(1), 16)
}

// imageTTFT is what a request's image parts add to its TTFT: the vision
// encoder's time for each, and the fetch for each given as a URL rather
// than inline as a data: URL.
func imageTTFT(cfg *Config, images []string) time.Duration {
	var d time.Duration
	for _, u := range images {
		d += cfg.ImageTTFT
		if !strings.HasPrefix(u, "data:") {
			d += cfg.ImageURLFetch
		}
	}
	return d
}
