package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/cmd/internal/cli"
)

// redisOptions is how every Redis client of the worker connects: address,
// ACL user and password, database, and TLS (ElastiCache in-transit
// encryption, optionally with a client certificate).
type redisOptions struct {
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

func (o *redisOptions) flags(fs *cli.FlagSet) {
	fs.StringVar(&o.RedisAddr, "redis-addr", "Redis host:port carrying stop signals; empty disables stop signals")
	fs.StringVar(&o.RedisUsername, "redis-username", "Redis ACL user (empty: the default user)")
	fs.StringVar(&o.RedisPassword, "redis-password", "Redis password (prefer the environment variable; never logged)")
	fs.IntVar(&o.RedisDB, "redis-db", "Redis database number")
	fs.BoolVar(&o.RedisTLS, "redis-tls", "connect to Redis over TLS (implied by --redis-ca-file or --redis-cert-file)")
	fs.StringVar(&o.RedisCAFile, "redis-ca-file", "PEM CA bundle that signed the Redis server certificate (empty: the system roots)")
	fs.StringVar(&o.RedisCertFile, "redis-cert-file", "PEM client certificate for Redis (with --redis-key-file)")
	fs.StringVar(&o.RedisKeyFile, "redis-key-file", "PEM private key of --redis-cert-file")
	fs.StringVar(&o.RedisServerName, "redis-server-name", "name the Redis server certificate must carry (empty: the host of --redis-addr)")
}

func (o redisOptions) validate() error {
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

func (o redisOptions) useTLS() bool {
	return o.RedisTLS || o.RedisCAFile != "" || o.RedisCertFile != ""
}

// tlsConfig returns nil for a plain connection.
func (o redisOptions) tlsConfig() (*tls.Config, error) {
	if !o.useTLS() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.RedisServerName}
	if o.RedisCAFile != "" {
		pool, err := loadCAPool(o.RedisCAFile)
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

// client returns a client whose every wait is bounded, so a Redis outage
// costs a review at most the stop-check timeout. It fails only on
// unreadable TLS files.
func (o redisOptions) client() (*redis.Client, error) {
	tc, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	return redis.NewClient(&redis.Options{
		Addr: o.RedisAddr, Username: o.RedisUsername, Password: o.RedisPassword, DB: o.RedisDB, TLSConfig: tc,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		PoolTimeout: 2 * time.Second, MaxRetries: 1, PoolSize: 16,
	}), nil
}
