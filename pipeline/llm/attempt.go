package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

// ErrTruncated is the Attempt.Err (and the problem a Repair hook gets) of
// an answer cut at the token limit.
var ErrTruncated = errors.New("llm: answer truncated at the token limit")

// stopError carries a pipeline.CheckStop result out of a stream.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }
func (e *stopError) Unwrap() error { return e.err }

// errNoFinish marks a stream that ended without a finish reason: the
// connection dropped mid-answer.
var errNoFinish = errors.New("stream ended without a finish reason")

// errAnswerCap marks a stream that passed answerCap: a server that ignores
// max_tokens must not fill the process's memory.
var errAnswerCap = errors.New("answer passed its size bound")

// maxBytesPerToken bounds the bytes one answer token can take (a token is
// a few UTF-8 characters at most), and DefaultAnswerCap the answer of a
// request without MaxTokens.
const (
	maxBytesPerToken = 16
	DefaultAnswerCap = 1 << 20
)

// answerCap is the most bytes of answer read for req.
func answerCap(req *Request) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens * maxBytesPerToken
	}
	return DefaultAnswerCap
}

// attempt makes one streaming call on the leased pool, validates the
// answer, updates the pool's breaker and cooldown, records metrics and calls
// OnAttempt.
func (r *Router) attempt(ctx context.Context, l lease, req *Request, msgs []Message, n int, repair bool, resp *Response) Attempt {
	p := l.p
	a := Attempt{N: n, Pool: p.cfg.Name, Model: p.cfg.Model, Repair: repair}
	ctx, span := startAttemptSpan(ctx, p, req, n, repair)
	defer endAttemptSpan(span, &a)
	meta := &attemptMeta{}
	actx, cancel := context.WithTimeout(context.WithValue(ctx, metaKey{}, meta), p.cfg.AttemptTimeout)
	defer cancel()
	start := r.now()
	inFlight := p.gate.used()
	pseudo := p.cfg.Pseudonymize && req.Pseudonyms != nil
	if pseudo {
		msgs = pseudonymize(req.Pseudonyms, msgs)
	}
	content, finish, err := r.stream(actx, p, req, msgs, &a, start)
	if pseudo && content != nil {
		content = req.Pseudonyms.RestoreJSON(content)
	}
	a.Latency = r.now().Sub(start)
	if p.adaptive != nil {
		p.adaptive.observe(r.now(), a.TTFT, inFlight)
	}
	a.Content = content
	neutral, failed := r.classify(ctx, actx, l, req, &a, meta, finish, err)
	p.breaker.done(r.now(), l.probe, failed, neutral && !failed)
	r.account(ctx, p, req, &a, resp)
	return a
}

// classify sets a's outcome and error from how the stream ended, and
// cools the pool down when it throttled. neutral: the attempt says nothing
// of the pool's health; failed: it counts against it.
func (r *Router) classify(ctx, actx context.Context, l lease, req *Request, a *Attempt, meta *attemptMeta, finish string, err error) (neutral, failed bool) {
	p, content := l.p, a.Content
	switch {
	case errors.Is(err, errAnswerCap):
		a.Outcome, a.Err = OutcomeTruncated, fmt.Errorf("%w: the answer passed %d bytes", ErrTruncated, answerCap(req))
	case err == nil && finish == string(openai.FinishReasonLength):
		a.Outcome, a.Err = OutcomeTruncated, ErrTruncated
	case err == nil && finish == "":
		a.Outcome, a.Err, failed = OutcomeDropped, errNoFinish, true
	case err == nil:
		a.Outcome = OutcomeOK
		if req.Validate != nil {
			if verr := req.Validate(content); verr != nil {
				a.Outcome, a.Err = OutcomeInvalid, verr
			}
		}
	case ctx.Err() != nil:
		a.Outcome, a.Err, neutral = OutcomeCanceled, context.Cause(ctx), true
	case errors.As(err, new(*stopError)):
		a.Outcome, a.Err, neutral = OutcomeCanceled, errors.Unwrap(err), true
	case errors.Is(actx.Err(), context.DeadlineExceeded):
		a.Outcome, a.Err, failed = OutcomeTimeout, fmt.Errorf("attempt timed out after %s: %w", p.cfg.AttemptTimeout, err), true
	default:
		status := httpStatus(err)
		switch {
		case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
			a.Outcome, a.Err, neutral = OutcomeThrottled, err, true
			now := r.now()
			p.cooldown.extend(now.Add(cooldownFor(meta.retryAfter, meta.retryAfterMS, p.cfg, now)))
		case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge || status == http.StatusUnprocessableEntity:
			// The request itself is wrong; another pool or attempt will not
			// make it right (a shorter prompt may: see ContextLengthError).
			a.Outcome, a.Err, neutral = OutcomeRejected, contextLength(err), true
		case status >= 400:
			// 5xx, 408, and 401/403/404 (a misconfigured pool): the pool
			// is unhealthy for us.
			a.Outcome, a.Err, failed = OutcomeServerError, err, true
		case isDecodeError(err):
			a.Outcome, a.Err, failed = OutcomeDropped, err, true
		default:
			a.Outcome, a.Err, failed = OutcomeTransport, err, true
		}
	}
	return neutral, failed
}

// account records a's metrics and cost, adds its tokens and cost to resp
// and tells req.OnAttempt. The latency histograms carry the attempt's
// trace as an exemplar when it is sampled (ctx holds its span).
func (r *Router) account(ctx context.Context, p *pool, req *Request, a *Attempt, resp *Response) {
	st, pl := string(req.Stage), string(p.cfg.Name)
	r.m.attempts.WithLabelValues(st, pl, a.Outcome).Inc()
	observeTraced(ctx, r.m.latency.WithLabelValues(st, pl), a.Latency.Seconds())
	if a.TTFT > 0 {
		observeTraced(ctx, r.m.ttft.WithLabelValues(st, pl), a.TTFT.Seconds())
		r.m.class.ttft.WithLabelValues(req.Class.String(), pl).Observe(a.TTFT.Seconds())
	}
	if a.TokensIn > 0 {
		r.m.tokens.WithLabelValues(st, pl, "in").Add(float64(a.TokensIn))
	}
	if a.TokensOut > 0 {
		r.m.tokens.WithLabelValues(st, pl, "out").Add(float64(a.TokensOut))
	}
	if a.TokensCached > 0 {
		r.m.tokens.WithLabelValues(st, pl, "cached").Add(float64(a.TokensCached))
	}
	a.CostUSD = p.cfg.Price.Cost(a.TokensIn, a.TokensCached, a.TokensOut, a.Latency)
	if a.CostUSD > 0 {
		r.m.cost.WithLabelValues(st, pl, req.Class.String()).Add(a.CostUSD)
	}
	resp.TokensIn += a.TokensIn
	resp.TokensOut += a.TokensOut
	resp.TokensCached += a.TokensCached
	resp.CostUSD += a.CostUSD
	if req.OnAttempt != nil {
		a.Trace = trace.SpanContextFromContext(ctx)
		req.OnAttempt(*a)
	}
}

// stream sends the request and reads the streamed answer. It returns the
// content, the finish reason ("" when the stream ended without one) and
// the first error.
func (r *Router) stream(ctx context.Context, p *pool, req *Request, msgs []Message, a *Attempt, start time.Time) ([]byte, string, error) {
	creq := openai.ChatCompletionRequest{
		Model:    p.cfg.Model,
		Messages: toOpenAI(msgs),
		// max_tokens, not max_completion_tokens: vLLM and every
		// OpenAI-compatible server we target honour it, while older vLLM
		// releases ignore the newer name (and so would not cap the answer).
		//lint:ignore SA1019 see above
		MaxTokens:     req.MaxTokens,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
	if req.Schema != nil {
		creq.ResponseFormat = &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name: string(req.Stage), Schema: req.Schema, Strict: true,
			},
		}
	}
	obs := ObserverFrom(ctx)
	if obs != nil {
		obs.Attempt(req.Stage, a.N, p.cfg.Name)
	}
	s, err := p.client.CreateChatCompletionStream(p.priority(ctx, req.Class), creq)
	if err != nil {
		return nil, "", err
	}
	defer s.Close()
	var buf bytes.Buffer
	limit := answerCap(req)
	finish := ""
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			if ctx.Err() != nil {
				// A cancelled body read can surface as EOF.
				return buf.Bytes(), "", ctx.Err()
			}
			return buf.Bytes(), finish, nil
		}
		if err != nil {
			return buf.Bytes(), "", err
		}
		// An operator's stop must end a long stream now, not at its end;
		// the check is an in-process lookup.
		if serr := pipeline.CheckStop(ctx); serr != nil {
			return buf.Bytes(), "", &stopError{serr}
		}
		a.noteChunk(chunk)
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			if c.Delta.Content != "" {
				if a.TTFT == 0 {
					a.TTFT = max(r.now().Sub(start), time.Nanosecond)
				}
				if buf.Len()+len(c.Delta.Content) > limit {
					buf.WriteString(c.Delta.Content[:limit-buf.Len()])
					return bytes.ToValidUTF8(buf.Bytes(), nil), "", errAnswerCap
				}
				buf.WriteString(c.Delta.Content)
				if obs != nil {
					obs.Delta(req.Stage, c.Delta.Content)
				}
			}
			if c.FinishReason != "" {
				finish = string(c.FinishReason)
			}
		}
	}
}

// pseudonymize returns a copy of msgs with every text but the system
// messages' passed through ps. A system message is the caller's own
// instructions, never chat text (Request.Pseudonyms): scanning it cost
// more than the rest of a request together, and its wording ("give its
// message id exactly") read as a contact detail and was sent mangled.
func pseudonymize(ps Pseudonymizer, msgs []Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		if m.Role != RoleSystem {
			out[i].Text = ps.Apply(m.Text)
		}
	}
	return out
}

func toOpenAI(msgs []Message) []openai.ChatCompletionMessage {
	out := make([]openai.ChatCompletionMessage, len(msgs))
	for i, m := range msgs {
		out[i].Role = string(m.Role)
		if len(m.ImageURLs) == 0 {
			out[i].Content = m.Text
			continue
		}
		parts := make([]openai.ChatMessagePart, 0, 1+len(m.ImageURLs))
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: m.Text})
		for _, u := range m.ImageURLs {
			parts = append(parts, openai.ChatMessagePart{
				Type:     openai.ChatMessagePartTypeImageURL,
				ImageURL: &openai.ChatMessageImageURL{URL: u, Detail: openai.ImageURLDetailLow},
			})
		}
		out[i].MultiContent = parts
	}
	return out
}

func httpStatus(err error) int {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return apiErr.HTTPStatusCode
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return reqErr.HTTPStatusCode
	}
	return 0
}

func isDecodeError(err error) bool {
	var se *json.SyntaxError
	var ue *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, openai.ErrTooManyEmptyStreamMessages) || strings.HasPrefix(err.Error(), "error, ")
}

// cooldownFor turns a throttled answer's Retry-After (seconds or an HTTP
// date) or retry-after-ms (milliseconds, which OpenAI-style servers send
// and which wins because it is more precise) into a cooldown, clamped to
// MaxCooldown by internal/retry so that a huge value cannot overflow. A
// missing, unusable, zero or past value gives DefaultCooldown: a server
// that throttled us is not asking to be called again at once.
func cooldownFor(retryAfter, retryAfterMS string, cfg PoolConfig, now time.Time) time.Duration {
	h := retryAfter
	if ms, err := strconv.ParseFloat(strings.TrimSpace(retryAfterMS), 64); err == nil && ms > 0 {
		// ParseRetryAfter takes fractional seconds; dividing first keeps
		// the clamp in one place.
		h = strconv.FormatFloat(ms/1000, 'f', -1, 64)
	}
	if d, ok := retry.ParseRetryAfter(h, now, cfg.MaxCooldown); ok && d > 0 {
		return d
	}
	return min(cfg.DefaultCooldown, cfg.MaxCooldown)
}

// noteChunk records what a streamed chunk says of the call: the model that
// answered and, on the last chunk, the token usage.
func (a *Attempt) noteChunk(chunk openai.ChatCompletionStreamResponse) {
	if chunk.Model != "" {
		a.responseModel = chunk.Model
	}
	if chunk.Usage != nil {
		a.TokensIn, a.TokensOut = chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens
		if d := chunk.Usage.PromptTokensDetails; d != nil {
			a.TokensCached = d.CachedTokens
		}
	}
}
