package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisOptions is how every Redis client of the chatguard binaries
// connects: address, ACL user and password, database, and TLS (ElastiCache
// in-transit encryption, optionally with a client certificate). The worker
// and the console embed it, so their flags are the same.
type RedisOptions struct {
	RedisAddr       string
	RedisUsername   string
	RedisPassword   string
	RedisDB         int
	RedisTLS        bool
	RedisCAFile     string
	RedisCertFile   string
	RedisKeyFile    string
	RedisServerName string
}

// Flags declares the --redis-* flags; addrUsage says what the address is
// for in this binary.
func (o *RedisOptions) Flags(fs *FlagSet, addrUsage string) {
	fs.StringVar(&o.RedisAddr, "redis-addr", addrUsage)
	fs.StringVar(&o.RedisUsername, "redis-username", "Redis ACL user (empty: the default user)")
	fs.StringVar(&o.RedisPassword, "redis-password", "Redis password (prefer the environment variable; never logged)")
	fs.IntVar(&o.RedisDB, "redis-db", "Redis database number")
	fs.BoolVar(&o.RedisTLS, "redis-tls", "connect to Redis over TLS (implied by --redis-ca-file or --redis-cert-file)")
	fs.StringVar(&o.RedisCAFile, "redis-ca-file", "PEM CA bundle that signed the Redis server certificate (empty: the system roots)")
	fs.StringVar(&o.RedisCertFile, "redis-cert-file", "PEM client certificate for Redis (with --redis-key-file)")
	fs.StringVar(&o.RedisKeyFile, "redis-key-file", "PEM private key of --redis-cert-file")
	fs.StringVar(&o.RedisServerName, "redis-server-name", "name the Redis server certificate must carry (empty: the host of --redis-addr)")
}

// Validate reports every problem of the options at once, naming the flags.
func (o RedisOptions) Validate() error {
	var errs []error
	if o.RedisDB < 0 {
		errs = append(errs, errors.New("--redis-db must not be negative"))
	}
	if (o.RedisCertFile == "") != (o.RedisKeyFile == "") {
		errs = append(errs, errors.New("--redis-cert-file and --redis-key-file go together"))
	}
	if o.RedisUsername != "" && o.RedisPassword == "" {
		errs = append(errs, errors.New("--redis-username needs --redis-password"))
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

// Client returns a client whose every wait is bounded (2 s per dial, read,
// write and pool wait), so a Redis outage costs a caller seconds, not
// minutes; tune, when set, adjusts the options before the client is made
// (a larger pool, a longer read for blocking reads). It fails only on
// unreadable TLS files.
func (o RedisOptions) Client(tune func(*redis.Options)) (*redis.Client, error) {
	tc, err := o.TLSConfig()
	if err != nil {
		return nil, err
	}
	ro := &redis.Options{
		Addr: o.RedisAddr, Username: o.RedisUsername, Password: o.RedisPassword, DB: o.RedisDB, TLSConfig: tc,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		PoolTimeout: 2 * time.Second, MaxRetries: 1, PoolSize: 16,
	}
	if tune != nil {
		tune(ro)
	}
	return redis.NewClient(ro), nil
}

// FleetProfile tunes a client for the fleet limits (the primary's leases
// and the fallback's budgets): it is asked on every primary call, under the
// router's per-call deadline (100 ms), so the context's deadline bounds the
// socket reads and writes too (ContextTimeoutEnabled), every other wait is
// capped at a second, a failed call is not retried (the retry would outlive
// the deadline; the router falls back to its static share instead), and the
// pool is large enough for every slot of a pod at once.
func FleetProfile(o *redis.Options) {
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = time.Second, time.Second, time.Second, time.Second
	// -1: go-redis reads 0 as its default of three retries.
	o.MaxRetries, o.PoolSize, o.ContextTimeoutEnabled = -1, 64, true
}

// CampaignProfile tunes a client for the campaign counter: one pipelined
// call per review under the campaign timeout (50 ms by default), so the
// context's deadline bounds the socket waits (ContextTimeoutEnabled), a
// failed call is not retried (the review goes on without campaign
// signals), and the pool is large enough for every slot of a pod.
func CampaignProfile(o *redis.Options) {
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
func StopProfile(o *redis.Options) {
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
