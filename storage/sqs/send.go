package sqs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/chatguard/chatguard/pipeline"
)

// sender is the one batched sender: Queue.Send, streams and the
// publishers all send through it.
type sender struct {
	*core
	api SendAPI
}

func (s *sender) newBatcher(linger time.Duration) *batcher[pipeline.OutMessage] {
	return newBatcher(s.clk, s.cfg.BatchSize, s.cfg.Concurrency, linger, MaxMessageBytes, messageBytes, func(ctx context.Context, batch []pipeline.OutMessage) []error {
		return settle(ctx, s.core, OpSend, batch, s.call)
	})
}

// messageBytes is what a message counts against SQS's size limits: its
// body and its attributes' names, types and values.
func messageBytes(m pipeline.OutMessage) int {
	n := len(m.Body)
	for k, a := range m.Attributes {
		n += len(k) + len(a.Type) + len(a.Value)
	}
	return n
}

func (s *sender) tooLarge(m pipeline.OutMessage) error {
	if n := messageBytes(m); n > MaxMessageBytes {
		return pipeline.Permanent(fmt.Errorf("%s: send: %d bytes: %w", s.prefix, n, ErrTooLarge))
	}
	return nil
}

// sendAll sends msgs as one group through b; see Queue.Send. Each message
// carries the trace context of ctx's span (pipeline.WithTraceContext).
func (s *sender) sendAll(ctx context.Context, b *batcher[pipeline.OutMessage], msgs []pipeline.OutMessage) error {
	errs := make([]error, len(msgs))
	ok := make([]pipeline.OutMessage, 0, len(msgs))
	idx := make([]int, 0, len(msgs))
	for i, m := range msgs {
		m.Attributes = pipeline.WithTraceContext(ctx, m.Attributes)
		if errs[i] = s.tooLarge(m); errs[i] == nil {
			ok = append(ok, m)
			idx = append(idx, i)
		}
	}
	err := runAll(ctx, b, ok)
	var be *pipeline.BatchError
	switch {
	case err == nil:
	case errors.As(err, &be):
		for j, e := range be.Errs {
			errs[idx[j]] = e
		}
	default:
		return s.prefixed(err)
	}
	return batchError(errs)
}

func (s *sender) call(ctx context.Context, batch []pipeline.OutMessage) ([]*EntryError, error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(batch))
	for i, m := range batch {
		entries[i] = types.SendMessageBatchRequestEntry{Id: ids[i], MessageBody: aws.String(string(m.Body))}
		if len(m.Attributes) > 0 {
			attrs := make(map[string]types.MessageAttributeValue, len(m.Attributes))
			for k, a := range m.Attributes {
				attrs[k] = types.MessageAttributeValue{DataType: aws.String(string(a.Type)), StringValue: aws.String(a.Value)}
			}
			entries[i].MessageAttributes = attrs
		}
	}
	out, err := s.api.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(s.cfg.URL), Entries: entries}, oneAttempt)
	if err != nil {
		return nil, err
	}
	ok := make([]string, len(out.Successful))
	for i, e := range out.Successful {
		ok[i] = aws.ToString(e.Id)
	}
	return results(len(batch), ok, out.Failed), nil
}

// StreamConfig tunes a Stream.
type StreamConfig struct {
	// FlushAge is the longest a message waits for its batch to fill;
	// zero waits until the batch is full or the stream closes, so that
	// every call but the last carries a full batch.
	FlushAge time.Duration
}

// Stream sends messages handed over one at a time, in batch calls of the
// queue's batch size (and at most MaxMessageBytes), with the queue's
// concurrency and retry rule. It reports each message's final result to
// the callback given to NewStream. Create one with Queue.NewStream or a
// publisher; Put from any goroutine; Close once.
type Stream struct {
	s *sender
	b *batcher[pipeline.OutMessage]
	w *waiter
}

func (s *sender) newStream(cfg StreamConfig, onResult func(error)) *Stream {
	linger := cfg.FlushAge
	if linger <= 0 {
		linger = untilFull
	}
	if onResult == nil {
		onResult = func(error) {}
	}
	return &Stream{s: s, b: s.newBatcher(linger), w: &waiter{each: onResult}}
}

// Put hands m to the stream. It blocks while every call slot is taken and
// the next batch is full (backpressure). It returns an error, and m is not
// sent, when m is over MaxMessageBytes (ErrTooLarge), ctx ends first, or
// the stream is closed; otherwise the callback is told m's result later,
// once.
func (st *Stream) Put(ctx context.Context, m pipeline.OutMessage) error {
	m.Attributes = pipeline.WithTraceContext(ctx, m.Attributes)
	if err := st.s.tooLarge(m); err != nil {
		return err
	}
	return st.s.prefixed(st.b.put(ctx, []item[pipeline.OutMessage]{{e: m, w: st.w}}))
}

// Close sends what the stream holds and waits until every message's
// result is known. When ctx ends first, the messages not yet sent fail
// with ctx's cause (calls in flight are cancelled) and Close returns ctx's
// error once every result is known.
func (st *Stream) Close(ctx context.Context) error { return st.s.prefixed(st.b.close(ctx)) }
