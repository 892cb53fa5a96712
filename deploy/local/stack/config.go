// Package stack runs chatguard's local development stack: every service the
// three binaries talk to, on 127.0.0.1, each speaking its real wire protocol
// so that the production clients run unchanged and only endpoints differ.
//
//   - SQS: fauxqs (Node) as a child process in its own process group.
//   - S3: gofakes3 in-process over a real directory, so objects are plain
//     files that the Athena stand-in reads directly.
//   - MySQL: the machine's server when it answers, else an embedded
//     go-mysql-server.
//   - Redis: the machine's server when it answers, else miniredis.
//   - Athena stand-in, chat-history API and two LLM simulators in-process.
//
// Start brings everything up, waits until each service answers and writes
// the env file (see deploy/local/README.md); Stop tears down what Start
// started. Nothing here may be linked into a production binary
// (cmd/deps_test.go checks).
package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"
)

// Default ports: one block that common tools do not use. Every port has a
// flag; the env file is the source of truth for clients.
const (
	DefaultSQSPort      = 18410
	DefaultS3Port       = 18411
	DefaultAthenaPort   = 18412
	DefaultChatAPIPort  = 18413
	DefaultPrimaryPort  = 18414
	DefaultFallbackPort = 18415
	DefaultMySQLPort    = 18416 // embedded server, only when the machine's is absent
	DefaultRedisPort    = 18417 // miniredis, only when the machine's is absent
	// DefaultRedisClusterPort is the first of the Redis Cluster's three
	// nodes (18420-18422; their buses take 28420-28422).
	DefaultRedisClusterPort = 18420
)

// Fixed names of the local resources.
const (
	Region        = "us-east-1"
	LakeBucket    = "lake"
	MySQLDatabase = "chatguard"
	ReviewQueue   = "review"
	FeedbackQueue = "feedback"
	// RealtimeQueue and ChatEventsQueue are real time's queues: the
	// trigger reads chat events and publishes review events to
	// review-realtime (workers read it only when given its URL).
	RealtimeQueue   = "review-realtime"
	ChatEventsQueue = "chat-events"
	// ActionsQueue carries protective actions to the chat API stand-in,
	// which consumes it (docs/actions.md); a worker publishes there only
	// when given its URL.
	ActionsQueue   = "actions"
	DLQSuffix      = "-dlq"
	AccessKeyID    = "local"
	SecretKey      = "local-secret"
	FallbackAPIKey = "local-fallback-key"
	PrimaryModel   = "chatguard-sim-primary"
	FallbackModel  = "chatguard-sim-fallback"

	AthenaDatabase       = "chatguard"
	AthenaWorkgroup      = "primary"
	AthenaOutputLocation = "s3://lake/athena-results/"
)

// Config says where the stack keeps its state and which ports it binds.
// Zero fields take the defaults of Defaults.
type Config struct {
	// Root is the repository root; StateDir and CacheDir default below it.
	Root string
	// StateDir holds the env file, pid, logs, the S3 directory (and so the
	// lake) and the ground truth: <Root>/.stack.
	StateDir string
	// CacheDir holds Node and fauxqs, installed by
	// deploy/local/scripts/install-deps.sh: <Root>/.cache.
	CacheDir string

	SQSPort, S3Port, AthenaPort, ChatAPIPort, PrimaryPort, FallbackPort int
	// MySQLPort and RedisPort are the embedded servers' ports, used only
	// when ExternalMySQL / ExternalRedis do not answer.
	MySQLPort, RedisPort int
	// RedisClusterPort is the first port of the three-master Redis
	// Cluster (each node's bus is its port + 10000); 0 runs no cluster.
	RedisClusterPort int
	// ExternalMySQL is a MySQL server to use when it accepts root with an
	// empty password ("" disables the probe).
	ExternalMySQL string
	// ExternalRedis is a Redis server to use when it answers PING ("" disables).
	ExternalRedis string

	// Jaeger is the path of a Jaeger binary (make bin/jaeger builds one
	// from deploy/local/jaeger): the stack then runs it as the local trace
	// store and points the binaries at it (TracesEnv). "" runs none and
	// leaves tracing off.
	Jaeger string
	// JaegerOTLPPort, JaegerQueryPort and JaegerGRPCPort are its OTLP/HTTP
	// receiver, query API and query gRPC ports, used only with Jaeger.
	JaegerOTLPPort, JaegerQueryPort, JaegerGRPCPort int

	// MaxReceiveCount is the redrive maxReceiveCount of review and feedback.
	MaxReceiveCount int
	// VisibilityTimeout is the default visibility of review and feedback.
	VisibilityTimeout time.Duration
	// Rooms is the size of the sample lake generated on first start.
	Rooms int
	// Seed makes the sample lake reproducible.
	Seed int64
	// ReadyTimeout bounds the wait for each service to answer.
	ReadyTimeout time.Duration
	// Install runs the install script when Node or fauxqs is missing.
	Install bool

	// Log receives progress lines; nil discards them.
	Log *slog.Logger
}

// Defaults returns the configuration of a stack rooted at root.
func Defaults(root string) Config {
	return Config{
		Root:              root,
		StateDir:          filepath.Join(root, ".stack"),
		CacheDir:          filepath.Join(root, ".cache"),
		SQSPort:           DefaultSQSPort,
		S3Port:            DefaultS3Port,
		AthenaPort:        DefaultAthenaPort,
		ChatAPIPort:       DefaultChatAPIPort,
		PrimaryPort:       DefaultPrimaryPort,
		FallbackPort:      DefaultFallbackPort,
		MySQLPort:         DefaultMySQLPort,
		RedisPort:         DefaultRedisPort,
		RedisClusterPort:  DefaultRedisClusterPort,
		JaegerOTLPPort:    DefaultJaegerOTLPPort,
		JaegerQueryPort:   DefaultJaegerQueryPort,
		JaegerGRPCPort:    DefaultJaegerGRPCPort,
		ExternalMySQL:     "127.0.0.1:3306",
		ExternalRedis:     "127.0.0.1:6379",
		MaxReceiveCount:   5,
		VisibilityTimeout: 30 * time.Second,
		Rooms:             5000,
		Seed:              1,
		ReadyTimeout:      60 * time.Second,
		Install:           true,
	}
}

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.Root == "" {
		errs = append(errs, errors.New("root is missing"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("state dir is missing"))
	}
	if c.CacheDir == "" {
		errs = append(errs, errors.New("cache dir is missing"))
	}
	seen := map[int]string{}
	for _, p := range c.ports() {
		if p.port < 1 || p.port > 65535 {
			errs = append(errs, fmt.Errorf("--%s-port %d is not a TCP port", p.name, p.port))
			continue
		}
		if other, dup := seen[p.port]; dup {
			errs = append(errs, fmt.Errorf("--%s-port and --%s-port are both %d", other, p.name, p.port))
		}
		seen[p.port] = p.name
	}
	if c.MaxReceiveCount < 1 || c.MaxReceiveCount > 1000 {
		errs = append(errs, fmt.Errorf("max receive count %d is outside 1..1000", c.MaxReceiveCount))
	}
	if c.VisibilityTimeout < 0 || c.VisibilityTimeout > 12*time.Hour || c.VisibilityTimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("visibility timeout %s must be whole seconds in 0..12h", c.VisibilityTimeout))
	}
	if c.Rooms < 1 || c.Rooms > 1_000_000 {
		errs = append(errs, fmt.Errorf("rooms %d is outside 1..1000000", c.Rooms))
	}
	if c.ReadyTimeout <= 0 {
		errs = append(errs, errors.New("ready timeout must be positive"))
	}
	return errors.Join(errs...)
}

type namedPort struct {
	name string
	port int
}

// ports lists every port the stack may bind, named as their flags are;
// Jaeger's only when it runs one.
func (c Config) ports() []namedPort {
	ps := []namedPort{
		{"sqs", c.SQSPort}, {"s3", c.S3Port}, {"athena", c.AthenaPort},
		{"chat-api", c.ChatAPIPort}, {"primary", c.PrimaryPort}, {"fallback", c.FallbackPort},
		{"mysql", c.MySQLPort}, {"redis", c.RedisPort},
	}
	return append(ps, c.jaegerPorts()...)
}

// jaegerPorts are the trace store's ports, none without one.
func (c Config) jaegerPorts() []namedPort {
	if c.Jaeger == "" {
		return nil
	}
	return []namedPort{{"jaeger-otlp", c.JaegerOTLPPort}, {"jaeger-query", c.JaegerQueryPort}, {"jaeger-grpc", c.JaegerGRPCPort}}
}

// RedisClusterDir holds the cluster nodes' data and logs.
func (c Config) RedisClusterDir() string { return filepath.Join(c.StateDir, "redis-cluster") }

// startRedisClusterOf starts the configured cluster and returns the env
// variables that name it: its nodes and "external", or "absent" when the
// port is 0 or the machine has no redis-server.
func startRedisClusterOf(ctx context.Context, cfg Config) (*redisCluster, []string, error) {
	if cfg.RedisClusterPort == 0 {
		return nil, []string{"CHATGUARD_STACK_REDIS_CLUSTER", "absent"}, nil
	}
	rc, err := startRedisCluster(ctx, cfg.RedisClusterPort, cfg.RedisClusterDir(), cfg.ReadyTimeout)
	if errors.Is(err, errNoRedisServer) {
		cfg.logger().Info("redis-cluster: not started", "why", err)
		return nil, []string{"CHATGUARD_STACK_REDIS_CLUSTER", "absent"}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return rc, []string{"CHATGUARD_REDIS_CLUSTER_ADDRS", strings.Join(rc.addrs, ","), "CHATGUARD_STACK_REDIS_CLUSTER", "external"}, nil
}

// EnvFile is the env file the stack writes once every service is ready.
func (c Config) EnvFile() string { return filepath.Join(c.StateDir, "env") }

// PIDFile holds the pid of the running stack.
func (c Config) PIDFile() string { return filepath.Join(c.StateDir, "stack.pid") }

// LockFile is flocked while a stack runs, so a second start fails fast and a
// killed run leaves no lock behind.
func (c Config) LockFile() string { return filepath.Join(c.StateDir, "lock") }

// S3Dir is the directory behind the S3 server: buckets/<bucket>/<key>.
func (c Config) S3Dir() string { return filepath.Join(c.StateDir, "s3") }

// LakeDir is the folder backing the lake bucket (CHATGUARD_LAKE_DIR).
func (c Config) LakeDir() string { return filepath.Join(c.S3Dir(), "buckets", LakeBucket) }

// TruthDir holds the sample lake's ground truth (CHATGUARD_TRUTH_DIR).
func (c Config) TruthDir() string { return filepath.Join(c.StateDir, "truth") }

// FauxqsPIDFile holds the pid (and process group) of the fauxqs child, so
// that a later start can clean up after a killed run.
func (c Config) FauxqsPIDFile() string { return filepath.Join(c.StateDir, "fauxqs.pid") }

// FauxqsLog receives the fauxqs child's output.
func (c Config) FauxqsLog() string { return filepath.Join(c.StateDir, "fauxqs.log") }

func (c Config) nodeBin() string { return filepath.Join(c.CacheDir, "node", "bin", "node") }

func (c Config) fauxqsEntry() string {
	return filepath.Join(c.CacheDir, "fauxqs", "node_modules", "fauxqs", "dist", "app.js")
}

// ActionsJournal is the chat API stand-in's journal of the action keys it
// applied: a restarted stack applies each key once still.
func (c Config) ActionsJournal() string { return filepath.Join(c.StateDir, "chatapi-actions.jsonl") }
