package eval

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/review"
)

// Endpoint is one OpenAI-compatible endpoint under test.
type Endpoint struct {
	// Name labels the endpoint in the report (letters, digits, - and _).
	Name    string
	BaseURL string
	Model   string
	// APIKey is sent as a bearer token; empty sends none. Never reported.
	APIKey string
	// Price is what its calls cost (zero: free, and cost shows 0).
	Price llm.Price
	// Notes are the operator's notes on how it is served (dtype, KV-cache
	// dtype, tensor-parallel size, speculative decoding), printed in the
	// report as given: quantised serving changes with these settings, not
	// only with the weights.
	Notes string
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// ParseEndpoint reads "name=base_url,model".
func ParseEndpoint(s string) (Endpoint, error) {
	name, rest, ok := strings.Cut(s, "=")
	base, model, ok2 := strings.Cut(rest, ",")
	if !ok || !ok2 {
		return Endpoint{}, fmt.Errorf("eval: endpoint %q is not name=base_url,model", s)
	}
	e := Endpoint{Name: strings.TrimSpace(name), BaseURL: strings.TrimSpace(base), Model: strings.TrimSpace(model)}
	return e, e.validate()
}

func (e Endpoint) validate() error {
	var errs []error
	if !nameRE.MatchString(e.Name) {
		errs = append(errs, fmt.Errorf("eval: endpoint name %q: want 1-32 of A-Z a-z 0-9 _ -", e.Name))
	}
	if u, err := url.Parse(e.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("eval: endpoint %s: base URL %q is not an http(s) URL", e.Name, e.BaseURL))
	}
	if e.Model == "" {
		errs = append(errs, fmt.Errorf("eval: endpoint %s: model is empty", e.Name))
	}
	if err := e.Price.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("eval: endpoint %s: %w", e.Name, err))
	}
	return errors.Join(errs...)
}

// Config is one evaluation run.
type Config struct {
	Endpoints []Endpoint
	Cases     []Case
	// Concurrency is the sweep: reviews in flight at once, per step.
	Concurrency []int
	// Repetitions runs every step this many times.
	Repetitions int
	// TTFTSLO is the time-to-first-token objective of goodput: a review
	// counts when it succeeded and every stage's TTFT was within it.
	TTFTSLO time.Duration
	// ReviewTimeout bounds one review.
	ReviewTimeout time.Duration
	// Progress, when set, is called after every review (from several
	// goroutines; it must be safe for that).
	Progress func()
	// Transport replaces the HTTP transport (tests).
	Transport http.RoundTripper
	// Clock times the reviews and the run (nil: the wall clock).
	Clock clock.Clock
	// Images, when set, vets every image URL as the worker does (its
	// --image-hosts gate); nil sends the chat's URLs as they are.
	Images pipeline.ImageGate
	// InlineImages, when set, is the worker's gate fetching images here
	// and sending them as data: URLs: every case with an image is then
	// reviewed once more with it, at the lowest concurrency, so the
	// report shows the image stage with URLs and inline side by side.
	InlineImages pipeline.ImageGate

	// Reference names the endpoint the others are compared with, pair by
	// pair (empty: no paired comparison).
	Reference string
	// Power is the power the minimum detectable effect is computed at
	// (0: 0.8).
	Power float64
	// MaxRecallLoss is the non-inferiority margin on recall, as a share:
	// overall and per category.
	MaxRecallLoss Margins
	// MaxFlagRateIncrease is the flag-rate margin, as a share: how much
	// more of the labelled cases the candidate may flag than the
	// reference (the moderators' load) before it is called worse.
	MaxFlagRateIncrease float64
	// Resamples is the bootstrap's resample count for the report's
	// descriptive deltas (0: the package's Resamples; negative: none, for
	// a power study that decides thousands of sets and reads only the
	// decisions, which do not use the bootstrap).
	Resamples int
	// Seed seeds the bootstrap, so that a report is reproducible.
	Seed uint64
}

func (c Config) resamples() int {
	if c.Resamples == 0 {
		return Resamples
	}
	return max(c.Resamples, 0)
}

// Margins are recall-loss margins: Default for overall and every
// category not named in PerCategory.
type Margins struct {
	Default     float64
	PerCategory map[string]float64
}

// For is the margin of a category ("overall" included).
func (m Margins) For(category string) float64 {
	if v, ok := m.PerCategory[category]; ok {
		return v
	}
	return m.Default
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("eval: no endpoints"))
	}
	seen := map[string]bool{}
	for _, e := range c.Endpoints {
		errs = append(errs, e.validate())
		if seen[e.Name] {
			errs = append(errs, fmt.Errorf("eval: endpoint %s is named twice", e.Name))
		}
		seen[e.Name] = true
	}
	if len(c.Cases) == 0 {
		errs = append(errs, errors.New("eval: no cases"))
	}
	if len(c.Concurrency) == 0 {
		errs = append(errs, errors.New("eval: no concurrency steps"))
	}
	for _, n := range c.Concurrency {
		if n < 1 || n > 1024 {
			errs = append(errs, fmt.Errorf("eval: concurrency %d is outside 1..1024", n))
		}
	}
	if c.Repetitions < 1 || c.Repetitions > 100 {
		errs = append(errs, fmt.Errorf("eval: repetitions %d is outside 1..100", c.Repetitions))
	}
	if c.TTFTSLO <= 0 {
		errs = append(errs, errors.New("eval: the TTFT SLO must be positive"))
	}
	if c.ReviewTimeout <= 0 {
		errs = append(errs, errors.New("eval: the review timeout must be positive"))
	}
	return errors.Join(append(errs, c.validatePaired(seen))...)
}

func (c Config) validatePaired(names map[string]bool) error {
	var errs []error
	if c.Reference != "" && !names[c.Reference] {
		errs = append(errs, fmt.Errorf("eval: reference %q is not an endpoint", c.Reference))
	}
	if c.Power < 0 || c.Power >= 1 {
		errs = append(errs, fmt.Errorf("eval: power %v is outside (0, 1)", c.Power))
	}
	if c.MaxRecallLoss.Default < 0 || c.MaxRecallLoss.Default >= 1 {
		errs = append(errs, fmt.Errorf("eval: recall-loss margin %v is outside [0, 1)", c.MaxRecallLoss.Default))
	}
	if c.MaxFlagRateIncrease < 0 || c.MaxFlagRateIncrease >= 1 {
		errs = append(errs, fmt.Errorf("eval: flag-rate margin %v is outside [0, 1)", c.MaxFlagRateIncrease))
	}
	for k, v := range c.MaxRecallLoss.PerCategory {
		if v < 0 || v >= 1 {
			errs = append(errs, fmt.Errorf("eval: recall-loss margin of %s %v is outside [0, 1)", k, v))
		}
	}
	return errors.Join(errs...)
}

// Total is how many reviews the run makes.
func (c Config) Total() int {
	n := len(c.Endpoints) * len(c.Concurrency) * c.Repetitions * len(c.Cases)
	if c.InlineImages != nil {
		n += len(c.Endpoints) * len(imageCases(c.Cases))
	}
	return n
}

// imageCases are the cases with at least one image.
func imageCases(cases []Case) []Case {
	var out []Case
	for _, c := range cases {
		for _, m := range c.Messages {
			if m.ImageURL != "" {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// Review is one case reviewed once.
type Review struct {
	Endpoint    string
	Concurrency int
	Rep         int
	Case        *Case
	Verdict     pipeline.Verdict
	// Err is the review's error text ("" when it succeeded).
	Err  string
	Wall time.Duration
}

// OK reports whether the review produced a verdict.
func (r Review) OK() bool { return r.Err == "" && r.Verdict.Status == pipeline.StatusDone }

// Step is one pass over the cases at one concurrency.
type Step struct {
	Endpoint    string
	Concurrency int
	Rep         int
	Wall        time.Duration
}

// Result is everything a run measured.
type Result struct {
	Endpoints []Endpoint
	Cases     []Case
	Config    Config
	Started   time.Time
	Finished  time.Time
	Reviews   []Review
	Steps     []Step
	// Inline are the image cases reviewed again with InlineImages.
	Inline []Review
	// Facts are what each endpoint said about itself, by name.
	Facts map[string]ServerFacts
}

// Run reviews every case on every endpoint at every concurrency step,
// Repetitions times, with the production reviewer (same prompts, same
// validation) over a router whose only pool is the endpoint. Endpoints run
// one after another, so they do not compete for this machine. A review
// that fails is recorded with its error, not retried; Run fails only on a
// bad configuration or when ctx ends (returning what it measured so far).
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	clk := clock.Or(cfg.Clock)
	res := Result{Endpoints: cfg.Endpoints, Cases: cfg.Cases, Config: cfg, Started: clk.Now().UTC(), Facts: map[string]ServerFacts{}}
	maxConc := 1
	for _, n := range cfg.Concurrency {
		maxConc = max(maxConc, n)
	}
	for _, ep := range cfg.Endpoints {
		router, err := llm.New(llm.Config{Primary: llm.PoolConfig{
			BaseURL: ep.BaseURL, Model: ep.Model, APIKey: ep.APIKey, MaxConcurrency: maxConc,
			AttemptTimeout: cfg.ReviewTimeout, Transport: cfg.Transport, Price: ep.Price,
			// A gate wait of a review timeout: the sweep sets the load.
			GateWait: cfg.ReviewTimeout,
		}}, nil)
		if err != nil {
			return res, fmt.Errorf("eval: endpoint %s: %w", ep.Name, err)
		}
		rv, err := review.New(review.Config{Images: cfg.Images}, router, nil, nil, clk)
		if err != nil {
			return res, fmt.Errorf("eval: endpoint %s: %w", ep.Name, err)
		}
		res.Facts[ep.Name] = askServer(ctx, cfg, ep)
		err = runSweep(ctx, cfg, rv, ep.Name, &res)
		if err == nil && cfg.InlineImages != nil {
			err = runInline(ctx, cfg, router, ep.Name, &res)
		}
		if err != nil {
			res.Finished = clk.Now().UTC()
			return res, err
		}
	}
	res.Finished = clk.Now().UTC()
	return res, nil
}

// runSweep runs every concurrency step and repetition of one endpoint,
// appending to res; it fails only when ctx ends.
func runSweep(ctx context.Context, cfg Config, rv *review.Reviewer, name string, res *Result) error {
	for _, conc := range cfg.Concurrency {
		for rep := range cfg.Repetitions {
			step, reviews := runStep(ctx, cfg, rv, name, conc, rep)
			res.Steps = append(res.Steps, step)
			res.Reviews = append(res.Reviews, reviews...)
			if err := context.Cause(ctx); err != nil {
				return fmt.Errorf("eval: %w", err)
			}
		}
	}
	return nil
}

// runInline reviews the image cases once more with the inline gate, at
// the lowest concurrency, into res.Inline.
func runInline(ctx context.Context, cfg Config, router *llm.Router, name string, res *Result) error {
	rv, err := review.New(review.Config{Images: cfg.InlineImages}, router, nil, nil, cfg.Clock)
	if err != nil {
		return fmt.Errorf("eval: endpoint %s: %w", name, err)
	}
	c := cfg
	c.Cases = imageCases(cfg.Cases)
	if len(c.Cases) == 0 {
		return nil
	}
	_, reviews := runStep(ctx, c, rv, name, slices.Min(cfg.Concurrency), 0)
	res.Inline = append(res.Inline, reviews...)
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	return nil
}

func runStep(ctx context.Context, cfg Config, rv *review.Reviewer, name string, conc, rep int) (Step, []Review) {
	clk := clock.Or(cfg.Clock)
	out := make([]Review, len(cfg.Cases))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(conc)
	start := clk.Now()
	for i := range cfg.Cases {
		c := &cfg.Cases[i]
		g.Go(func() error {
			if gctx.Err() != nil {
				return nil
			}
			rctx, cancel := clock.WithTimeout(gctx, clk, cfg.ReviewTimeout)
			defer cancel()
			t0 := clk.Now()
			v, err := rv.Review(rctx, eventFor(c, t0), c.Messages, 1)
			r := Review{Endpoint: name, Concurrency: conc, Rep: rep, Case: c, Verdict: v, Wall: clk.Since(t0)}
			if err != nil {
				r.Err = err.Error()
			}
			mu.Lock()
			out[i] = r
			mu.Unlock()
			if cfg.Progress != nil {
				cfg.Progress()
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines return nil: errors are per review
	step := Step{Endpoint: name, Concurrency: conc, Rep: rep, Wall: clk.Since(start)}
	kept := out[:0]
	for _, r := range out {
		if r.Case != nil {
			kept = append(kept, r)
		}
	}
	return step, kept
}

// eventFor is the review event of a case: its messages' span as the
// window, published now.
func eventFor(c *Case, now time.Time) pipeline.ReviewEvent {
	first, last := c.Messages[0].SentAt, c.Messages[0].SentAt
	for _, m := range c.Messages {
		first, last = minTime(first, m.SentAt), maxTime(last, m.SentAt)
	}
	return pipeline.ReviewEvent{
		RoomID: c.ID, WindowStart: first.UTC().Truncate(time.Second), WindowEnd: last.UTC().Add(time.Second).Truncate(time.Second),
		RunID: "eval", PublishedAt: now.UTC(), SchemaVersion: 1,
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
