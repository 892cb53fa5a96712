package awsclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"
)

// recorder is a fake AWS endpoint that keeps what it was sent.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	switch {
	case strings.HasPrefix(req.Header.Get("X-Amz-Target"), "AmazonSQS."):
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"QueueUrls":[]}`))
	default: // S3 ListObjectsV2
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>lake</Name><KeyCount>0</KeyCount></ListBucketResult>`))
	}
}

func (r *recorder) last(t *testing.T) *http.Request {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.reqs)
	return r.reqs[len(r.reqs)-1]
}

// The endpoint variables are process-wide, so these tests do not run in
// parallel.
func setup(t *testing.T) (sqsRec, s3Rec *recorder) {
	t.Helper()
	sqsRec, s3Rec = &recorder{}, &recorder{}
	sqsSrv, s3Srv := httptest.NewServer(sqsRec), httptest.NewServer(s3Rec)
	t.Cleanup(sqsSrv.Close)
	t.Cleanup(s3Srv.Close)
	t.Setenv("AWS_REGION", "ap-northeast-2")
	t.Setenv("AWS_ACCESS_KEY_ID", "test-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1") // must lose to the per-service variables
	t.Setenv("AWS_ENDPOINT_URL_SQS", sqsSrv.URL)
	t.Setenv("AWS_ENDPOINT_URL_S3", s3Srv.URL)
	return sqsRec, s3Rec
}

func TestPerServiceEndpointsAndSigV4(t *testing.T) {
	sqsRec, s3Rec := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := Options{S3PathStyle: true, MaxAttempts: 1}
	cfg, err := Load(ctx, o)
	require.NoError(t, err)
	require.Equal(t, "ap-northeast-2", cfg.Region)

	_, err = SQS(cfg).ListQueues(ctx, &sqs.ListQueuesInput{})
	require.NoError(t, err)
	req := sqsRec.last(t)
	require.Equal(t, "AmazonSQS.ListQueues", req.Header.Get("X-Amz-Target"))
	auth := req.Header.Get("Authorization")
	require.True(t, strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=test-key/"), auth)
	require.Contains(t, auth, "/ap-northeast-2/sqs/aws4_request")

	_, err = S3(cfg, o).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("lake")})
	require.NoError(t, err)
	req = s3Rec.last(t)
	require.True(t, strings.HasPrefix(req.URL.Path, "/lake"), "path-style puts the bucket in the path: %s", req.URL.Path)
	require.Contains(t, req.Header.Get("Authorization"), "/s3/aws4_request")
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	err := Options{MaxAttempts: -1, HTTPTimeout: 5 * time.Second}.Validate()
	require.ErrorContains(t, err, "max attempts")
	require.ErrorContains(t, err, "must exceed the 20s SQS long poll")
	require.NoError(t, Options{HTTPTimeout: time.Minute}.Validate())
}

func TestNoRegionIsAnError(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	_, err := Load(context.Background(), Options{})
	require.ErrorContains(t, err, "no region")
}
