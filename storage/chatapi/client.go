// Package chatapi is the HTTP client of the chat-history API
// (GET /rooms/{room_id}/messages?from=…&to=…). It bounds every exchange,
// retries 5xx answers, 429s and timeouts a few times with full jitter
// (internal/retry, honouring the server's Retry-After), and
// classifies what is left: a missing room is permanent, everything transient
// is retryable so the job loop can hand the message back.
package chatapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

var _ pipeline.ChatSource = (*Client)(nil)

// Config configures a Client.
type Config struct {
	// BaseURL is the API root, e.g. http://chat.internal:8080.
	BaseURL string
	// Timeout bounds one HTTP attempt, body included.
	Timeout time.Duration
	// MaxAttempts bounds attempts per History call (1 = no retry).
	MaxAttempts int
	// RetryBase and RetryMax shape the full-jitter backoff between attempts.
	RetryBase, RetryMax time.Duration
	// MaxBodyBytes bounds the messages kept in memory. A bigger history is
	// trimmed while it is read (chatprep.Trimmer: the newest and the
	// signal-bearing messages stay, the rest are summed up), never refused:
	// flooding a room must not avoid its review.
	MaxBodyBytes int64
	// MaxReadBytes bounds how much of one answer is read at all; the rest
	// is left unread and the trim notice says so.
	MaxReadBytes int64
	// HTTPClient, when set, replaces the default transport (tests).
	HTTPClient *http.Client
	// Registerer, when set, receives the client's metrics.
	Registerer prometheus.Registerer
}

// maxRetryAfter bounds a server's Retry-After: SQS cannot hide a message
// for longer (the visibility timeout's maximum), so a longer ask means the
// same to the job loop.
const maxRetryAfter = 12 * time.Hour

// DefaultConfig returns the defaults; BaseURL must still be set.
func DefaultConfig() Config {
	return Config{Timeout: 5 * time.Second, MaxAttempts: 3, RetryBase: 100 * time.Millisecond, RetryMax: 2 * time.Second, MaxBodyBytes: 8 << 20, MaxReadBytes: 64 << 20}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.BaseURL == "" {
		errs = append(errs, errors.New("chat api url is required"))
	} else if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("chat api url %q is not an http(s) URL", c.BaseURL))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("chat timeout must be positive"))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, errors.New("chat max attempts must be at least 1"))
	}
	if c.RetryBase <= 0 || c.RetryMax < c.RetryBase {
		errs = append(errs, errors.New("chat retry base must be positive and not above retry max"))
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, errors.New("chat max body bytes must be positive"))
	}
	if c.MaxReadBytes < c.MaxBodyBytes {
		errs = append(errs, errors.New("chat max read bytes must be at least max body bytes"))
	}
	return errors.Join(errs...)
}

// Client fetches chat history. It is safe for concurrent use.
type Client struct {
	cfg      Config
	base     *url.URL
	hc       *http.Client
	clk      clock.Clock // the waits between attempts, Retry-After dates, latency
	requests *prometheus.CounterVec
	latency  prometheus.Histogram
	trimmed  prometheus.Counter
	dropped  prometheus.Counter
}

// Option sets what a client is built with besides its Config: the
// collaborators an operator does not configure.
type Option func(*Client)

// WithClock runs the waits between attempts, the reading of an HTTP-date
// Retry-After and the latency metric on c instead of the wall clock (nil
// keeps the wall clock). Timeout stays on real time: it bounds the wait
// for another machine's answer.
func WithClock(c clock.Clock) Option {
	return func(cl *Client) { cl.clk = clock.Or(c) }
}

// New returns a client for cfg, or the configuration's problems.
func New(cfg Config, opts ...Option) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("chatapi: %w", err)
	}
	base, _ := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		tr.ResponseHeaderTimeout = cfg.Timeout
		hc = &http.Client{Transport: tr}
	}
	c := &Client{
		cfg: cfg, base: base, hc: hc, clk: clock.Real(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_chatapi_requests_total",
			Help: "Chat-history HTTP attempts by outcome (ok, not_found, client_error, server_error, timeout, error).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chatguard_chatapi_request_duration_seconds",
			Help:    "Duration of one chat-history HTTP attempt.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
	}
	for _, o := range opts {
		o(c)
	}
	c.trimmed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chatguard_chatapi_histories_trimmed_total",
		Help: "Chat histories over the size bound that were trimmed (or read only in part) instead of refused.",
	})
	c.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chatguard_chatapi_messages_trimmed_total",
		Help: "Messages left out of trimmed histories (summed up in the trim notice).",
	})
	if cfg.Registerer != nil {
		for _, col := range []prometheus.Collector{c.requests, c.latency, c.trimmed, c.dropped} {
			if err := cfg.Registerer.Register(col); err != nil {
				return nil, fmt.Errorf("chatapi: metrics: %w", err)
			}
		}
	}
	return c, nil
}

// History returns the room's messages in [from, to). A 404 is a
// *pipeline.PermanentError; 5xx, 429, timeouts and transport errors are
// retried up to MaxAttempts and then returned as *pipeline.RetryableError
// (with the server's Retry-After, if any); other 4xx are permanent. A
// cancelled ctx returns its error at once, unwrapped by retry types.
func (c *Client) History(ctx context.Context, roomID string, from, to time.Time) ([]pipeline.ChatMessage, error) {
	u := *c.base
	u.Path = c.base.Path + "/rooms/" + roomID + "/messages"
	u.RawPath = c.base.EscapedPath() + "/rooms/" + url.PathEscape(roomID) + "/messages"
	q := url.Values{}
	q.Set("from", from.UTC().Format(time.RFC3339Nano))
	q.Set("to", to.UTC().Format(time.RFC3339Nano))
	u.RawQuery = q.Encode()
	target := u.String()

	var msgs []pipeline.ChatMessage
	policy := retry.Policy{Initial: c.cfg.RetryBase, Max: c.cfg.RetryMax, Attempts: c.cfg.MaxAttempts}
	err := retry.Do(ctx, policy, retry.Options{Clock: c.clk}, func(ctx context.Context) error {
		sctx, span := startFetchSpan(ctx, c.base.Host)
		m, after, err := c.once(sctx, target, roomID)
		endFetchSpan(span, len(m), err)
		var perm *pipeline.PermanentError
		switch {
		case err == nil:
			msgs = m
			return nil
		case ctx.Err() != nil, errors.As(err, &perm):
			return retry.Permanent(err)
		case after > c.cfg.RetryMax:
			// The server asks for longer than this call may wait: hand it
			// to the job loop, which spaces redeliveries.
			return retry.Permanent(pipeline.Retryable(err, after))
		case after > 0:
			return retry.After(err, after)
		}
		return err
	})
	if err == nil {
		return msgs, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("chatapi: history: %w", context.Cause(ctx))
	}
	var (
		perm *pipeline.PermanentError
		re   *pipeline.RetryableError
	)
	if errors.As(err, &perm) || errors.As(err, &re) {
		return nil, err
	}
	return nil, pipeline.Retryable(err, 0)
}

// once makes one bounded attempt; it returns the server's Retry-After.
func (c *Client) once(ctx context.Context, target, roomID string) ([]pipeline.ChatMessage, time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, target, nil)
	if err != nil {
		return nil, 0, pipeline.Permanent(fmt.Errorf("chatapi: request: %w", err))
	}
	req.Header.Set("Accept", "application/json")
	// The chat service can join the review's trace.
	propagation.TraceContext{}.Inject(actx, propagation.HeaderCarrier(req.Header))
	start := c.clk.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		outcome := transportOutcome(err)
		c.observe(start, outcome)
		if outcome == "timeout" {
			return nil, 0, fmt.Errorf("chatapi: get: timeout after %s: %w", c.cfg.Timeout, err)
		}
		return nil, 0, fmt.Errorf("chatapi: get: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Drain a little so the connection can be reused; an error body
		// says nothing we keep.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound:
		c.observe(start, "not_found")
		return nil, 0, pipeline.Permanent(fmt.Errorf("chatapi: room %q not found", roomID))
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		c.observe(start, "server_error")
		return nil, c.retryAfter(resp.Header.Get("Retry-After")), fmt.Errorf("chatapi: status %d", resp.StatusCode)
	default:
		c.observe(start, "client_error")
		return nil, 0, pipeline.Permanent(fmt.Errorf("chatapi: status %d", resp.StatusCode))
	}
	msgs, trim, err := c.decode(resp.Body, roomID)
	if err != nil {
		c.observe(start, transportOutcome(err))
		return nil, 0, err
	}
	if trim.Any() {
		c.trimmed.Inc()
		c.dropped.Add(float64(trim.Dropped))
	}
	c.observe(start, "ok")
	return msgs, 0, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// decode reads a history answer message by message into a Trimmer, so
// memory stays within MaxBodyBytes however big the answer is, and reads at
// most MaxReadBytes of it. Running into that bound is not an error: what
// was read is reviewed and the trim notice says the rest is unread.
func (c *Client) decode(body io.Reader, roomID string) ([]pipeline.ChatMessage, pipeline.HistoryTrim, error) {
	cr := &countingReader{r: io.LimitReader(body, c.cfg.MaxReadBytes)}
	dec := json.NewDecoder(cr)
	t := chatprep.NewTrimmer(c.cfg.MaxBodyBytes, 0)
	atBound := func(err error) bool {
		return cr.n >= c.cfg.MaxReadBytes && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF))
	}
	fail := func(err error) ([]pipeline.ChatMessage, pipeline.HistoryTrim, error) {
		if atBound(err) {
			t.MarkUnread()
			return t.Messages(), t.Trim(), nil
		}
		return nil, pipeline.HistoryTrim{}, fmt.Errorf("chatapi: decode: %w", err)
	}
	if tok, err := dec.Token(); err != nil {
		return fail(err)
	} else if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, pipeline.HistoryTrim{}, errors.New("chatapi: decode: the answer is not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		key, _ := tok.(string)
		switch key {
		case "room_id":
			var id string
			if err := dec.Decode(&id); err != nil {
				return fail(err)
			}
			if id != "" && id != roomID {
				return nil, pipeline.HistoryTrim{}, errors.New("chatapi: answer is for another room")
			}
		case "messages":
			tok, err := dec.Token()
			if err != nil {
				return fail(err)
			}
			if tok == nil {
				continue // "messages": null
			}
			if d, ok := tok.(json.Delim); !ok || d != '[' {
				return nil, pipeline.HistoryTrim{}, errors.New("chatapi: decode: messages is not an array")
			}
			for dec.More() {
				var m pipeline.ChatMessage
				if err := dec.Decode(&m); err != nil {
					return fail(err)
				}
				t.Add(m)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return fail(err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fail(err)
			}
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return fail(err)
	}
	return t.Messages(), t.Trim(), nil
}

func (c *Client) observe(start time.Time, outcome string) {
	c.requests.WithLabelValues(outcome).Inc()
	c.latency.Observe(c.clk.Since(start).Seconds())
}

func transportOutcome(err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return "timeout"
	}
	return "error"
}

// retryAfter reads a Retry-After header (0 when absent or unusable),
// clamped to maxRetryAfter so that no value can overflow.
func (c *Client) retryAfter(h string) time.Duration {
	d, _ := retry.ParseRetryAfter(h, c.clk.Now(), maxRetryAfter)
	return d
}
