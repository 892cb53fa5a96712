package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// s3Scenario: the lake's S3 unreachable for the consumer while it works
// through a backlog. It holds what it has (bounded), writes it all after,
// and loses nothing.
func s3Scenario(t *testing.T, s sizes) {
	// The consumer's bound, which each of its receivers (4 by default) may
	// overshoot by one receive of 10 messages (consumer.Config).
	const maxBuffered, overshoot = 5000, 4 * 10
	target := strings.TrimPrefix(stacktest.Get(t, "AWS_ENDPOINT_URL_S3"), "http://")
	proxy, err := NewProxy(target)
	require.NoError(t, err)
	t.Cleanup(proxy.Close)
	store, root := newLakeRoot(t)
	q := stacktest.NewQueue(t, "chaos-lake", 5, 60*time.Second)
	sqsc := stacktest.SQS(t)

	evs := s3laketest.Events(s.lake, 12, time.Now().UTC().Add(-3*time.Hour), 3)
	bodies := make([]string, len(evs))
	for i, ev := range evs {
		bodies[i] = string(s3laketest.Body(t, ev))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			for start := g * 10; start < len(bodies); start += 80 {
				var entries []types.SendMessageBatchRequestEntry
				for i, b := range bodies[start:min(start+10, len(bodies))] {
					entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)})
				}
				out, err := sqsc.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.URL), Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("%d entries failed", len(out.Failed))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	w := startConsumer(t, q.URL, root, "AWS_ENDPOINT_URL_S3=http://"+proxy.Addr(),
		"CHATGUARD_MAX_BUFFERED_EVENTS="+strconv.Itoa(maxBuffered), "CHATGUARD_FLUSH_ROWS=2000")
	written := func() float64 { return w.metric(`chatguard_consumer_events_total{`) }
	deadline := time.Now().Add(s.settle)
	for written() < float64(s.lake/4) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // watching a real process
	}
	proxy.SetDown(true)
	peak := 0.0
	end := time.Now().Add(s.s3Down)
	for time.Now().Before(end) {
		peak = max(peak, w.metric("chatguard_consumer_buffered_events "))
		time.Sleep(100 * time.Millisecond) // sampling the gauge during the outage
	}
	proxy.SetDown(false)
	up := time.Now()
	for time.Now().Before(up.Add(s.settle)) {
		if v := depthOf(sqsc, q.URL); v == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	drained := time.Since(up)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := s3laketest.ReadLake(ctx, store, root+"/events/", root+"/errors/")
	require.NoError(t, err)
	byID, _ := c.ByID()
	lost := 0
	for _, ev := range evs {
		if _, ok := byID[ev.EventID]; !ok {
			lost++
		}
	}
	holds := lost == 0 && peak <= maxBuffered+overshoot
	record(row{fmt.Sprintf("S3 down %s", s.s3Down), fmt.Sprintf("consumer under %d events (max buffered %d, +%d for receives in flight)", s.lake, maxBuffered, overshoot),
		fmt.Sprintf("lost %d of %d; peak buffered events during the outage %d; queue drained %s after recovery", lost, s.lake, int(peak), drained.Round(100*time.Millisecond)), holds})
	require.Zero(t, lost, "0 events lost from the lake")
	require.LessOrEqual(t, peak, float64(maxBuffered+overshoot), "memory bound respected")
}

// newLakeRoot returns the stack's lake and a prefix of it of t's own,
// emptied when t ends.
func newLakeRoot(t *testing.T) (*s3lake.Store, string) {
	client := stacktest.S3(t)
	bucket := stacktest.LakeBucket(t)
	root := stacktest.Unique("chaos-lake")
	store := s3lake.NewStore(client, bucket, 0)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		keys, _ := store.List(ctx, root+"/")
		for _, k := range keys {
			_, _ = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		}
	})
	return store, root
}

// startConsumer runs the consumer binary from queueURL into the lake's
// root/events/ (rejects under root/errors/), env added last, and kills it
// when t ends.
func startConsumer(t *testing.T, queueURL, root string, env ...string) *worker {
	w := &worker{exited: make(chan struct{})}
	w.cmd = exec.Command(standin.Build(t, "github.com/chatguard/chatguard/cmd/consumer"))
	w.cmd.Env = append(os.Environ(),
		"CHATGUARD_FEEDBACK_QUEUE_URL="+queueURL, "CHATGUARD_LAKE_BUCKET="+stacktest.LakeBucket(t), "CHATGUARD_LAKE_PREFIX="+root+"/events/",
		"CHATGUARD_ERRORS_PREFIX="+root+"/errors/", "CHATGUARD_S3_PATH_STYLE=true", "CHATGUARD_ADMIN_ADDR=127.0.0.1:0",
		"CHATGUARD_FLUSH_AGE=2s", "CHATGUARD_WAIT_TIME=1s", "CHATGUARD_VISIBILITY_TIMEOUT=30s",
		"CHATGUARD_WRITE_RETRY_BASE=100ms", "CHATGUARD_WRITE_RETRY_MAX=2s")
	w.cmd.Env = append(w.cmd.Env, env...)
	startProc(t, w)
	t.Cleanup(w.kill)
	return w
}

// depthOf returns a queue's visible plus in-flight messages (-1 when it
// cannot be read).
func depthOf(c *sqs.Client, url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return -1
	}
	v, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	f, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return v + f
}
