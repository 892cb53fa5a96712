package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

// Role is a chat message's role in a request.
type Role string

// The roles a stage request uses.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one message of a stage request. ImageURLs become image_url
// parts (low detail) after the text.
type Message struct {
	Role      Role
	Text      string
	ImageURLs []string
}

// Request is one stage call.
type Request struct {
	Stage pipeline.StageName
	// Class is the request's traffic class (the zero value is batch).
	Class pipeline.Class
	// Messages are the prompt.
	Messages []Message
	// Schema is sent as response_format json_schema named after Stage.
	Schema json.RawMessage
	// MaxTokens bounds the answer; 0 leaves it to the server.
	MaxTokens int
	// Validate checks an answer; an error makes it invalid. Nil accepts
	// any answer.
	Validate func(content []byte) error
	// Repair returns the messages to append to Messages for the one repair
	// try an invalid or truncated answer gets; nil means no repair.
	Repair func(content []byte, problem error) []Message
	// OnAttempt, when set, is called after every attempt (repair tries
	// included) on the caller's goroutine: the hook for inference logs.
	OnAttempt func(Attempt)
	// Pseudonyms, when set, replaces contact details in the messages sent
	// to a pool whose PoolConfig.Pseudonymize is on (the third-party
	// fallback), and restores them in its answer before Validate. One per
	// review keeps the placeholders consistent across its stages. System
	// messages are sent as they are: they must hold the caller's own
	// instructions only, never chat text.
	Pseudonyms Pseudonymizer
}

// Pseudonymizer swaps contact details for typed placeholders and back
// (*chatprep.Pseudonyms).
type Pseudonymizer interface {
	Apply(text string) string
	RestoreJSON(content []byte) []byte
}

// Attempt outcomes, as reported in Attempt.Outcome and the attempts metric.
const (
	OutcomeOK          = "ok"
	OutcomeInvalid     = "invalid"
	OutcomeTruncated   = "truncated"
	OutcomeThrottled   = "throttled"
	OutcomeTimeout     = "timeout"
	OutcomeServerError = "server_error"
	OutcomeDropped     = "dropped"
	OutcomeTransport   = "transport"
	OutcomeRejected    = "rejected"
	OutcomeCanceled    = "canceled"
)

// Fallback reasons, as counted in chatguard_llm_fallbacks_total.
const (
	reasonCooldown    = "cooldown"
	reasonBreakerOpen = "breaker_open"
	reasonGateFull    = "gate_full"
	reasonLastAttempt = "last_attempt"
)

// Attempt describes one call to a pool.
type Attempt struct {
	// N counts the stage's attempts from 1.
	N      int
	Pool   pipeline.Pool
	Model  string
	Repair bool
	// Outcome is one of the Outcome constants.
	Outcome string
	// Err is the attempt's error (nil when Outcome is ok).
	Err       error
	TTFT      time.Duration
	Latency   time.Duration
	TokensIn  int
	TokensOut int
	// TokensCached are the prompt tokens the server served from its
	// prefix cache (usage.prompt_tokens_details.cached_tokens; 0 when it
	// does not say), and CostUSD the attempt's cost at the pool's Price.
	TokensCached int
	CostUSD      float64
	// Content is the answer as streamed (ok, invalid and truncated
	// outcomes); it is model output and may quote chat text.
	Content []byte
	// Trace is the span context of the attempt's span (of the caller's
	// span when the attempt has none), so that what OnAttempt sends on
	// joins the trace.
	Trace trace.SpanContext
	// responseModel is the model the server said answered (its chunks'
	// model field), for the attempt's span.
	responseModel string
}

// Response is a stage's validated answer.
type Response struct {
	Content []byte
	// Pool and Model answered.
	Pool  pipeline.Pool
	Model string
	// Attempts counts every call made for the stage, repair tries included.
	Attempts int
	// TTFT is the answering attempt's time to first token.
	TTFT time.Duration
	// Latency is the stage's whole duration, waits and retries included.
	Latency time.Duration
	// TokensIn and TokensOut sum every attempt: what the stage cost.
	TokensIn, TokensOut int
	// TokensCached and CostUSD sum every attempt too (see Attempt).
	TokensCached int
	CostUSD      float64
}

// Router sends stage calls to the pools. It is safe for concurrent use and
// meant to be shared by every caller in the process: its gates, cooldowns
// and breakers only work when shared.
type Router struct {
	cfg      Config
	primary  *pool
	fallback *pool // nil when not configured
	m        *metrics
	clk      clock.Clock // cooldowns, breaker windows, backoff, latencies
	backoff  retry.Policy
	tok      tokenizer // the primary's tokenizer, see CountTokens
	fleet    *fleet    // limits shared across replicas (fleet.go); nil when off
}

// Option sets what a router is built with besides its Config: the
// collaborators an operator does not configure.
type Option func(*Router)

// WithClock runs the router's cooldowns, breaker windows, backoff, waits
// for a pool and latencies on c instead of the wall clock (nil keeps the
// wall clock). An attempt's AttemptTimeout and the fleet store's timeouts
// stay on real time: they bound waits on other machines.
func WithClock(c clock.Clock) Option {
	return func(r *Router) { r.clk = clock.Or(c) }
}

// New builds a router from cfg (defaults applied, then validated) and
// registers its metrics on reg (nil registers nothing). It makes no network
// calls.
func New(cfg Config, reg prometheus.Registerer, opts ...Option) (*Router, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Router{cfg: cfg, clk: clock.Real(), backoff: retry.Policy{Initial: cfg.BaseBackoff, Max: cfg.MaxBackoff}}
	for _, o := range opts {
		o(r)
	}
	r.primary = newPool(cfg.Primary, r.clk)
	if cfg.Fallback.Enabled() {
		r.fallback = newPool(cfg.Fallback, r.clk)
	}
	r.attachFleet()
	m, err := newMetrics(reg, r)
	if err != nil {
		return nil, err
	}
	r.m = m
	return r, nil
}

func (r *Router) pools() []*pool {
	if r.fallback == nil {
		return []*pool{r.primary}
	}
	return []*pool{r.primary, r.fallback}
}

// Models returns the model ids of the primary and fallback pools (fallback
// empty when not configured), for the pipeline version.
func (r *Router) Models() (primary, fallback string) {
	if r.fallback != nil {
		fallback = r.fallback.cfg.Model
	}
	return r.primary.cfg.Model, fallback
}

// Complete runs one stage call to a validated answer. It returns:
//   - the wrapped context.Cause(ctx) when ctx ends, or the wrapped result of
//     pipeline.CheckStop(ctx), which is checked before every attempt and on
//     every streamed chunk (a *pipeline.StoppedError survives errors.As);
//   - a *pipeline.PermanentError when a pool rejected the request itself
//     (400, 413, 422): no retry can fix the prompt;
//   - a *pipeline.UnusableAnswerError when every attempt got an answer and
//     none was usable (invalid or truncated): the chat, not the pools, is
//     the cause, so it is neither retried nor counted against the models'
//     health;
//   - a *pipeline.RetryableError when every attempt failed and at least one
//     for the pool's sake (transport, timeout, 5xx, 429), or no pool could
//     take the call before the deadline; After is when the primary's
//     cooldown ends, if it is cooling.
func (r *Router) Complete(ctx context.Context, req Request) (Response, error) {
	c := &completion{r: r, st: string(req.Stage), start: r.now(), unusable: true}
	for c.attempted < r.cfg.MaxAttempts {
		if serr := pipeline.CheckStop(ctx); serr != nil {
			c.finish("none", OutcomeCanceled)
			return c.resp, fmt.Errorf("llm: %s: %w", c.st, serr)
		}
		l, reason, err := c.take(ctx, req.Class)
		if err != nil {
			return c.resp, err
		}
		if !r.fleetAdmit(ctx, l, &req, req.Messages) {
			// The fleet's fallback budget is spent: choose again.
			l.abandon(r.now())
			if ctx.Err() != nil {
				c.finish("none", OutcomeCanceled)
				return c.resp, fmt.Errorf("llm: %s: %w", c.st, context.Cause(ctx))
			}
			continue
		}
		if done, err := c.try(ctx, l, reason, &req); done {
			return c.resp, err
		}
	}
	return c.resp, c.exhausted(req.Stage)
}

// completion is one Complete call's progress across its attempts.
type completion struct {
	r        *Router
	st       string // the stage, as metrics label it
	start    time.Time
	resp     Response
	lastErr  error
	lastPool *pool
	failRun  int // consecutive failures, for the backoff
	// attempted counts every call made, repair tries included.
	attempted int
	// unusable: every attempt so far was answered, and wrongly.
	unusable bool
}

func (c *completion) finish(pool, outcome string) {
	c.r.m.requests.WithLabelValues(c.st, pool, outcome).Inc()
}

// take acquires the next attempt's pool. Back on the pool that just
// failed, it first backs off with full jitter, without holding the slot
// while it waits, then chooses again: the world may have changed. A switch
// to the other pool skips the wait: never wait out a pool's backoff
// before trying the other. Its error is Complete's.
func (c *completion) take(ctx context.Context, class pipeline.Class) (lease, string, error) {
	r := c.r
	last := c.attempted == r.cfg.MaxAttempts-1
	l, reason, err := r.acquireCounted(ctx, class, c.lastPool, last)
	if err != nil {
		return lease{}, "", c.noPool(ctx, class, err)
	}
	if l.p != c.lastPool || c.failRun == 0 {
		return l, reason, nil
	}
	l.abandon(r.now())
	if err := clock.Sleep(ctx, r.clk, r.backoff.Delay(c.failRun)); err != nil {
		c.finish("none", OutcomeCanceled)
		return lease{}, "", fmt.Errorf("llm: %s: %w", c.st, err)
	}
	if l, reason, err = r.acquireCounted(ctx, class, c.lastPool, last); err != nil {
		return lease{}, "", c.noPool(ctx, class, err)
	}
	return l, reason, nil
}

// noPool is Complete's error when acquire found no pool: ctx's cause when
// it ended, else a retryable error carrying the last attempt's.
func (c *completion) noPool(ctx context.Context, class pipeline.Class, err error) error {
	if ctx.Err() != nil {
		c.finish("none", OutcomeCanceled)
		return fmt.Errorf("llm: %s: %w", c.st, context.Cause(ctx))
	}
	reason := refusedDeadline
	if errors.Is(err, errAllFull) {
		reason = refusedFull
	}
	c.r.m.class.refused.WithLabelValues(class.String(), reason).Inc()
	c.finish("none", "failed")
	return pipeline.Retryable(fmt.Errorf("llm: %s: %w", c.st, errors.Join(err, c.lastErr)), c.r.primaryWait())
}

// try makes one attempt (with its repair) on l. done reports that
// Complete ends with err: an answer (err nil), a cancel or a rejection.
func (c *completion) try(ctx context.Context, l lease, reason string, req *Request) (done bool, err error) {
	r, p := c.r, l.p
	if p == r.fallback && reason != "" {
		r.m.fallbacks.WithLabelValues(c.st, reason).Inc()
	}
	inFlight := r.m.class.inFlight.WithLabelValues(req.Class.String(), string(p.cfg.Name))
	inFlight.Inc()
	a, content := r.attemptWithRepair(ctx, l, req, req.Messages, &c.attempted, &c.resp)
	inFlight.Dec()
	l.release()
	c.lastPool = p
	c.resp.Attempts = c.attempted
	if a.Outcome == OutcomeOK {
		c.resp.Content, c.resp.Pool, c.resp.Model, c.resp.TTFT = content, p.cfg.Name, p.cfg.Model, a.TTFT
		c.resp.Latency = r.now().Sub(c.start)
		c.finish(string(p.cfg.Name), OutcomeOK)
		return true, nil
	}
	c.lastErr = a.Err
	c.failRun++
	// A repair pair's first attempt was invalid or truncated by
	// construction, so its last attempt decides.
	c.unusable = c.unusable && (a.Outcome == OutcomeInvalid || a.Outcome == OutcomeTruncated)
	switch a.Outcome {
	case OutcomeCanceled:
		c.finish("none", OutcomeCanceled)
		return true, fmt.Errorf("llm: %s: %w", c.st, a.Err)
	case OutcomeRejected:
		c.finish("none", OutcomeRejected)
		return true, pipeline.Permanent(fmt.Errorf("llm: %s: %w", c.st, a.Err))
	}
	return false, nil
}

// exhausted is Complete's error once every attempt failed.
func (c *completion) exhausted(stage pipeline.StageName) error {
	c.resp.Attempts = c.attempted
	if c.unusable && c.attempted > 0 {
		c.finish("none", OutcomeInvalid)
		return fmt.Errorf("llm: %w", &pipeline.UnusableAnswerError{Stage: stage, Attempts: c.attempted, Err: c.lastErr})
	}
	c.finish("none", "failed")
	return pipeline.Retryable(fmt.Errorf("llm: %s: %d attempts failed, last: %w", c.st, c.attempted, c.lastErr), c.r.primaryWait())
}

// attemptWithRepair makes one attempt on p (whose slot the caller holds)
// and, when the answer is invalid or truncated and attempts remain, one
// repair try on the same pool. It returns the last attempt.
func (r *Router) attemptWithRepair(ctx context.Context, l lease, req *Request, msgs []Message, attempted *int, resp *Response) (Attempt, []byte) {
	a := r.attempt(ctx, l, req, msgs, *attempted+1, false, resp)
	*attempted++
	if (a.Outcome != OutcomeInvalid && a.Outcome != OutcomeTruncated) || req.Repair == nil || *attempted >= r.cfg.MaxAttempts {
		return a, a.Content
	}
	fix := req.Repair(a.Content, a.Err)
	repaired := make([]Message, 0, len(msgs)+len(fix))
	repaired = append(append(repaired, msgs...), fix...)
	a = r.attempt(ctx, l, req, repaired, *attempted+1, true, resp)
	*attempted++
	return a, a.Content
}

// primaryWait is how long until the primary is worth calling again, as a
// hint for the job loop's redelivery delay.
func (r *Router) primaryWait() time.Duration {
	if d := r.primary.cooldown.end().Sub(r.now()); d > 0 {
		return d
	}
	return 0
}

var (
	errNoPool  = errors.New("no pool can take the call before the deadline")
	errAllFull = errors.New("every pool is full, cooling down or open")
)

// acquireCounted is acquire, counted in the class's waiting gauge while
// it looks for a slot.
func (r *Router) acquireCounted(ctx context.Context, class pipeline.Class, lastPool *pool, last bool) (lease, string, error) {
	w := r.m.class.waiting.WithLabelValues(class.String())
	w.Inc()
	defer w.Dec()
	return r.acquire(ctx, class, lastPool, last)
}

// lease is a taken gate slot, and a breaker probe slot when the pool was
// half-open.
type lease struct {
	p     *pool
	probe bool
	fl    fleetLease // the fleet-wide primary lease, when the fleet bounds it
}

// release gives the gate slot back after a call; the call itself reported
// to the breaker (and freed a probe slot) through breaker.done.
func (l lease) release() {
	l.fl.release()
	l.p.gate.release()
}

// abandon gives back a lease that made no call: the gate slot and, when it
// took one, the half-open probe slot. Leaking that probe slot would leave
// the breaker half-open with every probe taken, refusing every caller for
// good.
func (l lease) abandon(now time.Time) {
	if l.probe {
		l.p.breaker.done(now, true, false, true)
	}
	l.fl.release()
	l.p.gate.release()
}

// take acquires p's slot (waiting up to wait) and asks its breaker.
func (p *pool) take(ctx context.Context, class pipeline.Class, wait time.Duration) (lease, bool) {
	if !p.gate.acquire(ctx, class, wait) {
		return lease{}, false
	}
	// The pool may have been throttled while we waited for the slot.
	if p.cooldown.active(p.clk.Now()) {
		p.gate.release()
		return lease{}, false
	}
	fl, ok := p.takeFleetLease(ctx, class, wait)
	if !ok {
		p.gate.release()
		return lease{}, false
	}
	ok, probe := p.breaker.allow(p.clk.Now(), true)
	if !ok {
		fl.release()
		p.gate.release()
		return lease{}, false
	}
	return lease{p: p, probe: probe, fl: fl}, true
}

// acquire picks a pool and takes a slot on its gate. The primary is passed
// over at once when it is cooling down or its breaker is open; a full
// primary gate is waited for only GateWait. On the last attempt after a
// primary failure the fallback is preferred. When no pool can take the
// call, a batch caller waits for the first gate release, cooldown end or
// breaker probe, bounded by ctx; an interactive caller is refused at once.
func (r *Router) acquire(ctx context.Context, class pipeline.Class, lastPool *pool, last bool) (lease, string, error) {
	preferFallback := last && lastPool == r.primary && r.fallback != nil
	for {
		// Take the wake channels before looking, so a release between the
		// look and the wait is not missed.
		primWake := r.primary.gate.waitCh()
		var fbWake <-chan struct{}
		if r.fallback != nil {
			fbWake = r.fallback.gate.waitCh()
		}
		now := r.now()
		why, primUntil := r.primary.unavailable(now)
		if why == "" && !preferFallback {
			wait := r.primary.cfg.GateWait
			if r.fallback == nil || !waits(class) {
				wait = 0
			}
			if l, ok := r.primary.take(ctx, class, wait); ok {
				return l, "", nil
			}
			why = reasonGateFull
		}
		if preferFallback && why == "" {
			why = reasonLastAttempt
		}
		timeBlocked := why == reasonCooldown || why == reasonBreakerOpen
		var fbUntil time.Time
		if r.fallback != nil {
			var fbWhy string
			fbWhy, fbUntil = r.fallbackUnavailable(now, class)
			if fbWhy == "" {
				if l, ok := r.fallback.take(ctx, class, 0); ok {
					return l, why, nil
				}
			}
			timeBlocked = timeBlocked && fbWhy != ""
		}
		if preferFallback && why == reasonLastAttempt {
			// The fallback cannot take it: the primary beats waiting.
			if l, ok := r.primary.take(ctx, class, 0); ok {
				return l, "", nil
			}
		}
		if !waits(class) {
			return lease{}, "", errAllFull
		}
		next := earliest(now, primUntil, fbUntil)
		if dl, ok := ctx.Deadline(); ok && timeBlocked && !next.IsZero() && next.After(dl) {
			return lease{}, "", errNoPool
		}
		// Gate releases wake us sooner; the cap bounds a missed wake-up.
		sleep := time.Second
		if !next.IsZero() {
			sleep = min(next.Sub(now), sleep)
		}
		t := r.clk.NewTimer(max(sleep, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return lease{}, "", ctx.Err()
		case <-t.Chan():
		case <-primWake:
			t.Stop()
		case <-fbWake:
			t.Stop()
		}
		preferFallback = false
	}
}

// now is the router's time.
func (r *Router) now() time.Time { return r.clk.Now() }

// earliest returns the soonest future time among ts, zero when none is.
func earliest(now time.Time, ts ...time.Time) time.Time {
	var best time.Time
	for _, t := range ts {
		if t.After(now) && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	return best
}
