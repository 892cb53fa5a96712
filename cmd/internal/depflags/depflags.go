// Package depflags holds the flags of the dependencies that the worker and
// the console both talk to (MySQL, the chat-history API, the stop signals'
// Redis keys, the two model pools) and maps them onto the adapters'
// configurations, so that the two binaries spell and apply them the same
// way. Each option type is embedded in a binary's Config; its fields are
// then that Config's, and its flags that binary's. It is separate from
// cmd/internal/cli so that the binaries without these dependencies (batch,
// consumer) do not link the adapters.
package depflags

import (
	"errors"
	"fmt"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/storage/chatapi"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/redisstop"
)

// The dependency flags' texts, one per flag whichever binder declares it.
const (
	mysqlDSNUsage     = "MySQL DSN (user:pass@tcp(host:3306)/db)"
	mysqlMaxOpenUsage = "MySQL connection pool size"
	chatTimeoutUsage  = "timeout of one chat-history request"
	chatAttemptsUsage = "chat-history attempts per job (5xx and timeouts are retried)"
)

// BindMySQL declares --mysql-dsn and --mysql-max-open-conns on the store's
// own configuration: a binary that embeds mysql.Config has its defaults
// (mysql.DefaultConfig) and its checks (mysql.Config.Validate), and
// copies nothing.
func BindMySQL(fs *cli.FlagSet, c *mysql.Config) {
	BindMySQLDSN(fs, c)
	fs.IntVar(&c.MaxOpenConns, "mysql-max-open-conns", mysqlMaxOpenUsage)
}

// BindMySQLDSN declares --mysql-dsn only: a one-off command (migrate,
// purge) sizes its own small pool rather than offering a knob.
func BindMySQLDSN(fs *cli.FlagSet, c *mysql.Config) {
	fs.StringVar(&c.DSN, "mysql-dsn", mysqlDSNUsage)
}

// BindChat declares --chat-api-url (urlUsage says what it is for in this
// binary), --chat-timeout and --chat-max-attempts on the client's own
// configuration (chatapi.DefaultConfig, chatapi.Config.Validate).
func BindChat(fs *cli.FlagSet, c *chatapi.Config, urlUsage string) {
	BindChatHistory(fs, c, urlUsage)
	fs.IntVar(&c.MaxAttempts, "chat-max-attempts", chatAttemptsUsage)
}

// BindChatHistory declares --chat-api-url and --chat-timeout only: a
// binary whose requests are a person's page loads keeps the client's
// default attempts rather than offering a knob.
func BindChatHistory(fs *cli.FlagSet, c *chatapi.Config, urlUsage string) {
	fs.StringVar(&c.BaseURL, "chat-api-url", urlUsage)
	fs.DurationVar(&c.Timeout, "chat-timeout", chatTimeoutUsage)
}

// BindStops declares --stop-channel, --stop-key-prefix and
// --stop-check-timeout on the stop signals' own configuration
// (redisstop.DefaultConfig, redisstop.Config.Validate).
func BindStops(fs *cli.FlagSet, c *redisstop.Config) {
	fs.StringVar(&c.Channel, "stop-channel", "Redis pub/sub channel of stop signals")
	fs.StringVar(&c.KeyPrefix, "stop-key-prefix", "prefix of the Redis keys that keep live stop signals")
	fs.DurationVar(&c.CheckTimeout, "stop-check-timeout", "bound of the one Redis check each review makes when it starts")
}

// Pools are the two model pools and the attempts across them: the
// router's own configuration, whose fields the flags set directly (the
// pools' addresses and limits, their prices and pseudonymisation, the
// fleet-wide limits), so a binary copies nothing between a flag and the
// router.
type Pools struct {
	// LLM is the router's configuration; a binary attaches the fleet
	// limits' store (reviewers.New) and llm.New validates it.
	LLM llm.Config
}

// The fleet defaults shown by --help: one replica, one key prefix for
// every deployment that does not name its own.
const (
	defaultFleetReplicas  = 1
	defaultFleetKeyPrefix = "chatguard:fleet:"
)

// DefaultPools returns llm's defaults for the attempt timeout and the
// attempts, the concurrencies, which are each binary's, the third-party
// fallback pseudonymized, and no fleet limit.
func DefaultPools(primaryConcurrency, fallbackConcurrency int) Pools {
	return Pools{LLM: llm.Config{
		Primary:        llm.PoolConfig{MaxConcurrency: primaryConcurrency},
		Fallback:       llm.PoolConfig{MaxConcurrency: fallbackConcurrency, Pseudonymize: true},
		AttemptTimeout: llm.DefaultAttemptTimeout,
		MaxAttempts:    llm.DefaultMaxAttempts,
		Fleet: llm.FleetConfig{Replicas: defaultFleetReplicas, Name: defaultFleetKeyPrefix,
			PrimaryShadowIdle: llm.DefaultShadowIdle, FallbackShadowIdle: llm.DefaultShadowIdle},
	}}
}

// poolUsage is what one pool's flags say beyond its name.
type poolUsage struct{ baseURL, model, apiKey string }

// bindPool declares --<name>-base-url, --<name>-model, --<name>-api-key,
// --<name>-concurrency and --<name>-priority on the pool's own configuration;
// concurrencyUsage is a format with one %s for the pool's name.
func bindPool(fs *cli.FlagSet, p *llm.PoolConfig, name string, u poolUsage, concurrencyUsage string) {
	fs.StringVar(&p.BaseURL, name+"-base-url", u.baseURL)
	fs.StringVar(&p.Model, name+"-model", u.model)
	fs.StringVar(&p.APIKey, name+"-api-key", u.apiKey)
	fs.IntVar(&p.MaxConcurrency, name+"-concurrency", fmt.Sprintf(concurrencyUsage, name))
	fs.BoolVar(&p.ServerPriority, name+"-priority", "send each call's traffic class as the request's priority (interactive 0, realtime 1, batch 2, shadow 3; lower is served first): only for a vLLM started with --scheduling-policy priority, which any other server may refuse")
}

// Flags declares the --primary-*, --fallback-*, --attempt-timeout and
// --llm-max-attempts flags. modelUsage says what --primary-model is in this
// binary; concurrencyUsage, a format with one %s for the pool's name, what
// its concurrencies bound. The attempt timeout is declared once, on the
// router's shared setting, and both pools take it.
func (o *Pools) Flags(fs *cli.FlagSet, modelUsage, concurrencyUsage string) {
	bindPool(fs, &o.LLM.Primary, string(pipeline.PoolPrimary), poolUsage{
		baseURL: "primary (vLLM) OpenAI-compatible base URL, ending in /v1", model: modelUsage,
		apiKey: "primary API key (empty sends none)"}, concurrencyUsage)
	bindPool(fs, &o.LLM.Fallback, string(pipeline.PoolFallback), poolUsage{
		baseURL: "fallback (managed API) base URL; empty disables the fallback", model: "fallback model id",
		apiKey: "fallback API key"}, concurrencyUsage)
	fs.DurationVar(&o.LLM.AttemptTimeout, "attempt-timeout", "timeout of one model call, stream included")
	fs.IntVar(&o.LLM.MaxAttempts, "llm-max-attempts", "model calls per stage across both pools")
}

// PriceFlags declares --primary-price and --fallback-price on the pools'
// prices, and --daily-budget the spend is compared with; a text
// llm.ParsePrice refuses is refused when it is given.
func (o *Pools) PriceFlags(fs *cli.FlagSet) {
	PriceVar(fs, &o.LLM.Primary.Price, "primary-price", "what a primary call costs, recorded per stage: gpu_hour=USD,shared_by=N (self-hosted) and/or prompt=,cached=,completion= USD per 1M tokens; empty: free")
	PriceVar(fs, &o.LLM.Fallback.Price, "fallback-price", "what a fallback call costs: prompt=,cached=,completion= USD per 1M tokens (managed API) and/or gpu_hour=,shared_by=; empty: free")
	fs.Float64Var(&o.LLM.DailyBudget, "daily-budget", "USD the fleet means to spend on model calls a day at --primary-price and --fallback-price, exported for the spend burn-rate alerts (docs/runbooks.md); never enforced; 0: no budget")
}

// PriceVar declares a price flag (what llm.ParsePrice reads) on p: the
// pools' and any other endpoint's (the worker's shadow candidate).
func PriceVar(fs *cli.FlagSet, p *llm.Price, name, usage string) {
	fs.Var((*priceValue)(p), name, usage)
}

// PseudonymizeFlags declares --primary-pseudonymize and
// --fallback-pseudonymize on the pools' own switches.
func (o *Pools) PseudonymizeFlags(fs *cli.FlagSet) {
	fs.BoolVar(&o.LLM.Primary.Pseudonymize, "primary-pseudonymize", "replace contact details with placeholders (<PHONE_1>) in requests to the primary pool")
	fs.BoolVar(&o.LLM.Fallback.Pseudonymize, "fallback-pseudonymize", "replace contact details with placeholders (<PHONE_1>) in requests to the fallback (third-party) pool")
}

// FleetFlags declares the --fleet-* flags on the router's fleet limits.
// --fleet-key-prefix is the limits' name (llm drops its trailing colon).
// They are apart from Flags so that a binary lists them with its other
// capacity settings.
func (o *Pools) FleetFlags(fs *cli.FlagSet) {
	f := &o.LLM.Fleet
	fs.IntVar(&f.PrimaryLimit, "fleet-primary-limit", "primary calls in flight across every replica (Redis leases); 0: no fleet limit")
	fs.IntVar(&f.PrimaryReserved, "fleet-primary-reserved", "of --fleet-primary-limit, leases only interactive calls may take")
	fs.IntVar(&f.PrimaryReservedRealtime, "fleet-primary-reserved-realtime", "of --fleet-primary-limit, leases only real-time (and interactive) calls may take; batch holds at most limit - reserved - this; 0: real time shares batch's leases")
	fs.IntVar(&f.PrimaryShadowIdle, "fleet-primary-shadow-idle", "percent of --fleet-primary-limit that must stay free, besides the reserves, for a shadow (mirrored evaluation) call to take a lease: shadow only fills idle capacity")
	fs.IntVar(&f.FallbackRPM, "fleet-fallback-rpm", "fallback requests per minute across every replica (Redis GCRA); 0: unlimited")
	fs.IntVar(&f.FallbackTPM, "fleet-fallback-tpm", "fallback tokens per minute across every replica (Redis GCRA); 0: unlimited")
	fs.IntVar(&f.FallbackReservedInteractive, "fleet-fallback-reserved-interactive", "percent of the fallback budgets' burst only interactive calls may spend; 0: none kept")
	fs.IntVar(&f.FallbackReservedRealtime, "fleet-fallback-reserved-realtime", "percent of the fallback budgets' burst only real-time (and interactive) calls may spend; batch leaves both reserves; 0 while real time is off")
	fs.IntVar(&f.FallbackShadowIdle, "fleet-fallback-shadow-idle", "percent of the fallback budgets' burst a shadow call leaves unspent besides the reserves: shadow only spends an idle budget")
	fs.IntVar(&f.Replicas, "fleet-replicas", "replicas the fleet limits are divided by while Redis is unreachable (each pod's static share)")
	fs.StringVar(&f.Name, "fleet-key-prefix", "Redis key prefix of the fleet limits; every replica of one deployment uses the same")
}

// priceValue is the flag.Value of an llm.Price: parsed when set, printed
// as llm.ParsePrice reads it ("" for free, the default --help shows).
type priceValue llm.Price

func (p *priceValue) String() string { return llm.Price(*p).String() }

func (p *priceValue) Set(s string) error {
	v, err := llm.ParsePrice(s)
	if err != nil {
		return err
	}
	*p = priceValue(v)
	return nil
}

// Validate reports every problem of the pool and fleet flags at once,
// naming them: what llm.New would refuse in words an operator can act on.
// redisAddr is the binary's --redis-addr, which the fleet limits need.
func (o Pools) Validate(redisAddr string) error {
	var errs []error
	prim, fb := o.LLM.Primary, o.LLM.Fallback
	req := func(v, name string) {
		if v == "" {
			errs = append(errs, fmt.Errorf("--%s is required", name))
		}
	}
	req(prim.BaseURL, "primary-base-url")
	req(prim.Model, "primary-model")
	if fb.BaseURL != "" {
		req(fb.Model, "fallback-model")
	}
	if prim.MaxConcurrency < 1 || (fb.BaseURL != "" && fb.MaxConcurrency < 1) {
		errs = append(errs, errors.New("--primary-concurrency and --fallback-concurrency must be at least 1"))
	}
	if o.LLM.AttemptTimeout <= 0 {
		errs = append(errs, errors.New("--attempt-timeout must be positive"))
	}
	if o.LLM.MaxAttempts < 1 || o.LLM.MaxAttempts > 20 {
		errs = append(errs, errors.New("--llm-max-attempts must be in 1..20"))
	}
	return errors.Join(append(errs, o.ValidateFleet(redisAddr))...)
}

// ValidateFleet reports every problem of the --fleet-* flags at once,
// each once; redisAddr is where the limits live (they need one).
// reviewers.New asks it too, before it dials Redis.
func (o Pools) ValidateFleet(redisAddr string) error {
	var errs []error
	f := o.LLM.Fleet
	if f.PrimaryLimit < 0 || f.PrimaryReserved < 0 || (f.PrimaryLimit > 0 && f.PrimaryReserved >= f.PrimaryLimit) {
		errs = append(errs, errors.New("--fleet-primary-reserved must be in 0..--fleet-primary-limit-1"))
	} else if f.PrimaryReservedRealtime < 0 || (f.PrimaryLimit > 0 && f.PrimaryReserved+f.PrimaryReservedRealtime >= f.PrimaryLimit) {
		errs = append(errs, errors.New("--fleet-primary-reserved plus --fleet-primary-reserved-realtime must stay below --fleet-primary-limit"))
	}
	if f.FallbackRPM < 0 || f.FallbackTPM < 0 || f.Replicas < 1 {
		errs = append(errs, errors.New("--fleet-fallback-rpm and --fleet-fallback-tpm must not be negative, --fleet-replicas at least 1"))
	}
	if f.FallbackReservedInteractive < 0 || f.FallbackReservedRealtime < 0 || f.FallbackReservedInteractive+f.FallbackReservedRealtime >= 100 {
		errs = append(errs, errors.New("--fleet-fallback-reserved-interactive and --fleet-fallback-reserved-realtime must not be negative and sum below 100"))
	}
	if f.PrimaryShadowIdle < 1 || f.PrimaryShadowIdle > 100 || f.FallbackShadowIdle < 1 || f.FallbackShadowIdle > 100 {
		errs = append(errs, errors.New("--fleet-primary-shadow-idle and --fleet-fallback-shadow-idle must be in 1..100"))
	}
	if f.Limited() && redisAddr == "" {
		errs = append(errs, errors.New("--fleet-* limits need --redis-addr"))
	}
	return errors.Join(errs...)
}

// Router is the router's configuration for the two pools, flags and all;
// a binary attaches the fleet store and llm.New validates it.
func (o Pools) Router() llm.Config { return o.LLM }
