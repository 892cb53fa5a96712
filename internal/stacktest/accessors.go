package stacktest

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/internal/awsclient"
)

// Athena returns an Athena client for the stack's stand-in.
func Athena(t testing.TB) *athena.Client { t.Helper(); return awsclient.Athena(AWS(t)) }

// Redis returns a client for the stack's Redis, closed when the test ends.
// It fails t when Redis does not answer PING.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: Get(t, "CHATGUARD_REDIS_ADDR"), DialTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("stacktest: redis: %v", err)
	}
	return c
}

// LakeBucket is the S3 bucket of the lake.
func LakeBucket(t testing.TB) string { t.Helper(); return Get(t, "CHATGUARD_LAKE_BUCKET") }

// LakeDir is the local folder behind the lake bucket: the object with key
// k is the file LakeDir/k.
func LakeDir(t testing.TB) string { t.Helper(); return Get(t, "CHATGUARD_LAKE_DIR") }

// TruthDir holds the sample lake's ground truth (groundtruth.jsonl).
func TruthDir(t testing.TB) string { t.Helper(); return Get(t, "CHATGUARD_TRUTH_DIR") }

// ChatAPIURL is the chat-history API's base URL.
func ChatAPIURL(t testing.TB) string { t.Helper(); return Get(t, "CHATGUARD_CHAT_API_URL") }

// AthenaAdminURL is the Athena stand-in's admin endpoint.
func AthenaAdminURL(t testing.TB) string { t.Helper(); return Get(t, "CHATGUARD_ATHENA_ADMIN_URL") }

// LLM is one simulated model endpoint of the stack.
type LLM struct {
	// BaseURL ends in /v1, as go-openai expects.
	BaseURL string
	Model   string
	// APIKey is empty for the primary (like a local vLLM).
	APIKey string
	// AdminURL is the simulator's admin endpoint (fault injection, stats).
	AdminURL string
}

// Primary returns the simulator standing in for the vLLM pool.
func Primary(t testing.TB) LLM {
	t.Helper()
	return LLM{
		BaseURL:  Get(t, "CHATGUARD_PRIMARY_BASE_URL"),
		Model:    Get(t, "CHATGUARD_PRIMARY_MODEL"),
		AdminURL: Get(t, "CHATGUARD_PRIMARY_ADMIN_URL"),
	}
}

// Fallback returns the simulator standing in for the managed API.
func Fallback(t testing.TB) LLM {
	t.Helper()
	return LLM{
		BaseURL:  Get(t, "CHATGUARD_FALLBACK_BASE_URL"),
		Model:    Get(t, "CHATGUARD_FALLBACK_MODEL"),
		APIKey:   Get(t, "CHATGUARD_FALLBACK_API_KEY"),
		AdminURL: Get(t, "CHATGUARD_FALLBACK_ADMIN_URL"),
	}
}

// SampleWindow returns a one-hour window of the sample lake with rooms in
// it.
func SampleWindow(t testing.TB) (start, end time.Time) {
	t.Helper()
	var err error
	if start, err = time.Parse(time.RFC3339, Get(t, "CHATGUARD_SAMPLE_WINDOW_START")); err != nil {
		t.Fatalf("stacktest: CHATGUARD_SAMPLE_WINDOW_START: %v", err)
	}
	if end, err = time.Parse(time.RFC3339, Get(t, "CHATGUARD_SAMPLE_WINDOW_END")); err != nil {
		t.Fatalf("stacktest: CHATGUARD_SAMPLE_WINDOW_END: %v", err)
	}
	return start.UTC(), end.UTC()
}
