package llmsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// FaultRates are the probabilities, each in [0, 1] and together at most 1,
// that a chat-completion request meets one fault instead of a normal answer.
// A request's X-Sim-Fault header forces one fault regardless of the rates.
type FaultRates struct {
	// Status429 answers 429 rate_limit_exceeded with Retry-After.
	Status429 float64 `json:"429"`
	// Status500 answers 500 internal_error.
	Status500 float64 `json:"500"`
	// Status503 answers 503 overloaded with Retry-After.
	Status503 float64 `json:"503"`
	// Hang never answers: it waits until the client gives up, the server
	// closes, or Config.MaxHang passes, then drops the connection.
	Hang float64 `json:"hang"`
	// Drop closes the connection mid-answer (after about half the chunks of
	// a stream; before any byte of a non-streaming answer).
	Drop float64 `json:"drop"`
	// Malformed answers 200 with content that is not valid JSON.
	Malformed float64 `json:"malformed"`
	// Truncate answers 200 with the JSON cut in half and finish_reason
	// "stop", the case only validation can catch.
	Truncate float64 `json:"truncate"`
}

func (f FaultRates) each(fn func(Fault, float64)) {
	fn(Fault429, f.Status429)
	fn(Fault500, f.Status500)
	fn(Fault503, f.Status503)
	fn(FaultHang, f.Hang)
	fn(FaultDrop, f.Drop)
	fn(FaultMalformed, f.Malformed)
	fn(FaultTruncate, f.Truncate)
}

// Config is the behaviour of one simulated endpoint. Everything except Name
// can be changed while the server runs (SetConfig, UpdateConfig, PUT
// /admin/config).
type Config struct {
	// Name labels the endpoint in stats and logs: "primary" or "fallback"
	// by convention. It is fixed at New.
	Name string
	// Models are the model ids served; a request for another gets 404.
	Models []string
	// APIKey, when set, must arrive as "Authorization: Bearer <key>" or the
	// request gets 401. Empty accepts any request, as a local vLLM does.
	APIKey string
	// TTFT is the time to first token after a request is admitted to run.
	TTFT time.Duration
	// ITL is the inter-token latency; a chunk of n tokens takes n*ITL.
	ITL time.Duration
	// ImageTTFT is added to TTFT per image part of a request (a vision
	// encoder's time: a managed API's slow image stage).
	ImageTTFT time.Duration
	// Jitter spreads TTFT and ITL uniformly by ±Jitter (0.2 = ±20%).
	Jitter float64
	// TokensPerChunk is how many tokens one streamed chunk carries; more
	// per chunk makes thousands of concurrent streams cheap.
	TokensPerChunk int
	// MaxRunning is how many requests generate at once (vLLM's
	// max_num_seqs); the rest wait in FIFO order.
	MaxRunning int
	// MaxWaiting bounds the waiting queue; a request that finds it full is
	// refused at once with QueueFullStatus. Zero means no queue.
	MaxWaiting int
	// QueueFullStatus is the status for a full queue: 503 (a vLLM behind a
	// gateway) or 429 (a managed API's capacity limit).
	QueueFullStatus int
	// Faults are the fault rates.
	Faults FaultRates
	// RetryAfter is sent with 429 and 503 answers (Retry-After in whole
	// seconds, rounded up, and retry-after-ms).
	RetryAfter time.Duration
	// MaxHang bounds a hang fault so that a client without a timeout cannot
	// pin a handler forever.
	MaxHang time.Duration
	// CacheSize bounds the answer cache (by prompt hash); 0 disables it.
	CacheSize int
	// PrefixCacheBlocks bounds the prefix-cache model (prefixcache.go), in
	// blocks of PrefixBlockTokens tokens; 0 turns it off (and usage has no
	// prompt_tokens_details).
	PrefixCacheBlocks int
	// MaxModelLen is the context length in tokens: a request whose prompt
	// and max_tokens exceed it gets vLLM's 400. 0 means no limit.
	MaxModelLen int
	// PrefillPerToken is the prefill time per uncached prompt token, added
	// to TTFT after admission (serving.go).
	PrefillPerToken time.Duration
	// BatchSlowdown makes the inter-token latency grow with the running
	// batch: ITL·(1+BatchSlowdown) at MaxRunning sequences. 0 keeps it flat.
	BatchSlowdown float64
	// KVCacheTokens is the KV cache's size in tokens for
	// vllm:kv_cache_usage_perc; 0 means MaxRunning·2048.
	KVCacheTokens int
	// RPM and TPM are a managed API's requests and tokens per minute; a
	// request over either gets 429 with Retry-After. 0 means no limit.
	RPM, TPM int
	// RateWindow is the burst the RPM and TPM buckets allow, as the time
	// that earns it; 0 means a minute.
	RateWindow time.Duration
	// Gullible makes the simulated model follow instructions typed into a
	// chat, as real models too often do, unless the text is datamarked
	// (see gullible.go). Off, the rules read the chat only as data.
	Gullible bool
	// Errors is the seeded error model (errormodel.go): misses, false
	// alarms, hard negatives and run-to-run noise. Zero: none.
	Errors ErrorModel
	// ImageURLFetch is added to TTFT per image part given as an http(s)
	// URL (data: URLs do not pay it): the server fetching the picture, a
	// cross-region fetch for a managed API.
	ImageURLFetch time.Duration
	// Version is what GET /version answers, as vLLM's does ("" answers
	// 404, as a managed API does).
	Version string
	// PriorityScheduling orders the waiting queue by each request's
	// `priority` (lower first), then arrival, as vLLM's
	// --scheduling-policy priority does (without its preemption). Off, the
	// queue is first come, first served and a non-zero priority gets
	// vLLM's 400.
	PriorityScheduling bool
}

// DefaultModel is the model id served when Config.Models is left empty.
const DefaultModel = "chatguard-sim"

// DefaultConfig returns a vLLM-like endpoint: TTFT 50ms±20%, ITL 5ms, 8
// tokens per chunk, 256 running and 10,000 waiting, no faults.
func DefaultConfig() Config {
	return Config{
		Name:            "primary",
		Models:          []string{DefaultModel},
		TTFT:            50 * time.Millisecond,
		ITL:             5 * time.Millisecond,
		Jitter:          0.2,
		TokensPerChunk:  8,
		MaxRunning:      256,
		MaxWaiting:      10000,
		QueueFullStatus: 503,
		RetryAfter:      time.Second,
		MaxHang:         2 * time.Minute,
		CacheSize:       4096,
		// A field of its own, so the literal above stays as it was.
		PrefixCacheBlocks: DefaultPrefixCacheBlocks,
	}
}

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if strings.TrimSpace(c.Name) == "" {
		bad("name is empty")
	}
	if len(c.Models) == 0 {
		bad("models is empty")
	}
	for _, m := range c.Models {
		if strings.TrimSpace(m) == "" {
			bad("models contains an empty id")
		}
	}
	if c.TTFT < 0 {
		bad("ttft %v is negative", c.TTFT)
	}
	if c.ImageTTFT < 0 || c.ImageURLFetch < 0 {
		bad("image_ttft %v and image_url_fetch %v must not be negative", c.ImageTTFT, c.ImageURLFetch)
	}
	if err := c.Errors.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ITL < 0 {
		bad("itl %v is negative", c.ITL)
	}
	if c.Jitter < 0 || c.Jitter > 1 {
		bad("jitter %v is outside [0, 1]", c.Jitter)
	}
	if c.TokensPerChunk < 1 {
		bad("tokens_per_chunk %d is below 1", c.TokensPerChunk)
	}
	if c.MaxRunning < 1 {
		bad("max_running %d is below 1", c.MaxRunning)
	}
	if c.MaxWaiting < 0 {
		bad("max_waiting %d is negative", c.MaxWaiting)
	}
	if c.QueueFullStatus != 429 && c.QueueFullStatus != 503 {
		bad("queue_full_status %d is neither 429 nor 503", c.QueueFullStatus)
	}
	if c.RetryAfter < 0 {
		bad("retry_after %v is negative", c.RetryAfter)
	}
	if c.MaxHang <= 0 {
		bad("max_hang %v is not positive", c.MaxHang)
	}
	if c.CacheSize < 0 {
		bad("cache_size %d is negative", c.CacheSize)
	}
	if c.PrefixCacheBlocks < 0 {
		bad("prefix_cache_blocks %d is negative", c.PrefixCacheBlocks)
	}
	if c.MaxModelLen < 0 {
		bad("max_model_len %d is negative", c.MaxModelLen)
	}
	if c.PrefillPerToken < 0 || c.BatchSlowdown < 0 || c.KVCacheTokens < 0 || c.RPM < 0 || c.TPM < 0 || c.RateWindow < 0 {
		bad("prefill_per_token, batch_slowdown, kv_cache_tokens, rpm, tpm and rate_window must not be negative")
	}
	sum := 0.0
	c.Faults.each(func(f Fault, r float64) {
		if r < 0 || r > 1 {
			bad("fault rate %s %v is outside [0, 1]", f, r)
		}
		sum += r
	})
	if sum > 1+1e-9 {
		bad("fault rates add up to %v, more than 1", sum)
	}
	return errors.Join(errs...)
}

func (c Config) clone() Config {
	c.Models = slices.Clone(c.Models)
	c.Errors = c.Errors.clone()
	return c
}

// configJSON is the admin endpoint's view of Config: durations as Go
// duration strings ("50ms") and the API key write-only.
type configJSON struct {
	Name            string     `json:"name"`
	Models          []string   `json:"models"`
	APIKey          string     `json:"api_key,omitempty"`
	APIKeySet       bool       `json:"api_key_set"`
	TTFT            duration   `json:"ttft"`
	ITL             duration   `json:"itl"`
	ImageTTFT       duration   `json:"image_ttft"`
	Jitter          float64    `json:"jitter"`
	TokensPerChunk  int        `json:"tokens_per_chunk"`
	MaxRunning      int        `json:"max_running"`
	MaxWaiting      int        `json:"max_waiting"`
	QueueFullStatus int        `json:"queue_full_status"`
	Faults          FaultRates `json:"faults"`
	RetryAfter      duration   `json:"retry_after"`
	MaxHang         duration   `json:"max_hang"`
	CacheSize       int        `json:"cache_size"`
	MaxModelLen     int        `json:"max_model_len"`
	PrefixCache     int        `json:"prefix_cache_blocks"`
	Gullible        bool       `json:"gullible"`
	PrefillPerToken duration   `json:"prefill_per_token"`
	BatchSlowdown   float64    `json:"batch_slowdown"`
	KVCacheTokens   int        `json:"kv_cache_tokens"`
	RPM             int        `json:"rpm"`
	TPM             int        `json:"tpm"`
	RateWindow      duration   `json:"rate_window"`
	Errors          ErrorModel `json:"errors"`
	ImageURLFetch   duration   `json:"image_url_fetch"`
	Version         string     `json:"version"`
	Priority        bool       `json:"priority_scheduling"`
}

func toJSON(c Config) configJSON {
	return configJSON{
		Name: c.Name, Models: slices.Clone(c.Models), APIKey: c.APIKey, APIKeySet: c.APIKey != "",
		TTFT: duration(c.TTFT), ITL: duration(c.ITL), ImageTTFT: duration(c.ImageTTFT), Jitter: c.Jitter, TokensPerChunk: c.TokensPerChunk,
		MaxRunning: c.MaxRunning, MaxWaiting: c.MaxWaiting, QueueFullStatus: c.QueueFullStatus,
		Faults: c.Faults, RetryAfter: duration(c.RetryAfter), MaxHang: duration(c.MaxHang), CacheSize: c.CacheSize,
		MaxModelLen: c.MaxModelLen, Gullible: c.Gullible, PrefixCache: c.PrefixCacheBlocks,
		PrefillPerToken: duration(c.PrefillPerToken), BatchSlowdown: c.BatchSlowdown, KVCacheTokens: c.KVCacheTokens,
		RPM: c.RPM, TPM: c.TPM, RateWindow: duration(c.RateWindow),
		Errors: c.Errors.clone(), ImageURLFetch: duration(c.ImageURLFetch), Version: c.Version,
		Priority: c.PriorityScheduling,
	}
}

func (j configJSON) config() Config {
	return Config{
		Name: j.Name, Models: j.Models, APIKey: j.APIKey,
		TTFT: time.Duration(j.TTFT), ITL: time.Duration(j.ITL), ImageTTFT: time.Duration(j.ImageTTFT), Jitter: j.Jitter, TokensPerChunk: j.TokensPerChunk,
		MaxRunning: j.MaxRunning, MaxWaiting: j.MaxWaiting, QueueFullStatus: j.QueueFullStatus,
		Faults: j.Faults, RetryAfter: time.Duration(j.RetryAfter), MaxHang: time.Duration(j.MaxHang), CacheSize: j.CacheSize,
		MaxModelLen: j.MaxModelLen, Gullible: j.Gullible, PrefixCacheBlocks: j.PrefixCache,
		PrefillPerToken: time.Duration(j.PrefillPerToken), BatchSlowdown: j.BatchSlowdown, KVCacheTokens: j.KVCacheTokens,
		RPM: j.RPM, TPM: j.TPM, RateWindow: time.Duration(j.RateWindow),
		Errors: j.Errors, ImageURLFetch: time.Duration(j.ImageURLFetch), Version: j.Version,
		PriorityScheduling: j.Priority,
	}
}

// redacted is the JSON shown by GET /admin/config: never the key itself.
func redacted(c Config) configJSON {
	j := toJSON(c)
	j.APIKey = ""
	return j
}

// patchConfig applies a partial JSON document to cur: fields left out keep
// their values. Unknown fields are an error so that a typo in a test's
// PUT is noticed instead of silently ignored.
func patchConfig(cur Config, body []byte) (Config, error) {
	j := toJSON(cur)
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	next := j.config()
	next.Name = cur.Name
	if err := next.Validate(); err != nil {
		return Config{}, err
	}
	return next, nil
}

// duration is a time.Duration written as a Go duration string in JSON.
type duration time.Duration

func (d duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`a duration is a string such as "50ms"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}
