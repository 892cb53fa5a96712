package sqs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/pipeline"
)

// The message attributes every review message carries, so that consumers
// and operators can route or inspect a message without parsing its body.
const (
	AttrRunID         = "run_id"
	AttrSchemaVersion = "schema_version"
)

// DefaultReviewConfig returns the defaults the batch command starts from:
// eight calls in flight and six sends of a message at most; URL must
// still be set.
func DefaultReviewConfig() Config {
	c := DefaultConfig()
	c.Name = "review"
	c.Concurrency = 8
	c.Retry = retry.Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second, Attempts: 6}
	c.CallTimeout = 30 * time.Second
	return c
}

// ReviewStats is a snapshot of a ReviewPublisher's counters.
type ReviewStats = pipeline.PublishStats

// maxReasons bounds how many distinct failure reasons a run keeps for its
// final error, so that a million failures do not become a million strings.
const maxReasons = 5

// ReviewPublisher publishes review events to the review queue, one message
// per event with the run_id and schema_version attributes, in full batches
// (only the last call of a run carries fewer than the batch size). One
// ReviewPublisher serves one Run at a time; Stats may be read concurrently
// while it runs.
type ReviewPublisher struct {
	s *sender

	published, failed, calls, retried atomic.Int64

	mu     sync.Mutex
	reason []string
}

var _ pipeline.ReviewPublisher = (*ReviewPublisher)(nil)

// NewReviewPublisher returns a publisher over api, or the configuration's
// problems. Start cfg from DefaultReviewConfig.
func NewReviewPublisher(api SendAPI, cfg Config, opts ...Option) (*ReviewPublisher, error) {
	p := &ReviewPublisher{}
	next := cfg.OnCall
	cfg.OnCall = func(c Call) {
		p.calls.Add(1)
		if c.Attempt > 1 {
			p.retried.Add(int64(c.Entries))
		}
		if next != nil {
			next(c)
		}
	}
	c, err := newCore(cfg, opts)
	if err != nil {
		return nil, err
	}
	p.s = &sender{core: c, api: api}
	return p, nil
}

// Stats returns the counters so far.
func (p *ReviewPublisher) Stats() ReviewStats {
	return ReviewStats{Published: p.published.Load(), Failed: p.failed.Load(), Calls: p.calls.Load(), Retried: p.retried.Load()}
}

// Run publishes every event from in until in is closed, stamping each with
// its PublishedAt time, and waits for every call. It fails when any message
// was not published, with the count and the first few reasons; the other
// messages are still sent. When ctx ends, Run stops reading in, gives up on
// unsent messages (counted as failed, calls in flight are cancelled) and
// returns ctx's cause.
func (p *ReviewPublisher) Run(ctx context.Context, in <-chan pipeline.ReviewEvent) error {
	st := p.s.newStream(StreamConfig{}, func(err error) {
		if err != nil {
			p.fail(err)
			return
		}
		p.published.Add(1)
	})
	var cause error
loop:
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				break loop
			}
			m, err := p.message(ev)
			if err == nil {
				// Each review event starts a trace of its own (sampled at
				// the root ratio), which its message carries to the worker.
				sctx, span := startPublishSpan(ctx, ev)
				err = st.Put(sctx, m)
				span.End()
			}
			if err != nil {
				p.fail(err)
			}
		case <-ctx.Done():
			break loop
		}
	}
	closeCtx := context.Background()
	if cause = context.Cause(ctx); cause != nil {
		closeCtx = ctx // gives up on what is left at once
	}
	_ = st.Close(closeCtx)
	if cause != nil {
		return fmt.Errorf("%s: cancelled: %w", p.s.prefix, cause)
	}
	st2 := p.Stats()
	if st2.Failed > 0 {
		p.mu.Lock()
		reasons := strings.Join(p.reason, "; ")
		p.mu.Unlock()
		return fmt.Errorf("%s: %d of %d messages not published: %s", p.s.prefix, st2.Failed, st2.Failed+st2.Published, reasons)
	}
	return nil
}

func (p *ReviewPublisher) message(ev pipeline.ReviewEvent) (pipeline.OutMessage, error) {
	ev.PublishedAt = p.s.clk.Now().UTC()
	if err := ev.Validate(); err != nil {
		return pipeline.OutMessage{}, fmt.Errorf("room %q: %w", ev.RoomID, err)
	}
	body, err := ev.Encode()
	if err != nil {
		return pipeline.OutMessage{}, err
	}
	return pipeline.OutMessage{Body: body, Attributes: map[string]pipeline.Attribute{
		AttrRunID:         pipeline.StringAttribute(ev.RunID),
		AttrSchemaVersion: pipeline.NumberAttribute(int64(ev.SchemaVersion)),
	}}, nil
}

func (p *ReviewPublisher) fail(err error) {
	p.failed.Add(1)
	// The run's error names the queue once.
	msg := strings.TrimPrefix(err.Error(), p.s.prefix+": ")
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.reason) >= maxReasons {
		return
	}
	for _, r := range p.reason {
		if r == msg {
			return
		}
	}
	p.reason = append(p.reason, msg)
}
