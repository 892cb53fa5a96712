package integration_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
)

func TestS3PutGetListBackedByFiles(t *testing.T) {
	t.Parallel()
	c := stacktest.S3(t)
	bucket := stacktest.LakeBucket(t)
	ctx := ctxFor(t, 30*time.Second)
	prefix := stacktest.Unique("it-s3") + "/"
	keys := []string{prefix + "a/one.txt", prefix + "a/two.txt", prefix + "b/three.txt"}
	t.Cleanup(func() {
		for _, k := range keys {
			_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		}
	})
	for _, k := range keys {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader([]byte("body of " + k))})
		require.NoError(t, err, k)
	}

	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(keys[1])})
	require.NoError(t, err)
	body, err := io.ReadAll(got.Body)
	got.Body.Close()
	require.NoError(t, err)
	require.Equal(t, "body of "+keys[1], string(body))

	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix + "a/")})
	require.NoError(t, err)
	var listed []string
	for _, o := range list.Contents {
		listed = append(listed, *o.Key)
	}
	require.ElementsMatch(t, keys[:2], listed)

	// The object is a plain file where the Athena stand-in looks for it.
	onDisk, err := os.ReadFile(filepath.Join(stacktest.LakeDir(t), filepath.FromSlash(keys[2])))
	require.NoError(t, err)
	require.Equal(t, "body of "+keys[2], string(onDisk))

	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(prefix + "missing")})
	require.Error(t, err)
}

func TestS3MultipartUploadThroughTransferManager(t *testing.T) {
	t.Parallel()
	c := stacktest.S3(t)
	bucket := stacktest.LakeBucket(t)
	ctx := ctxFor(t, time.Minute)
	key := stacktest.Unique("it-multipart") + "/big.bin"
	t.Cleanup(func() {
		_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	})

	data := make([]byte, 12<<20+123) // three parts of 5 MiB, the last one short
	_, err := rand.Read(data)
	require.NoError(t, err)
	up := transfermanager.New(c, func(o *transfermanager.Options) {
		o.PartSizeBytes, o.MultipartUploadThreshold, o.Concurrency = 5<<20, 5<<20, 2
	})
	out, err := up.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
	require.NoError(t, err)
	require.NotEmpty(t, aws.ToString(out.UploadID), "the transfer manager must have used a multipart upload")
	require.Len(t, out.CompletedParts, 3)

	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	require.NoError(t, err)
	body, err := io.ReadAll(got.Body)
	got.Body.Close()
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, body), "downloaded object differs from the upload")

	st, err := os.Stat(filepath.Join(stacktest.LakeDir(t), filepath.FromSlash(key)))
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), st.Size())
}
