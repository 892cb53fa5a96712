package llm

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Price is what a pool's calls cost, so that a stage's cost can be
// recorded next to its tokens. A managed API charges per token (prompt
// tokens the server found in its prefix cache at a lower rate); a
// self-hosted pool costs its GPU time. Both parts add up, so a pool that
// has both (a dedicated endpoint billed per hour and per token) can say so.
// The zero value is free: cost is then 0, never a guess.
type Price struct {
	// PromptPerMTok, CachedPerMTok and CompletionPerMTok are USD per
	// million tokens. Cached prompt tokens are charged CachedPerMTok
	// instead of PromptPerMTok.
	PromptPerMTok     float64
	CachedPerMTok     float64
	CompletionPerMTok float64
	// GPUHour is the USD price of one GPU-hour of the pool's servers, and
	// SharedBy how many requests one GPU serves at once on average (the
	// engine's batch): a call is charged its prefill and decode time (from
	// sending to the last token) at GPUHour/SharedBy. Zero SharedBy is 1,
	// the upper bound.
	GPUHour  float64
	SharedBy int
}

// Validate reports every problem at once.
func (p Price) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"prompt", p.PromptPerMTok}, {"cached", p.CachedPerMTok}, {"completion", p.CompletionPerMTok}, {"gpu-hour", p.GPUHour}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			errs = append(errs, fmt.Errorf("llm: %s price %v is not a finite amount of at least 0", f.name, f.v))
		}
	}
	if p.SharedBy < 0 {
		errs = append(errs, errors.New("llm: price shared-by is negative"))
	}
	return errors.Join(errs...)
}

// Cost returns the USD cost of one call: its tokens at the token prices
// (cached at most prompt) and busy the GPU time at the GPU price.
func (p Price) Cost(prompt, cached, completion int, busy time.Duration) float64 {
	cached = min(max(cached, 0), max(prompt, 0))
	c := float64(prompt-cached)*p.PromptPerMTok/1e6 +
		float64(cached)*p.CachedPerMTok/1e6 +
		float64(max(completion, 0))*p.CompletionPerMTok/1e6
	if p.GPUHour > 0 && busy > 0 {
		c += busy.Hours() * p.GPUHour / float64(max(p.SharedBy, 1))
	}
	return c
}

// String is the price as ParsePrice reads it, parts in a fixed order and
// zero parts left out: "" for free, so a flag's default prints as before.
func (p Price) String() string {
	var parts []string
	for _, f := range []struct {
		key string
		v   float64
	}{{"prompt", p.PromptPerMTok}, {"cached", p.CachedPerMTok}, {"completion", p.CompletionPerMTok}, {"gpu_hour", p.GPUHour}} {
		if f.v != 0 {
			parts = append(parts, f.key+"="+strconv.FormatFloat(f.v, 'g', -1, 64))
		}
	}
	if p.SharedBy != 0 {
		parts = append(parts, "shared_by="+strconv.Itoa(p.SharedBy))
	}
	return strings.Join(parts, ",")
}

// ParsePrice reads a price as a flag gives it: comma-separated key=value
// pairs of prompt, cached and completion (USD per million tokens), gpu_hour
// (USD) and shared_by (requests per GPU), e.g.
// "prompt=2.5,cached=1.25,completion=10" for a managed API or
// "gpu_hour=4.5,shared_by=32" for a self-hosted pool. An empty text is
// free. It reports every problem at once.
func ParsePrice(s string) (Price, error) {
	var (
		p    Price
		errs []error
	)
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			errs = append(errs, fmt.Errorf("llm: price %q is not key=value", kv))
			continue
		}
		if k == "shared_by" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("llm: price shared_by %q is not a whole number", v))
			}
			p.SharedBy = n
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("llm: price %s %q is not a number", k, v))
			continue
		}
		switch k {
		case "prompt":
			p.PromptPerMTok = f
		case "cached":
			p.CachedPerMTok = f
		case "completion":
			p.CompletionPerMTok = f
		case "gpu_hour":
			p.GPUHour = f
		default:
			errs = append(errs, fmt.Errorf("llm: price key %q is none of prompt, cached, completion, gpu_hour, shared_by", k))
		}
	}
	errs = append(errs, p.Validate())
	return p, errors.Join(errs...)
}
