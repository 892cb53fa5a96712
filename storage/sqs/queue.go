// Package sqs is chatguard's one adapter for Amazon SQS. Every binary
// talks to SQS through it: the worker receives and settles review messages
// and copies poison ones to the DLQ, the consumer drains the feedback
// queue, the batch publishes review events and the worker lake events.
//
// Batched calls. Send, Delete and ChangeVisibility take any number of
// entries and go out as batch calls of up to ten entries, several calls in
// flight. With Config.Linger set, entries of concurrent callers share
// calls: a job deleting its one message waits up to Linger for others.
// Stream sends messages handed over one by one (the publishers).
//
// Retry rule, the same for every batched call: each entry gets at most
// Config.Retry.Attempts calls, with the full-jitter backoff of
// internal/retry between rounds. After a call,
//   - an entry SQS accepted is done;
//   - an entry SQS rejected as the sender's fault (SenderFault: an invalid
//     receipt handle, invalid characters) is reported at once, never retried,
//     as a *pipeline.PermanentError (so is a message over MaxMessageBytes);
//   - any other failed entry is retried in the next round, alone with the
//     other failed entries: an accepted entry is never sent twice by us;
//   - a whole-call error counts as a failure of every entry of the call and
//     follows the same rule: a client fault that is not throttling (the
//     queue does not exist, access denied, a bad parameter) is the sender's
//     fault and is reported at once; anything else (network, timeouts,
//     throttling, 5xx) is retried.
//
// A retried whole call may have reached SQS the first time, so a message
// can be sent twice: the queues are at-least-once anyway and every
// consumer deduplicates. The SDK's own retries are turned off for each call
// made here, so that this is the one retry layer. Receive is not retried:
// its callers loop anyway and back off between failed polls.
package sqs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

// SendAPI is the one SQS call a publisher makes; *sqs.Client satisfies it.
type SendAPI interface {
	SendMessageBatch(ctx context.Context, in *awssqs.SendMessageBatchInput, optFns ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error)
}

// API is the part of the SQS client a Queue uses; *sqs.Client satisfies
// it, and tests wrap it to inject failures.
type API interface {
	SendAPI
	ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *awssqs.DeleteMessageBatchInput, optFns ...func(*awssqs.Options)) (*awssqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *awssqs.ChangeMessageVisibilityBatchInput, optFns ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityBatchOutput, error)
}

var (
	_ API            = (*awssqs.Client)(nil)
	_ pipeline.Queue = (*Queue)(nil)
)

// MaxBatch is the most entries SQS accepts in one batch call.
const MaxBatch = 10

// MaxMessageBytes is SQS's limit on one message (body and attributes) and
// on the payload of one batch call.
const MaxMessageBytes = 256 * 1024

// maxVisibility is SQS's ceiling on a visibility timeout.
const maxVisibility = 12 * time.Hour

var (
	// ErrTooLarge is the error of a message over MaxMessageBytes; it is
	// never sent.
	ErrTooLarge = errors.New("message over the 256 KiB SQS limit")
	// ErrClosed is returned by calls on a closed Queue or Stream.
	ErrClosed = errors.New("closed")
	// errMissing marks an entry that a batch result neither accepted nor
	// rejected; it is retried, so that a malformed answer loses nothing.
	errMissing = &EntryError{Code: "Missing", Message: "entry missing from the batch result"}
)

// EntryError is SQS's answer for one failed entry of a batch call.
type EntryError struct {
	Code    string
	Message string
	// SenderFault is SQS's verdict that the entry itself is wrong; such an
	// entry is never retried.
	SenderFault bool
}

// Error is SQS's code and message.
func (e *EntryError) Error() string { return e.Code + ": " + e.Message }

// Op names a kind of SQS call in Call.
type Op string

// The operations a Queue makes.
const (
	OpReceive          Op = "receive"
	OpSend             Op = "send"
	OpDelete           Op = "delete"
	OpChangeVisibility Op = "change_visibility"
)

// Call describes one SQS call, for metrics (Config.OnCall).
type Call struct {
	Op Op
	// Attempt is the round of its entries: 1 for a first call, more for a
	// retry of the entries that failed before.
	Attempt int
	// Entries is how many entries the call carried (messages returned,
	// for a receive).
	Entries int
	// Failed is how many of them failed (all of them when Err is set).
	Failed int
	// Err is the error of the whole call.
	Err      error
	Duration time.Duration
}

// Config tunes a Queue. Start from DefaultConfig.
type Config struct {
	// Name names the queue in errors ("review", "feedback").
	Name string
	// URL is the queue's URL.
	URL string
	// BatchSize is the number of entries per call, 1..10; 10 except in
	// the comparison benchmark.
	BatchSize int
	// Concurrency bounds the batch calls in flight per operation.
	Concurrency int
	// Linger is how long an entry of Send, Delete or ChangeVisibility
	// waits for entries of concurrent calls to share its batch call; 0
	// sends what is there at once.
	Linger time.Duration
	// Retry is the backoff between rounds of an entry; Attempts bounds
	// the calls per entry, the first included (at least 1).
	Retry retry.Policy
	// CallTimeout bounds one call.
	CallTimeout time.Duration
	// OnCall, when set, is told about every call (metrics). It must be
	// quick and safe for concurrent use.
	OnCall func(Call)
}

// DefaultConfig returns the defaults; URL must still be set.
func DefaultConfig() Config {
	return Config{
		BatchSize:   MaxBatch,
		Concurrency: 4,
		Retry:       retry.Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second, Attempts: 3},
		CallTimeout: 10 * time.Second,
	}
}

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	name := strings.TrimSpace(c.Name + " queue url")
	if strings.TrimSpace(c.URL) == "" {
		errs = append(errs, fmt.Errorf("%s is required", name))
	}
	if c.BatchSize < 1 || c.BatchSize > MaxBatch {
		errs = append(errs, fmt.Errorf("batch size %d must be within 1..%d", c.BatchSize, MaxBatch))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d must be at least 1", c.Concurrency))
	}
	if c.Linger < 0 {
		errs = append(errs, errors.New("linger must not be negative"))
	}
	if c.Retry.Attempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts %d must be at least 1", c.Retry.Attempts))
	}
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.CallTimeout <= 0 {
		errs = append(errs, errors.New("call timeout must be positive"))
	}
	return errors.Join(errs...)
}

// oneAttempt turns the SDK's retries off for a call: this package is the
// retry layer.
func oneAttempt(o *awssqs.Options) { o.RetryMaxAttempts = 1 }

// core is what every operation shares: the configuration and the
// round-by-round retry of batch entries.
type core struct {
	cfg    Config
	prefix string
	clk    clock.Clock // lingers and the backoff between rounds
	// sleep waits between rounds; nil waits on clk. Tests in this package
	// set it to record the backoff without waiting while lingers keep
	// real time.
	sleep retry.SleepFunc
}

// Option sets what a queue or publisher is built with besides its
// Config: the collaborators an operator does not configure.
type Option func(*core)

// WithClock runs lingers and the backoff between rounds on c instead of
// the wall clock (nil keeps the wall clock). CallTimeout stays on real
// time: it bounds a call to SQS, another machine.
func WithClock(c clock.Clock) Option {
	return func(co *core) { co.clk = clock.Or(c) }
}

func newCore(cfg Config, opts []Option) (*core, error) {
	prefix := "sqs"
	if cfg.Name != "" {
		prefix += ": " + cfg.Name
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", prefix, err)
	}
	c := &core{cfg: cfg, prefix: prefix, clk: clock.Real()}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

func (c *core) observe(call Call) {
	if c.cfg.OnCall != nil {
		c.cfg.OnCall(call)
	}
}

// callFunc makes one batch call over entries and returns each entry's
// result in order (nil: accepted), or the whole call's error.
type callFunc[E any] func(ctx context.Context, entries []E) ([]*EntryError, error)

// settle runs the retry rule of the package documentation over one batch
// and returns each entry's final error (nil: done). When ctx ends, the
// entries not done fail with its cause.
func settle[E any](ctx context.Context, c *core, op Op, entries []E, call callFunc[E]) []error {
	errs := make([]error, len(entries))
	pending := make([]int, len(entries))
	for i := range pending {
		pending[i] = i
	}
	batch := make([]E, 0, len(entries))
	rounds := 0
	exhausted := false
	err := retry.Do(ctx, c.cfg.Retry, retry.Options{Clock: c.clk, Sleep: c.sleep}, func(ctx context.Context) error {
		if cause := context.Cause(ctx); cause != nil {
			return retry.Permanent(cause)
		}
		rounds++
		batch = batch[:0]
		for _, i := range pending {
			batch = append(batch, entries[i])
		}
		cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
		start := c.clk.Now()
		res, err := call(cctx, batch)
		cancel()
		if err != nil {
			c.observe(Call{Op: op, Attempt: rounds, Entries: len(batch), Failed: len(batch), Err: err, Duration: c.clk.Since(start)})
			err = fmt.Errorf("%s batch: %w", op, err)
			for _, i := range pending {
				errs[i] = err
			}
			exhausted = rounds >= c.cfg.Retry.Attempts
			if permanentCall(err) {
				return retry.Permanent(err)
			}
			return err
		}
		again := pending[:0]
		failed := 0
		for j, i := range pending {
			switch e := res[j]; {
			case e == nil:
				errs[i] = nil
			case e.SenderFault:
				// The entry itself is wrong: no retry by anyone will
				// change SQS's answer.
				failed++
				errs[i] = pipeline.Permanent(fmt.Errorf("%s entry: %w", op, e))
			default:
				failed++
				errs[i] = fmt.Errorf("%s entry: %w", op, e)
				again = append(again, i)
			}
		}
		c.observe(Call{Op: op, Attempt: rounds, Entries: len(batch), Failed: failed, Duration: c.clk.Since(start)})
		pending = again
		if len(pending) == 0 {
			return nil
		}
		exhausted = rounds >= c.cfg.Retry.Attempts
		return errs[pending[0]]
	})
	if err != nil {
		cause := context.Cause(ctx)
		for _, i := range pending {
			switch {
			case errs[i] == nil: // never tried: ctx had ended
				errs[i] = fmt.Errorf("%s: %w", op, cause)
			case cause != nil:
				errs[i] = fmt.Errorf("%w: %w", cause, errs[i])
			case exhausted:
				errs[i] = fmt.Errorf("after %d attempts: %w", rounds, errs[i])
			}
		}
	}
	for i, e := range errs {
		if e != nil {
			errs[i] = fmt.Errorf("%s: %w", c.prefix, e)
		}
	}
	return errs
}

// permanentCall reports a whole-call error that is the sender's fault:
// an API error with a client fault that is not throttling.
func permanentCall(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	if _, throttled := awsretry.DefaultThrottleErrorCodes[ae.ErrorCode()]; throttled {
		return false
	}
	return ae.ErrorFault() == smithy.FaultClient
}

// results maps a batch answer onto the entries by their ids (their
// indexes in the call).
func results(n int, ok []string, failed []types.BatchResultErrorEntry) []*EntryError {
	res := make([]*EntryError, n)
	seen := make([]bool, n)
	for _, id := range ok {
		if i, err := strconv.Atoi(id); err == nil && i >= 0 && i < n {
			seen[i] = true
		}
	}
	for _, f := range failed {
		if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i >= 0 && i < n {
			seen[i] = true
			res[i] = &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
		}
	}
	for i := range res {
		if !seen[i] {
			res[i] = errMissing
		}
	}
	return res
}

// ids are the entry ids of a batch call: its indexes.
var ids = func() [MaxBatch]*string {
	var a [MaxBatch]*string
	for i := range a {
		a[i] = aws.String(strconv.Itoa(i))
	}
	return a
}()

// visibilitySeconds rounds d up to whole seconds (a 1 ms backoff must not
// become 0, a hand-back) within SQS's range.
func visibilitySeconds(d time.Duration) int32 {
	d = min(max(d, 0), maxVisibility)
	return int32(math.Ceil(d.Seconds()))
}

// Queue is one SQS queue: receive, and batched send, delete and change of
// visibility. It is safe for concurrent use. Close it once its users are
// done.
type Queue struct {
	*core
	api    API
	sender *sender
	send   *batcher[pipeline.OutMessage]
	del    *batcher[string]
	vis    *batcher[visEntry]
}

type visEntry struct {
	receipt string
	secs    int32
}

// New returns a queue over api, or the configuration's problems.
func New(api API, cfg Config, opts ...Option) (*Queue, error) {
	c, err := newCore(cfg, opts)
	if err != nil {
		return nil, err
	}
	q := &Queue{core: c, api: api}
	q.sender = &sender{core: c, api: api}
	q.send = q.sender.newBatcher(cfg.Linger)
	q.del = newBatcher(c.clk, cfg.BatchSize, cfg.Concurrency, cfg.Linger, 0, nil, func(ctx context.Context, batch []string) []error {
		return settle(ctx, c, OpDelete, batch, q.deleteCall)
	})
	q.vis = newBatcher(c.clk, cfg.BatchSize, cfg.Concurrency, cfg.Linger, 0, nil, func(ctx context.Context, batch []visEntry) []error {
		return settle(ctx, c, OpChangeVisibility, batch, q.visibilityCall)
	})
	return q, nil
}

// Close stops the queue's batch calls: it waits for those in flight and
// makes later calls fail with ErrClosed. When ctx ends first, it cancels
// the calls left (their entries fail with ctx's cause) and returns ctx's
// error once they have returned.
func (q *Queue) Close(ctx context.Context) error {
	// The three fail alike, for the same ctx: report one.
	return q.prefixed(cmp.Or(q.send.close(ctx), q.del.close(ctx), q.vis.close(ctx)))
}

// Receive long-polls for up to req.Max messages (see pipeline.Receiver),
// asking for their receive count, sent time and attributes.
func (q *Queue) Receive(ctx context.Context, req pipeline.ReceiveRequest) ([]pipeline.Message, error) {
	if req.Max < 1 || req.Max > pipeline.MaxReceive {
		return nil, fmt.Errorf("%s: receive: max %d must be within 1..%d", q.prefix, req.Max, pipeline.MaxReceive)
	}
	start := q.clk.Now()
	out, err := q.api.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl:            aws.String(q.cfg.URL),
		MaxNumberOfMessages: int32(req.Max),
		WaitTimeSeconds:     int32(min(req.Wait, 20*time.Second) / time.Second),
		VisibilityTimeout:   int32(min(req.Visibility, maxVisibility) / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{
			types.MessageSystemAttributeNameApproximateReceiveCount,
			types.MessageSystemAttributeNameSentTimestamp,
		},
		MessageAttributeNames: []string{"All"},
	}, oneAttempt)
	if err != nil {
		q.observe(Call{Op: OpReceive, Attempt: 1, Err: err, Duration: q.clk.Since(start)})
		if cause := context.Cause(ctx); cause != nil {
			return nil, fmt.Errorf("%s: receive: %w", q.prefix, cause)
		}
		return nil, fmt.Errorf("%s: receive: %w", q.prefix, err)
	}
	q.observe(Call{Op: OpReceive, Attempt: 1, Entries: len(out.Messages), Duration: q.clk.Since(start)})
	msgs := make([]pipeline.Message, len(out.Messages))
	for i, m := range out.Messages {
		msgs[i] = toMessage(m)
	}
	return msgs, nil
}

func toMessage(sm types.Message) pipeline.Message {
	m := pipeline.Message{ID: aws.ToString(sm.MessageId), ReceiptHandle: aws.ToString(sm.ReceiptHandle), Body: []byte(aws.ToString(sm.Body)), ReceiveCount: 1}
	if v, err := strconv.Atoi(sm.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil && v > 0 {
		m.ReceiveCount = v
	}
	if v, err := strconv.ParseInt(sm.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil && v > 0 {
		m.SentAt = time.UnixMilli(v).UTC()
	}
	for k, a := range sm.MessageAttributes {
		if a.StringValue == nil {
			continue // binary attributes: chatguard sends none
		}
		if m.Attributes == nil {
			m.Attributes = make(map[string]pipeline.Attribute, len(sm.MessageAttributes))
		}
		// SQS allows a custom suffix: "Number.int".
		typ, _, _ := strings.Cut(aws.ToString(a.DataType), ".")
		m.Attributes[k] = pipeline.Attribute{Type: pipeline.AttributeType(typ), Value: *a.StringValue}
	}
	return m
}

// Send sends msgs (see pipeline.Sender and the package's retry rule). A
// message over MaxMessageBytes fails with ErrTooLarge and is not sent.
// Cancelling ctx ends the wait, not the calls already queued.
func (q *Queue) Send(ctx context.Context, msgs []pipeline.OutMessage) error {
	return q.sender.sendAll(ctx, q.send, msgs)
}

// NewStream returns a Stream of messages to this queue; see Stream.
func (q *Queue) NewStream(cfg StreamConfig, onResult func(error)) *Stream {
	return q.sender.newStream(cfg, onResult)
}

// Delete deletes the messages of receipts (see pipeline.Acker and the
// package's retry rule). Cancelling ctx ends the wait, not the calls
// already queued.
func (q *Queue) Delete(ctx context.Context, receipts []string) error {
	return q.prefixed(runAll(ctx, q.del, receipts))
}

// ChangeVisibility hides the messages of receipts for visibility, rounded
// up to whole seconds (see pipeline.Acker and the package's retry rule).
func (q *Queue) ChangeVisibility(ctx context.Context, receipts []string, visibility time.Duration) error {
	secs := visibilitySeconds(visibility)
	entries := make([]visEntry, len(receipts))
	for i, r := range receipts {
		entries[i] = visEntry{receipt: r, secs: secs}
	}
	return q.prefixed(runAll(ctx, q.vis, entries))
}

// prefixed names the queue in an error that is not an entry's own.
func (c *core) prefixed(err error) error {
	var be *pipeline.BatchError
	if err == nil || errors.As(err, &be) {
		return err
	}
	return fmt.Errorf("%s: %w", c.prefix, err)
}

func (q *Queue) deleteCall(ctx context.Context, batch []string) ([]*EntryError, error) {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(batch))
	for i, r := range batch {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: ids[i], ReceiptHandle: aws.String(r)}
	}
	out, err := q.api.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.cfg.URL), Entries: entries}, oneAttempt)
	if err != nil {
		return nil, err
	}
	ok := make([]string, len(out.Successful))
	for i, s := range out.Successful {
		ok[i] = aws.ToString(s.Id)
	}
	return results(len(batch), ok, out.Failed), nil
}

func (q *Queue) visibilityCall(ctx context.Context, batch []visEntry) ([]*EntryError, error) {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(batch))
	for i, e := range batch {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: ids[i], ReceiptHandle: aws.String(e.receipt), VisibilityTimeout: e.secs}
	}
	out, err := q.api.ChangeMessageVisibilityBatch(ctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.cfg.URL), Entries: entries}, oneAttempt)
	if err != nil {
		return nil, err
	}
	ok := make([]string, len(out.Successful))
	for i, s := range out.Successful {
		ok[i] = aws.ToString(s.Id)
	}
	return results(len(batch), ok, out.Failed), nil
}
