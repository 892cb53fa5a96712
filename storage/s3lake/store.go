package s3lake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/chatguard/chatguard/pipeline"
)

// DefaultPartSize is the multipart part size: objects larger than this are
// uploaded in parts of this size, several at a time.
const DefaultPartSize = 16 << 20

// abortTimeout bounds the abort of a failed multipart upload, which runs on
// a fresh context so that it happens even when the caller's was cancelled.
const abortTimeout = 30 * time.Second

// Store writes and reads lake objects in one S3 bucket.
type Store struct {
	client   *s3.Client
	uploader *transfermanager.Client
	bucket   string
}

// NewStore returns a Store for bucket. partSize is the multipart part size
// (0 means DefaultPartSize; S3 requires at least 5 MiB).
func NewStore(client *s3.Client, bucket string, partSize int64) *Store {
	if partSize <= 0 {
		partSize = DefaultPartSize
	}
	return &Store{
		client: client,
		bucket: bucket,
		// The transfer manager aborts a failed multipart upload, so that no
		// orphaned parts accrue storage; the whole object is retried by the
		// caller.
		uploader: transfermanager.New(client, func(o *transfermanager.Options) {
			o.PartSizeBytes = partSize
			// Up to partSize bytes go in one PutObject, larger objects in
			// parts of partSize.
			o.MultipartUploadThreshold = partSize + 1
			o.Concurrency = 4
			o.FailTimeout = abortTimeout
		}),
	}
}

// Bucket returns the bucket name.
func (s *Store) Bucket() string { return s.bucket }

// Put writes body under key, by multipart upload when it is larger than the
// part size. When Put returns nil the object is durably stored; an existing
// object under key is replaced. Errors are *pipeline.RetryableError unless S3
// said the request itself is wrong (4xx other than throttling and timeouts),
// which is *pipeline.PermanentError; callers that must not lose data retry
// both, with backoff.
func (s *Store) Put(ctx context.Context, key string, body []byte, contentType string) error {
	_, err := s.uploader.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(body),
		ContentType:   aws.String(contentType),
		ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		return classify(fmt.Errorf("s3lake: put %s: %w", key, err))
	}
	return nil
}

// Get reads the object under key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("s3lake: get %s: %w", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("s3lake: get %s: %w", key, err)
	}
	return b, nil
}

// List returns every key under prefix, in S3's (lexical) order.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("s3lake: list %s: %w", prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

func classify(err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidBucketName", "InvalidArgument":
			return pipeline.Permanent(err)
		}
	}
	return pipeline.Retryable(err, 0)
}
