package s3lake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
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

var _ CompactStore = (*Store)(nil)

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

// Get reads the object under key. A missing key is a
// *pipeline.PermanentError wrapping ErrNotFound; other errors are
// classified as Put's.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		var missing *types.NoSuchKey
		if errors.As(err, &missing) {
			return nil, pipeline.Permanent(fmt.Errorf("s3lake: get %s: %w: %w", key, ErrNotFound, err))
		}
		return nil, classify(fmt.Errorf("s3lake: get %s: %w", key, err))
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

// ListObjects implements CompactStore: every object under prefix with its
// size, in S3's (lexical) order.
func (s *Store) ListObjects(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var objs []ObjectInfo
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, classify(fmt.Errorf("s3lake: list %s: %w", prefix, err))
		}
		for _, o := range page.Contents {
			objs = append(objs, ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size)})
		}
	}
	return objs, nil
}

// deleteBatch is S3's limit of keys per DeleteObjects call.
const deleteBatch = 1000

// Delete implements CompactStore: it removes keys, up to 1,000 per call.
// Keys that do not exist are not an error (S3 reports them deleted). Any
// key S3 failed to delete fails the call, naming the first; deleting
// again is harmless.
func (s *Store) Delete(ctx context.Context, keys []string) error {
	for batch := range slices.Chunk(keys, deleteBatch) {
		objs := make([]types.ObjectIdentifier, len(batch))
		for i, k := range batch {
			objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.bucket),
			Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return classify(fmt.Errorf("s3lake: delete %d objects: %w", len(batch), err))
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return pipeline.Retryable(fmt.Errorf("s3lake: delete %s: %s: %s (%d of %d keys failed)",
				aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors), len(batch)), 0)
		}
	}
	return nil
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
