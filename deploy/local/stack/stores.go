package stack

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
)

// mysqlService is either the machine's server (stop does nothing) or an
// embedded one.
type mysqlService struct {
	addr     string
	embedded *server.Server
	done     chan struct{}
}

// mysqlDSN is the DSN of root with an empty password on addr.
func mysqlDSN(addr, db string) string {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = addr
	c.DBName = db
	c.ParseTime = true
	return c.FormatDSN()
}

// probeMySQL reports whether addr accepts root with an empty password.
func probeMySQL(ctx context.Context, addr string) error {
	if addr == "" {
		return fmt.Errorf("no external server configured")
	}
	db, err := sql.Open("mysql", mysqlDSN(addr, "")+"&timeout=2s")
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// startMySQL uses the machine's MySQL when it answers, else starts an
// embedded go-mysql-server on port, and creates the chatguard database.
func startMySQL(ctx context.Context, cfg Config) (*mysqlService, error) {
	log := cfg.logger()
	s := &mysqlService{addr: cfg.ExternalMySQL}
	if err := probeMySQL(ctx, cfg.ExternalMySQL); err != nil {
		log.Info("mysql: machine server not usable, starting the embedded one", "probe", err, "port", cfg.MySQLPort)
		if err := s.startEmbedded(cfg.MySQLPort); err != nil {
			return nil, err
		}
	} else {
		log.Info("mysql: using the machine's server", "addr", cfg.ExternalMySQL)
	}
	if err := s.ready(ctx, cfg.ReadyTimeout); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *mysqlService) startEmbedded(port int) error {
	ln, err := listen("mysql", port)
	if err != nil {
		return err
	}
	// The engine logs every connection, and warns about settings that do not
	// matter on a loopback development server.
	logrus.SetLevel(logrus.ErrorLevel)
	pro := memory.NewDBProvider()
	engine := sqle.NewDefault(pro)
	srv, err := server.NewServer(server.Config{Protocol: "tcp", Listener: ln, Address: ln.Addr().String()},
		engine, gmssql.NewContext, memory.NewSessionBuilder(pro), nil)
	if err != nil {
		ln.Close()
		return fmt.Errorf("mysql: embedded server: %w", err)
	}
	s.embedded, s.addr, s.done = srv, ln.Addr().String(), make(chan struct{})
	go func() {
		defer close(s.done)
		_ = srv.Start() // returns when Close closes the listener
	}()
	return nil
}

// ready waits until the server answers and creates the database.
func (s *mysqlService) ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	db, err := sql.Open("mysql", mysqlDSN(s.addr, "")+"&timeout=2s")
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	defer db.Close()
	for {
		_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+MySQLDatabase)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mysql: %s not ready within %s: %w", s.addr, timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *mysqlService) dsn() string { return mysqlDSN(s.addr, MySQLDatabase) }

// kind is "embedded" for go-mysql-server, "external" for a real server.
func (s *mysqlService) kind() string { return stackKind(s.embedded != nil) }

// stackKind is the value of CHATGUARD_STACK_MYSQL / CHATGUARD_STACK_REDIS:
// CI refuses to test against a stand-in (internal/stacktest).
func stackKind(embedded bool) string {
	if embedded {
		return "embedded"
	}
	return "external"
}

// stop closes the embedded server and waits for its accept loop; the
// machine's server is left alone.
func (s *mysqlService) stop() {
	if s.embedded == nil {
		return
	}
	_ = s.embedded.Close()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
}

// redisService is either the machine's Redis or miniredis.
type redisService struct {
	addr string
	mini *miniredis.Miniredis
}

func probeRedis(ctx context.Context, addr string) error {
	if addr == "" {
		return fmt.Errorf("no external server configured")
	}
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// startRedis uses the machine's Redis when it answers PING, else miniredis.
func startRedis(ctx context.Context, cfg Config) (*redisService, error) {
	log := cfg.logger()
	if err := probeRedis(ctx, cfg.ExternalRedis); err == nil {
		log.Info("redis: using the machine's server", "addr", cfg.ExternalRedis)
		return &redisService{addr: cfg.ExternalRedis}, nil
	} else {
		log.Info("redis: machine server not usable, starting miniredis", "probe", err, "port", cfg.RedisPort)
	}
	// Check the port through listen first for the same clear error as the
	// other services; miniredis binds it itself.
	ln, err := listen("redis", cfg.RedisPort)
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr(addr); err != nil {
		return nil, fmt.Errorf("redis: miniredis on %s: %w", addr, err)
	}
	s := &redisService{addr: m.Addr(), mini: m}
	if err := probeRedis(ctx, s.addr); err != nil {
		m.Close()
		return nil, fmt.Errorf("redis: miniredis does not answer: %w", err)
	}
	return s, nil
}

// kind is "embedded" for miniredis, "external" for a real server.
func (s *redisService) kind() string { return stackKind(s.mini != nil) }

func (s *redisService) stop() {
	if s.mini != nil {
		s.mini.Close()
	}
}
