// Package sqsevents publishes lake events (inference logs, verdicts) to the
// SQS feedback queue off the hot path: Publish drops into a bounded buffer
// and returns at once, a background loop sends batches of up to ten with
// SendMessageBatch, and a full buffer drops the event and counts the drop
// instead of slowing a review down.
package sqsevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.EventSink = (*Publisher)(nil)

// API is the part of the SQS client the publisher uses.
type API interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// Config configures a Publisher.
type Config struct {
	QueueURL string
	// Buffer bounds events waiting to be sent.
	Buffer int
	// FlushAge is the longest an event waits for a batch to fill.
	FlushAge time.Duration
	// Senders bounds concurrent SendMessageBatch calls.
	Senders int
	// CallTimeout bounds one SendMessageBatch call.
	CallTimeout time.Duration
	// MaxAttempts bounds sends of one entry (failed entries are retried).
	MaxAttempts int
}

// DefaultConfig returns the defaults; QueueURL must still be set.
func DefaultConfig() Config {
	return Config{Buffer: 10000, FlushAge: 200 * time.Millisecond, Senders: 4, CallTimeout: 5 * time.Second, MaxAttempts: 3}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.QueueURL == "" {
		errs = append(errs, errors.New("feedback queue url is required"))
	}
	if c.Buffer < 1 {
		errs = append(errs, errors.New("event buffer must be at least 1"))
	}
	if c.FlushAge <= 0 {
		errs = append(errs, errors.New("event flush age must be positive"))
	}
	if c.Senders < 1 {
		errs = append(errs, errors.New("event senders must be at least 1"))
	}
	if c.CallTimeout <= 0 {
		errs = append(errs, errors.New("event call timeout must be positive"))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, errors.New("event max attempts must be at least 1"))
	}
	return errors.Join(errs...)
}

// maxBatchBytes keeps a batch under SQS's 256 KiB request payload limit,
// which also bounds a single message.
const maxBatchBytes = 256 * 1024

// Publisher is an asynchronous pipeline.EventSink. Start it once, Stop it
// once; Publish is safe from any goroutine at any time (after Stop it drops).
type Publisher struct {
	cfg  Config
	api  API
	ch   chan pipeline.LakeEvent
	done chan struct{}

	mu     sync.RWMutex
	closed bool

	published prometheus.Counter
	dropped   *prometheus.CounterVec
	calls     *prometheus.CounterVec
}

// New returns a publisher; reg may be nil.
func New(cfg Config, api API, reg prometheus.Registerer) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sqsevents: %w", err)
	}
	p := &Publisher{
		cfg: cfg, api: api, ch: make(chan pipeline.LakeEvent, cfg.Buffer), done: make(chan struct{}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_worker_events_published_total", Help: "Lake events accepted by the feedback queue.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_worker_events_dropped_total",
			Help: "Lake events dropped by reason (buffer_full, stopped, too_large, encode, rejected, send_failed).",
		}, []string{"reason"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_worker_events_sqs_calls_total", Help: "SendMessageBatch calls by outcome (ok, partial, error).",
		}, []string{"outcome"}),
	}
	if reg != nil {
		depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chatguard_worker_events_buffered", Help: "Lake events waiting to be sent.",
		}, func() float64 { return float64(len(p.ch)) })
		for _, c := range []prometheus.Collector{p.published, p.dropped, p.calls, depth} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("sqsevents: metrics: %w", err)
			}
		}
	}
	return p, nil
}

// Start starts the sending loop; Stop ends it.
func (p *Publisher) Start() { go p.run() }

// Publish queues ev without blocking; it returns false (and counts the
// drop) when the buffer is full or the publisher is stopped.
func (p *Publisher) Publish(ev pipeline.LakeEvent) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.dropped.WithLabelValues("stopped").Inc()
		return false
	}
	select {
	case p.ch <- ev:
		return true
	default:
		p.dropped.WithLabelValues("buffer_full").Inc()
		return false
	}
}

// Stop stops accepting events and flushes what is buffered until ctx ends;
// events still unsent then are counted as dropped and ctx's error is
// returned. Stop must be called once, after Start.
func (p *Publisher) Stop(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.ch)
	}
	p.mu.Unlock()
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sqsevents: flush: %w", ctx.Err())
	}
}

type entry struct {
	body     string
	attempts int
}

func (p *Publisher) run() {
	defer close(p.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, p.cfg.Senders)
	send := func(batch []entry) {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			p.send(batch)
		}()
	}
	var (
		batch []entry
		size  int
		timer *time.Timer
		tc    <-chan time.Time
	)
	flush := func() {
		if len(batch) > 0 {
			send(batch)
		}
		batch, size = nil, 0
		if timer != nil {
			timer.Stop()
		}
		tc = nil
	}
	for {
		select {
		case ev, ok := <-p.ch:
			if !ok {
				flush()
				return
			}
			b, err := json.Marshal(ev)
			if err != nil {
				p.dropped.WithLabelValues("encode").Inc()
				continue
			}
			if len(b) > maxBatchBytes {
				p.dropped.WithLabelValues("too_large").Inc()
				continue
			}
			if size+len(b) > maxBatchBytes {
				flush()
			}
			batch = append(batch, entry{body: string(b)})
			size += len(b)
			if len(batch) == 1 {
				timer = time.NewTimer(p.cfg.FlushAge)
				tc = timer.C
			}
			if len(batch) == 10 {
				flush()
			}
		case <-tc:
			flush()
		}
	}
}

// send sends one batch, retrying failed entries with jittered backoff up to
// MaxAttempts, and counts what is finally lost.
func (p *Publisher) send(batch []entry) {
	for attempt := 1; len(batch) > 0; attempt++ {
		if attempt > 1 {
			time.Sleep(time.Duration(rand.Int64N(int64(50*time.Millisecond) << min(attempt, 5))))
		}
		entries := make([]types.SendMessageBatchRequestEntry, len(batch))
		for i, e := range batch {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(e.body)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CallTimeout)
		out, err := p.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(p.cfg.QueueURL), Entries: entries})
		cancel()
		var retry []entry
		if err != nil {
			p.calls.WithLabelValues("error").Inc()
			retry = batch
		} else {
			failed := map[string]bool{}
			for _, f := range out.Failed {
				if f.SenderFault {
					p.dropped.WithLabelValues("rejected").Inc()
					failed[aws.ToString(f.Id)] = false
				} else {
					failed[aws.ToString(f.Id)] = true
				}
			}
			if len(failed) == 0 {
				p.calls.WithLabelValues("ok").Inc()
			} else {
				p.calls.WithLabelValues("partial").Inc()
			}
			for i, e := range batch {
				again, bad := failed[strconv.Itoa(i)]
				switch {
				case !bad:
					p.published.Inc()
				case again:
					retry = append(retry, e)
				}
			}
		}
		batch = batch[:0:0]
		for _, e := range retry {
			e.attempts++
			if e.attempts >= p.cfg.MaxAttempts {
				p.dropped.WithLabelValues("send_failed").Inc()
				continue
			}
			batch = append(batch, e)
		}
	}
}
