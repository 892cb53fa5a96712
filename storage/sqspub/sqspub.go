// Package sqspub publishes review events to the SQS "review" queue in
// batches of up to ten messages per SendMessageBatch call, with a bounded
// number of calls in flight, retrying only the entries SQS reports as
// failed.
package sqspub

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/chatguard/chatguard/pipeline"
)

// MaxBatch is the most entries SQS accepts in one SendMessageBatch call.
const MaxBatch = 10

// The message attributes every review message carries, so that consumers
// and operators can route or inspect a message without parsing its body.
const (
	AttrRunID         = "run_id"
	AttrSchemaVersion = "schema_version"
)

// API is the one SQS call the publisher makes; *sqs.Client satisfies it,
// and tests wrap it to inject failures.
type API interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var _ API = (*sqs.Client)(nil)

// Config tunes the publisher.
type Config struct {
	// QueueURL is the review queue.
	QueueURL string
	// BatchSize is the number of messages per call, 1..10; 10 except in
	// the comparison benchmark.
	BatchSize int
	// Concurrency bounds the SendMessageBatch calls in flight.
	Concurrency int
	// MaxAttempts bounds the sends of one entry, the first included.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the full-jitter exponential backoff
	// before an entry is retried.
	BackoffBase, BackoffMax time.Duration
}

// DefaultConfig returns the defaults the batch command starts from.
func DefaultConfig() Config {
	return Config{
		BatchSize:   MaxBatch,
		Concurrency: 8,
		MaxAttempts: 6,
		BackoffBase: 50 * time.Millisecond,
		BackoffMax:  2 * time.Second,
	}
}

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.QueueURL) == "" {
		errs = append(errs, errors.New("review queue url is required"))
	}
	if c.BatchSize < 1 || c.BatchSize > MaxBatch {
		errs = append(errs, fmt.Errorf("batch size %d must be within 1..%d", c.BatchSize, MaxBatch))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("publish concurrency %d must be at least 1", c.Concurrency))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("publish max attempts %d must be at least 1", c.MaxAttempts))
	}
	if c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase {
		errs = append(errs, fmt.Errorf("publish backoff must satisfy 0 < base (%s) <= max (%s)", c.BackoffBase, c.BackoffMax))
	}
	return errors.Join(errs...)
}

// Stats is a snapshot of a publisher's counters.
type Stats struct {
	// Published counts messages SQS accepted.
	Published int64
	// Failed counts messages given up on: still failing after MaxAttempts,
	// failing for a sender fault, invalid, or cut off by cancellation.
	Failed int64
	// Calls counts SendMessageBatch calls, retries included.
	Calls int64
	// Retried counts entry re-sends after a failure.
	Retried int64
}

// MessagesPerCall is the average number of accepted messages per call.
func (s Stats) MessagesPerCall() float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.Published) / float64(s.Calls)
}

// maxErrors bounds how many distinct failure reasons a run keeps for its
// final error, so that a million failures do not become a million strings.
const maxErrors = 5

// Publisher sends review events to SQS. One Publisher serves one Run at a
// time; Stats may be read concurrently while it runs.
type Publisher struct {
	api API
	cfg Config
	now func() time.Time

	published, failed, calls, retried atomic.Int64

	mu     sync.Mutex
	reason []string
}

// New returns a Publisher, or the configuration's problems.
func New(api API, cfg Config) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sqspub: %w", err)
	}
	return &Publisher{api: api, cfg: cfg, now: func() time.Time { return time.Now().UTC() }}, nil
}

// Stats returns the counters so far.
func (p *Publisher) Stats() Stats {
	return Stats{Published: p.published.Load(), Failed: p.failed.Load(), Calls: p.calls.Load(), Retried: p.retried.Load()}
}

// Run publishes every event from in until in is closed, stamping each with
// its PublishedAt time, and waits for every call in flight. It fails when
// any message was not published, with the count and the first few reasons;
// the other messages are still sent. When ctx ends, Run stops reading in,
// gives up on unsent messages (counted as failed) and returns ctx's cause.
func (p *Publisher) Run(ctx context.Context, in <-chan pipeline.ReviewEvent) error {
	var g errgroup.Group
	g.SetLimit(p.cfg.Concurrency)
	batch := make([]types.SendMessageBatchRequestEntry, 0, p.cfg.BatchSize)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		entries := batch
		batch = make([]types.SendMessageBatchRequestEntry, 0, p.cfg.BatchSize)
		g.Go(func() error { p.send(ctx, entries); return nil }) // blocks while Concurrency calls are in flight
	}
	var cause error
loop:
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				break loop
			}
			e, err := p.entry(ev, len(batch))
			if err != nil {
				p.fail(1, err)
				continue
			}
			batch = append(batch, e)
			if len(batch) == p.cfg.BatchSize {
				flush()
			}
		case <-ctx.Done():
			cause = context.Cause(ctx)
			break loop
		}
	}
	if cause == nil {
		flush()
	} else if len(batch) > 0 {
		p.fail(len(batch), cause)
	}
	_ = g.Wait()
	if cause != nil {
		return fmt.Errorf("sqspub: cancelled: %w", cause)
	}
	st := p.Stats()
	if st.Failed > 0 {
		p.mu.Lock()
		reasons := strings.Join(p.reason, "; ")
		p.mu.Unlock()
		return fmt.Errorf("sqspub: %d of %d messages not published: %s", st.Failed, st.Failed+st.Published, reasons)
	}
	return nil
}

func (p *Publisher) entry(ev pipeline.ReviewEvent, i int) (types.SendMessageBatchRequestEntry, error) {
	ev.PublishedAt = p.now()
	if err := ev.Validate(); err != nil {
		return types.SendMessageBatchRequestEntry{}, fmt.Errorf("room %q: %w", ev.RoomID, err)
	}
	body, err := ev.Encode()
	if err != nil {
		return types.SendMessageBatchRequestEntry{}, err
	}
	return types.SendMessageBatchRequestEntry{
		Id:          aws.String(strconv.Itoa(i)),
		MessageBody: aws.String(string(body)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			AttrRunID:         {DataType: aws.String("String"), StringValue: aws.String(ev.RunID)},
			AttrSchemaVersion: {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(ev.SchemaVersion))},
		},
	}, nil
}

// send delivers one batch, re-sending only the entries SQS reports as
// failed without a sender fault, until they succeed or run out of attempts.
// A whole-call error is not retried here: the SDK's retryer already has.
func (p *Publisher) send(ctx context.Context, pending []types.SendMessageBatchRequestEntry) {
	for attempt := 1; ; attempt++ {
		p.calls.Add(1)
		out, err := p.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(p.cfg.QueueURL), Entries: pending})
		if err != nil {
			p.fail(len(pending), fmt.Errorf("send message batch: %w", err))
			return
		}
		p.published.Add(int64(len(out.Successful)))
		retry, lastErr := p.retriable(pending, out)
		if len(retry) == 0 {
			return
		}
		if attempt >= p.cfg.MaxAttempts {
			p.fail(len(retry), fmt.Errorf("after %d attempts: %w", attempt, lastErr))
			return
		}
		t := time.NewTimer(p.backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			p.fail(len(retry), context.Cause(ctx))
			return
		case <-t.C:
		}
		p.retried.Add(int64(len(retry)))
		pending = retry
	}
}

// retriable sorts the entries of a call's result: it counts sender faults
// as failed at once and returns the rest of the failed entries to re-send.
func (p *Publisher) retriable(sent []types.SendMessageBatchRequestEntry, out *sqs.SendMessageBatchOutput) ([]types.SendMessageBatchRequestEntry, error) {
	byID := make(map[string]types.SendMessageBatchRequestEntry, len(sent))
	for _, e := range sent {
		byID[aws.ToString(e.Id)] = e
	}
	for _, s := range out.Successful {
		delete(byID, aws.ToString(s.Id))
	}
	var (
		retry   []types.SendMessageBatchRequestEntry
		lastErr error
	)
	for _, f := range out.Failed {
		e, ok := byID[aws.ToString(f.Id)]
		if !ok {
			continue
		}
		delete(byID, aws.ToString(f.Id))
		err := fmt.Errorf("entry failed: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		if f.SenderFault {
			p.fail(1, err)
			continue
		}
		lastErr = err
		retry = append(retry, e)
	}
	// An entry SQS neither accepted nor rejected is treated as failed, so
	// that a malformed answer cannot lose a message silently.
	for _, e := range sent {
		if _, ok := byID[aws.ToString(e.Id)]; ok {
			lastErr = errors.New("entry missing from the SendMessageBatch result")
			retry = append(retry, e)
		}
	}
	return retry, lastErr
}

// backoff is full-jitter exponential: uniform in [0, min(max, base·2^(n-1))].
func (p *Publisher) backoff(attempt int) time.Duration {
	d := p.cfg.BackoffMax
	if attempt < 30 {
		d = min(p.cfg.BackoffMax, p.cfg.BackoffBase<<(attempt-1))
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}

func (p *Publisher) fail(n int, err error) {
	p.failed.Add(int64(n))
	msg := err.Error()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.reason) >= maxErrors {
		return
	}
	for _, r := range p.reason {
		if r == msg {
			return
		}
	}
	p.reason = append(p.reason, msg)
}
