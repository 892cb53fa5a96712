package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/cmd/internal/telemetry"
	"github.com/chatguard/chatguard/pipeline"
)

// RedisOptions is how every Redis client of the chatguard binaries
// connects: the address (one node, or the seed nodes of a Redis Cluster),
// ACL user and password, database, and TLS (ElastiCache in-transit
// encryption, optionally with a client certificate). The worker, the
// console and the trigger embed it, so their flags are the same.
//
// One node is a single-node client; a comma-separated list of addresses,
// or --redis-cluster with one address (ElastiCache's configuration
// endpoint in cluster mode), is a Redis Cluster client that follows the
// cluster's slot map (MOVED, ASK) by itself. Every store takes the
// redis.UniversalClient either way.
type RedisOptions struct {
	RedisAddr       string
	RedisCluster    bool
	RedisUsername   string
	RedisPassword   string
	RedisDB         int
	RedisTLS        bool
	RedisCAFile     string
	RedisCertFile   string
	RedisKeyFile    string
	RedisServerName string

	// name is the flags' stem ("redis" unless FlagsNamed set another), so
	// that Validate names the flags the operator set.
	name string
}

// Flags declares the --redis-* flags; addrUsage says what the address is
// for in this binary.
func (o *RedisOptions) Flags(fs *FlagSet, addrUsage string) { o.FlagsNamed(fs, "redis", addrUsage) }

// FlagsNamed declares the same flags under another stem: --<name>-addr,
// --<name>-cluster, … (the trigger's --state-redis-* for a Redis of the
// room state's own).
func (o *RedisOptions) FlagsNamed(fs *FlagSet, name, addrUsage string) {
	o.name = name
	fs.StringVar(&o.RedisAddr, name+"-addr", addrUsage+"; host:port, or a comma-separated list of a Redis Cluster's nodes")
	fs.BoolVar(&o.RedisCluster, name+"-cluster", "the address is a Redis Cluster (ElastiCache cluster mode's configuration endpoint); implied by a list of addresses")
	fs.StringVar(&o.RedisUsername, name+"-username", "Redis ACL user (empty: the default user)")
	fs.StringVar(&o.RedisPassword, name+"-password", "Redis password (prefer the environment variable; never logged)")
	fs.IntVar(&o.RedisDB, name+"-db", "Redis database number (0 on a Redis Cluster)")
	fs.BoolVar(&o.RedisTLS, name+"-tls", "connect to Redis over TLS (implied by --"+name+"-ca-file or --"+name+"-cert-file)")
	fs.StringVar(&o.RedisCAFile, name+"-ca-file", "PEM CA bundle that signed the Redis server certificate (empty: the system roots)")
	fs.StringVar(&o.RedisCertFile, name+"-cert-file", "PEM client certificate for Redis (with --"+name+"-key-file)")
	fs.StringVar(&o.RedisKeyFile, name+"-key-file", "PEM private key of --"+name+"-cert-file")
	fs.StringVar(&o.RedisServerName, name+"-server-name", "name the Redis server certificate must carry (empty: the host of --"+name+"-addr)")
}

func (o RedisOptions) flag(suffix string) string {
	if o.name == "" {
		return "--redis-" + suffix
	}
	return "--" + o.name + "-" + suffix
}

// Addrs is the address list: one node, or a cluster's seed nodes (blanks
// trimmed, empty items dropped).
func (o RedisOptions) Addrs() []string {
	var out []string
	for _, a := range strings.Split(o.RedisAddr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// IsCluster reports whether the options make a Redis Cluster client.
func (o RedisOptions) IsCluster() bool { return o.RedisCluster || len(o.Addrs()) > 1 }

// Validate reports every problem of the options at once, naming the flags.
func (o RedisOptions) Validate() error {
	var errs []error
	if o.RedisDB < 0 {
		errs = append(errs, fmt.Errorf("%s must not be negative", o.flag("db")))
	}
	if o.IsCluster() && o.RedisDB != 0 {
		errs = append(errs, fmt.Errorf("%s must be 0 on a Redis Cluster (a cluster has database 0 only)", o.flag("db")))
	}
	if o.RedisCluster && o.RedisAddr == "" {
		errs = append(errs, fmt.Errorf("%s needs %s", o.flag("cluster"), o.flag("addr")))
	}
	if (o.RedisCertFile == "") != (o.RedisKeyFile == "") {
		errs = append(errs, fmt.Errorf("%s and %s go together", o.flag("cert-file"), o.flag("key-file")))
	}
	if o.RedisUsername != "" && o.RedisPassword == "" {
		errs = append(errs, fmt.Errorf("%s needs %s", o.flag("username"), o.flag("password")))
	}
	return errors.Join(errs...)
}

func (o RedisOptions) useTLS() bool {
	return o.RedisTLS || o.RedisCAFile != "" || o.RedisCertFile != ""
}

// TLSConfig returns nil for a plain connection, or the TLS settings; it
// fails on unreadable or invalid PEM files.
func (o RedisOptions) TLSConfig() (*tls.Config, error) {
	if !o.useTLS() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.RedisServerName}
	if o.RedisCAFile != "" {
		pool, err := LoadCAPool(o.RedisCAFile)
		if err != nil {
			return nil, fmt.Errorf("redis tls: %w", err)
		}
		tc.RootCAs = pool
	}
	if o.RedisCertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.RedisCertFile, o.RedisKeyFile)
		if err != nil {
			return nil, fmt.Errorf("redis tls: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// ClientOptions returns the options Client makes its client from, tune
// applied: every wait bounded (2 s per dial, read, write and pool wait),
// one retry, a pool of 16 (per node on a cluster). It fails only on
// unreadable TLS files.
func (o RedisOptions) ClientOptions(tune func(*redis.UniversalOptions)) (*redis.UniversalOptions, error) {
	tc, err := o.TLSConfig()
	if err != nil {
		return nil, err
	}
	ro := &redis.UniversalOptions{
		Addrs: o.Addrs(), IsClusterMode: o.RedisCluster,
		Username: o.RedisUsername, Password: o.RedisPassword, DB: o.RedisDB, TLSConfig: tc,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		PoolTimeout: 2 * time.Second, MaxRetries: 1, PoolSize: 16,
	}
	if tune != nil {
		tune(ro)
	}
	return ro, nil
}

// Client returns a client whose every wait is bounded (2 s per dial, read,
// write and pool wait), so a Redis outage costs a caller seconds, not
// minutes; tune, when set, adjusts the options before the client is made
// (a larger pool, a longer read for blocking reads). The client is a
// *redis.ClusterClient when the options name a Redis Cluster (IsCluster),
// a *redis.Client otherwise. It fails only on unreadable TLS files.
func (o RedisOptions) Client(tune func(*redis.UniversalOptions)) (redis.UniversalClient, error) {
	ro, err := o.ClientOptions(tune)
	if err != nil {
		return nil, err
	}
	c := redis.NewUniversalClient(ro)
	if pipeline.TracingEnabled() {
		if err := instrumentRedis(c, otel.GetTracerProvider()); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// instrumentRedis adds redisotel's command spans to c, under a sampled
// span only (telemetry.ChildSpansOnly), with the command text off: a
// command names its keys, and the keys name rooms and accounts. A span
// says the command's name (get, evalsha, pipeline …) and the server.
func instrumentRedis(c redis.UniversalClient, tp trace.TracerProvider) error {
	if err := redisotel.InstrumentTracing(c, redisotel.WithTracerProvider(telemetry.ChildSpansOnly(tp)),
		redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false), redisotel.WithDialFilter(true)); err != nil {
		return fmt.Errorf("redis: tracing: %w", err)
	}
	return nil
}

// FleetProfile tunes a client for the fleet limits (the primary's leases
// and the fallback's budgets): it is asked on every primary call, under the
// router's per-call deadline (100 ms), so the context's deadline bounds the
// socket reads and writes too (ContextTimeoutEnabled), every other wait is
// capped at a second, a failed call is not retried (the retry would outlive
// the deadline; the router falls back to its static share instead), and the
// pool is large enough for every slot of a pod at once.
func FleetProfile(o *redis.UniversalOptions) {
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = time.Second, time.Second, time.Second, time.Second
	// -1: go-redis reads 0 as its default of three retries.
	o.MaxRetries, o.PoolSize, o.ContextTimeoutEnabled = -1, 64, true
}

// CampaignProfile tunes a client for the campaign counter: one pipelined
// call per review under the campaign timeout (50 ms by default), so the
// context's deadline bounds the socket waits (ContextTimeoutEnabled), a
// failed call is not retried (the review goes on without campaign
// signals), and the pool is large enough for every slot of a pod.
func CampaignProfile(o *redis.UniversalOptions) {
	o.MaxRetries, o.PoolSize, o.ContextTimeoutEnabled = -1, 64, true
}

// StopProfile tunes a client for the stop signals: the subscription, the
// one lookup each review makes when it starts, and the operator's
// publishes. The lookup runs under the guard's check timeout (250 ms by
// default), so the context's deadline bounds the socket waits
// (ContextTimeoutEnabled): without it a slow Redis holds every starting
// review for the 2 s read timeout, twice with the retry. Nothing is retried
// for the same reason; a failed lookup only makes the stop best effort.
// The subscription's blocking receive has its own timeout and is not
// affected.
func StopProfile(o *redis.UniversalOptions) {
	o.MaxRetries, o.ContextTimeoutEnabled = -1, true
}

// LoadCAPool reads a PEM bundle of CA certificates; it fails when the file
// is unreadable or holds none.
func LoadCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca %s: no PEM certificate", path)
	}
	return pool, nil
}
