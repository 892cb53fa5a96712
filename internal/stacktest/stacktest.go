// Package stacktest connects integration tests to the local stack
// (deploy/local): it loads the env file the stack writes, and creates
// isolated resources per test (queues, databases) through the production
// clients. A test that needs the stack fails, never skips, when it is not
// running: CI starts the stack before the tests.
//
// The stack falls back to stand-ins (go-mysql-server, miniredis) when the
// machine has no MySQL or Redis, and says so in its env file
// (CHATGUARD_STACK_MYSQL, CHATGUARD_STACK_REDIS). With CI set, a test that
// asks for MySQL or Redis fails when a stand-in is in use, so CI always
// tests the real servers.
package stacktest

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/go-sql-driver/mysql"

	"github.com/chatguard/chatguard/internal/awsclient"
)

// EnvFileVar names the variable that points at the stack's env file; by
// default it is .stack/env at the repository root (the folder of go.work).
const EnvFileVar = "CHATGUARD_STACK_ENV"

var (
	loadOnce sync.Once
	loadErr  error
)

// Load reads the stack's env file once per process into the environment
// (variables already set win) and fails t when the stack is not up.
func Load(t testing.TB) {
	t.Helper()
	loadOnce.Do(func() { loadErr = loadEnvFile() })
	if loadErr != nil {
		t.Fatalf("stacktest: the local stack is not running (start it with `make stack-up`): %v", loadErr)
	}
}

func loadEnvFile() error {
	path := os.Getenv(EnvFileVar)
	if path == "" {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		path = filepath.Join(root, ".stack", "env")
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		} else {
			v = strings.Trim(v, "'")
		}
		if _, set := os.LookupEnv(k); !set {
			if err := os.Setenv(k, v); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}

// repoRoot is the folder of go.work: tests of both workspace modules find
// the one stack of the checkout there.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.work above the working directory")
		}
		dir = parent
	}
}

// Get returns a stack variable, failing t when it is missing, or when it
// is MySQL's DSN or Redis's address, CI is set and the stack runs a
// stand-in for that server.
func Get(t testing.TB, key string) string {
	t.Helper()
	Load(t)
	v := os.Getenv(key)
	if v == "" {
		t.Fatalf("stacktest: %s is not set by the stack env file", key)
	}
	if s, ok := servers[key]; ok && inCI(os.Getenv) {
		if err := s.real(os.Getenv); err != nil {
			t.Fatalf("stacktest: CI is set: %v", err)
		}
	}
	return v
}

// server is a stack service that may be a stand-in.
type server struct {
	name, marker, standIn string
}

// servers maps the variable a test reads to reach a server to that server.
var servers = map[string]server{
	"CHATGUARD_MYSQL_DSN":  {name: "MySQL", marker: "CHATGUARD_STACK_MYSQL", standIn: "go-mysql-server"},
	"CHATGUARD_REDIS_ADDR": {name: "Redis", marker: "CHATGUARD_STACK_REDIS", standIn: "miniredis"},
}

// real reports why the stack's server is not the real one, nil when it is.
func (s server) real(getenv func(string) string) error {
	switch v := getenv(s.marker); v {
	case "external":
		return nil
	case "embedded":
		return fmt.Errorf("the stack fell back to %s instead of a real %s (%s=embedded): start %s where the stack looks for it and restart the stack", s.standIn, s.name, s.marker, s.name)
	default:
		return fmt.Errorf("the stack env file does not say which %s it runs (%s=%q): restart the stack with this checkout's bin/stack", s.name, s.marker, v)
	}
}

// inCI reports whether the CI variable is set to anything but a false value.
func inCI(getenv func(string) string) bool {
	switch strings.ToLower(strings.TrimSpace(getenv("CI"))) {
	case "", "0", "false", "no":
		return false
	}
	return true
}

// RequireRealMySQL fails t, CI or not, unless the stack runs a real MySQL
// or MariaDB: for tests of what go-mysql-server does not do (row locks,
// lock waits, strict-mode errors).
func RequireRealMySQL(t testing.TB) {
	t.Helper()
	Load(t)
	if err := servers["CHATGUARD_MYSQL_DSN"].real(os.Getenv); err != nil {
		t.Fatalf("stacktest: this test needs a real MySQL: %v", err)
	}
}

// AWS returns an AWS config resolved exactly as the binaries resolve it,
// from the stack's variables.
func AWS(t testing.TB) aws.Config {
	t.Helper()
	Load(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := awsclient.Load(ctx, awsclient.Options{S3PathStyle: true})
	if err != nil {
		t.Fatalf("stacktest: %v", err)
	}
	return cfg
}

// SQS returns an SQS client for the stack.
func SQS(t testing.TB) *sqs.Client { t.Helper(); return awsclient.SQS(AWS(t)) }

// S3 returns a path-style S3 client for the stack.
func S3(t testing.TB) *s3.Client {
	t.Helper()
	return awsclient.S3(AWS(t), awsclient.Options{S3PathStyle: true})
}

// Unique returns prefix plus a random suffix, for resource names that must
// not collide between parallel tests and runs.
func Unique(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// NewBucket creates a fresh S3 bucket on the stack (named prefix plus a
// random suffix) and, when the test ends, deletes its objects and the
// bucket. The stack's S3 creates no bucket by itself, like S3.
func NewBucket(t testing.TB, prefix string) string {
	t.Helper()
	c := S3(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	name := Unique(prefix)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("stacktest: create bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(name)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Logf("stacktest: list bucket %s: %v", name, err)
				return
			}
			for _, o := range page.Contents {
				_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: o.Key})
			}
		}
		if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Logf("stacktest: delete bucket %s: %v", name, err)
		}
	})
	return name
}

// Queue is a test queue with its dead-letter queue.
type Queue struct {
	URL    string
	DLQURL string
}

// NewQueue creates a fresh queue and its DLQ (redrive after maxReceive
// receives) with the given visibility timeout, and deletes both when the
// test ends.
func NewQueue(t testing.TB, prefix string, maxReceive int, visibility time.Duration) Queue {
	t.Helper()
	c := SQS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	name := Unique(prefix)
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		t.Fatalf("stacktest: create dlq: %v", err)
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("stacktest: dlq arn: %v", err)
	}
	arn := attrs.Attributes[string(types.QueueAttributeNameQueueArn)]
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String(name),
		Attributes: map[string]string{
			"VisibilityTimeout": strconv.Itoa(int(visibility / time.Second)),
			"RedrivePolicy":     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, arn, maxReceive),
		},
	})
	if err != nil {
		t.Fatalf("stacktest: create queue: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})
		_, _ = c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: dlq.QueueUrl})
	})
	return Queue{URL: *q.QueueUrl, DLQURL: *dlq.QueueUrl}
}

// MySQL creates a fresh database on the stack's MySQL server, returns an
// open handle and its DSN, and drops the database when the test ends.
func MySQL(t testing.TB) (*sql.DB, string) {
	t.Helper()
	return MySQLCharset(t, "")
}

// MySQLCharset is MySQL with the database's default character set given
// (CREATE DATABASE … CHARACTER SET charset), for tests of what the schema
// does on a server whose default is not utf8mb4; "" keeps the server's.
func MySQLCharset(t testing.TB, charset string) (*sql.DB, string) {
	t.Helper()
	base, err := mysql.ParseDSN(Get(t, "CHATGUARD_MYSQL_DSN"))
	if err != nil {
		t.Fatalf("stacktest: CHATGUARD_MYSQL_DSN: %v", err)
	}
	name := strings.ReplaceAll(Unique("t"), "-", "_")
	admin := base.Clone()
	admin.DBName = ""
	adb, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Fatalf("stacktest: open mysql: %v", err)
	}
	defer adb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	create := "CREATE DATABASE " + name
	if charset != "" {
		create += " CHARACTER SET " + charset
	}
	if _, err := adb.ExecContext(ctx, create); err != nil {
		t.Fatalf("stacktest: create database: %v", err)
	}
	cfg := base.Clone()
	cfg.DBName = name
	cfg.ParseTime = true
	dsn := cfg.FormatDSN()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("stacktest: open mysql: %v", err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if adb, err := sql.Open("mysql", admin.FormatDSN()); err == nil {
			_, _ = adb.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
			_ = adb.Close()
		}
	})
	return db, dsn
}
