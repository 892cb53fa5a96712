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
	"fmt"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
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

// Pools are the two model pools and the attempts across them.
type Pools struct {
	PrimaryBaseURL      string
	PrimaryModel        string
	PrimaryAPIKey       string
	PrimaryConcurrency  int
	FallbackBaseURL     string
	FallbackModel       string
	FallbackAPIKey      string
	FallbackConcurrency int
	AttemptTimeout      time.Duration
	LLMMaxAttempts      int
}

// DefaultPools returns llm's defaults for the timeouts and attempts; the
// concurrencies are each binary's.
func DefaultPools() Pools {
	return Pools{AttemptTimeout: llm.DefaultAttemptTimeout, LLMMaxAttempts: llm.DefaultMaxAttempts}
}

// Flags declares the --primary-*, --fallback-*, --attempt-timeout and
// --llm-max-attempts flags. modelUsage says what --primary-model is in this
// binary; concurrencyUsage, a format with one %s for the pool's name, what
// its concurrencies bound.
func (o *Pools) Flags(fs *cli.FlagSet, modelUsage, concurrencyUsage string) {
	fs.StringVar(&o.PrimaryBaseURL, "primary-base-url", "primary (vLLM) OpenAI-compatible base URL, ending in /v1")
	fs.StringVar(&o.PrimaryModel, "primary-model", modelUsage)
	fs.StringVar(&o.PrimaryAPIKey, "primary-api-key", "primary API key (empty sends none)")
	fs.IntVar(&o.PrimaryConcurrency, "primary-concurrency", fmt.Sprintf(concurrencyUsage, "primary"))
	fs.StringVar(&o.FallbackBaseURL, "fallback-base-url", "fallback (managed API) base URL; empty disables the fallback")
	fs.StringVar(&o.FallbackModel, "fallback-model", "fallback model id")
	fs.StringVar(&o.FallbackAPIKey, "fallback-api-key", "fallback API key")
	fs.IntVar(&o.FallbackConcurrency, "fallback-concurrency", fmt.Sprintf(concurrencyUsage, "fallback"))
	fs.DurationVar(&o.AttemptTimeout, "attempt-timeout", "timeout of one model call, stream included")
	fs.IntVar(&o.LLMMaxAttempts, "llm-max-attempts", "model calls per stage across both pools")
}

// Router is the router's configuration for the two pools; a binary adds
// what only it sets (prices, pseudonymisation, fleet limits) and llm.New
// validates it.
func (o Pools) Router() llm.Config {
	return llm.Config{
		Primary: llm.PoolConfig{BaseURL: o.PrimaryBaseURL, Model: o.PrimaryModel, APIKey: o.PrimaryAPIKey,
			MaxConcurrency: o.PrimaryConcurrency, AttemptTimeout: o.AttemptTimeout},
		Fallback: llm.PoolConfig{BaseURL: o.FallbackBaseURL, Model: o.FallbackModel, APIKey: o.FallbackAPIKey,
			MaxConcurrency: o.FallbackConcurrency, AttemptTimeout: o.AttemptTimeout},
		MaxAttempts: o.LLMMaxAttempts,
	}
}
