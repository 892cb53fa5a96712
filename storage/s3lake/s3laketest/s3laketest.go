// Package s3laketest gives tests of the lake realistic lake events and an
// in-process S3 server, so that they need nothing outside the process.
package s3laketest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/chatguard/chatguard/pipeline"
)

// Events returns n lake events of mixed types spread over hours hours
// starting at start, deterministic for a seed. Times carry whole
// milliseconds so that they survive the lake's millisecond timestamps.
func Events(n int, seed uint64, start time.Time, hours int) []pipeline.LakeEvent {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]pipeline.LakeEvent, n)
	labels := []pipeline.Label{pipeline.LabelAbusive, pipeline.LabelSuspicious, pipeline.LabelClean}
	cats := append([]pipeline.Category{pipeline.CategoryClean}, pipeline.AbuseCategories...)
	actions := []pipeline.Action{pipeline.ActionNone, pipeline.ActionWarn, pipeline.ActionRestrict, pipeline.ActionBan}
	for i := range out {
		occurred := start.UTC().Add(time.Duration(r.Int64N(int64(hours)*int64(time.Hour)))).Truncate(time.Millisecond)
		ws := occurred.Truncate(time.Hour).Add(-time.Hour)
		we := ws.Add(time.Hour)
		room := fmt.Sprintf("room-%05d", r.IntN(5000))
		var id [16]byte
		for j := range id {
			id[j] = byte(r.UintN(256))
		}
		ev := pipeline.LakeEvent{
			EventID:       uuid.Must(uuid.FromBytes(id[:])).String(),
			OccurredAt:    occurred,
			SchemaVersion: pipeline.LakeEventSchemaVersion,
		}
		switch i % 3 {
		case 0:
			ev.EventType = pipeline.EventInferenceLog
			stage := pipeline.Stages[r.IntN(len(pipeline.Stages))]
			pool := pipeline.PoolPrimary
			if r.IntN(10) == 0 {
				pool = pipeline.PoolFallback
			}
			outcome, errKind, output := "ok", "", fmt.Sprintf(`{"risk":"%s","categories":["%s"]}`, []string{"none", "low", "high"}[r.IntN(3)], cats[r.IntN(len(cats))])
			if r.IntN(20) == 0 {
				outcome, errKind, output = "error", "timeout", ""
			}
			ev.Payload = pipeline.InferenceLog{
				RoomID: room, WindowStart: ws, WindowEnd: we, PipelineVersion: "v1.2.0", RunID: "run-" + ws.Format("2006010215"),
				Stage: stage, Pool: pool, Model: "qwen2.5-32b-instruct", Attempt: 1 + r.IntN(3), Outcome: outcome, ErrorKind: errKind,
				TTFTMillis: float64(r.IntN(2000)) + 0.5, LatencyMs: float64(r.IntN(20000)) + 0.25, TokensIn: r.IntN(8000), TokensOut: r.IntN(500),
				PromptSHA256: fmt.Sprintf("%064x", r.Uint64()), PromptChars: r.IntN(30000), Messages: r.IntN(80), Images: r.IntN(3), Output: output,
			}
		case 1:
			ev.EventType = pipeline.EventModeratorFeedback
			ev.Payload = pipeline.ModeratorFeedback{
				RoomID: room, WindowStart: ws, WindowEnd: we, PipelineVersion: "v1.2.0", ModeratorID: fmt.Sprintf("mod-%02d", r.IntN(30)),
				VerdictLabel: labels[r.IntN(3)], VerdictCategory: cats[r.IntN(len(cats))],
				DecidedLabel: labels[r.IntN(3)], DecidedCategory: cats[r.IntN(len(cats))], ActionTaken: actions[r.IntN(4)],
			}
		default:
			ev.EventType = pipeline.EventVerdict
			ev.Payload = pipeline.VerdictEvent{
				RoomID: room, WindowStart: ws, WindowEnd: we, PipelineVersion: "v1.2.0", RunID: "run-" + ws.Format("2006010215"),
				Status: pipeline.StatusDone, Label: labels[r.IntN(3)], Category: cats[r.IntN(len(cats))], Severity: r.IntN(6),
				Confidence: float64(r.IntN(1001)) / 1000, Action: actions[r.IntN(4)], EarlyExit: r.IntN(2) == 0,
				FallbackUsed: r.IntN(8) == 0, Attempts: 1 + r.IntN(4), LatencyMs: float64(r.IntN(60000)),
			}
		}
		out[i] = ev
	}
	return out
}

// Body returns the JSON queue body of ev, failing t on error.
func Body(t testing.TB, ev pipeline.LakeEvent) []byte {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatalf("s3laketest: marshal: %v", err)
	}
	return b
}

// S3 starts an in-memory S3 server with the bucket created, and returns its
// URL and a path-style client for it. The server stops when the test ends.
func S3(t testing.TB, bucket string) (string, *s3.Client) {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	c := Client(srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("s3laketest: create bucket: %v", err)
	}
	return srv.URL, c
}

// Client returns a path-style S3 client for endpoint with dummy credentials.
func Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}
