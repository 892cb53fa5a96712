// Package chatreplay stands in for the chat service when real time is on:
// it replays a sample lake's conversations as if they were happening now,
// serving each message through the chat API stand-in from the moment it is
// "sent" and then publishing its metadata-only chat event to the
// chat-events queue, as the chat service would (store the message, then
// announce it). A replayed message's sent_at is its replay time, so
// freshness measured downstream is wall time.
package chatreplay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Arrival is one message as the replay releases it.
type Arrival struct {
	RoomID string
	// At is when the replay releases it (wall time).
	At time.Time
	// Message is the lake's message with SentAt moved to its replay time
	// (or skewed: see Skew).
	Message pipeline.ChatMessage
	// LakeSentAt is its sent_at in the lake.
	LakeSentAt time.Time
	// Repeat marks a duplicate delivery: only its event is published (see
	// Duplicate).
	Repeat bool
	// Unannounced: the message is stored but its event is not published
	// here; a Repeat later publishes it (see Late).
	Unannounced bool
}

// Plan maps the messages of rooms sent in [from, to) onto wall time from
// start, speedup times faster than they happened (1 replays in real time),
// in release order: by replay time, then room and message id.
func Plan(rooms map[string][]pipeline.ChatMessage, from, to, start time.Time, speedup float64) ([]Arrival, error) {
	if !(speedup > 0) {
		return nil, fmt.Errorf("chatreplay: speed-up %v must be positive", speedup)
	}
	if !from.Before(to) {
		return nil, fmt.Errorf("chatreplay: window %s..%s is empty", from, to)
	}
	var out []Arrival
	for room, msgs := range rooms {
		for _, m := range msgs {
			if m.SentAt.Before(from) || !m.SentAt.Before(to) {
				continue
			}
			a := Arrival{RoomID: room, Message: m, LakeSentAt: m.SentAt}
			a.Message.SentAt = start.Add(time.Duration(float64(m.SentAt.Sub(from)) / speedup)).UTC()
			a.At = a.Message.SentAt
			out = append(out, a)
		}
	}
	sortPlan(out)
	return out, nil
}

// sortPlan orders arrivals by release time, then room and message id.
func sortPlan(p []Arrival) {
	slices.SortStableFunc(p, func(a, b Arrival) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.RoomID, b.RoomID), cmp.Compare(a.Message.MessageID, b.Message.MessageID))
	})
}

// Event is the chat event the chat service publishes for a.
func (a Arrival) Event() pipeline.ChatEvent {
	return pipeline.ChatEvent{SchemaVersion: pipeline.ChatEventSchemaVersion, RoomID: a.RoomID, MessageID: a.Message.MessageID,
		SenderID: a.Message.SenderID, SenderRole: string(a.Message.SenderRole), Kind: string(a.Message.Kind), SentAt: a.Message.SentAt}
}

// Store is where a released message becomes readable: the chat API
// stand-in (*chatapi.Server).
type Store interface {
	Add(roomID string, msgs ...pipeline.ChatMessage)
}

// Publisher sends chat-event bodies.
type Publisher interface {
	Publish(ctx context.Context, events []pipeline.ChatEvent) error
}

// Stats counts what a replay did.
type Stats struct {
	Messages int // released into the Store
	Events   int // chat events accepted by the Publisher
}

// Replayer releases a plan on a clock.
type Replayer struct {
	Store     Store
	Publisher Publisher
	Clock     clock.Clock
	// Duplicates publishes every event this many times more (0: once), to
	// replay an at-least-once producer.
	Duplicates int
}

// Run releases each arrival when the clock reaches its replay time: every
// arrival due at once is added to the Store, then published. It returns
// when the plan is done, with ctx's cause when ctx ends first, or with the
// Publisher's error (the arrivals before it were published).
func (r *Replayer) Run(ctx context.Context, plan []Arrival) (Stats, error) {
	clk := clock.Or(r.Clock)
	var st Stats
	for i := 0; i < len(plan); {
		if err := clock.Sleep(ctx, clk, plan[i].At.Sub(clk.Now())); err != nil {
			return st, err
		}
		now := clk.Now()
		j := i
		var events []pipeline.ChatEvent
		for ; j < len(plan) && !plan[j].At.After(now); j++ {
			if !plan[j].Repeat {
				r.Store.Add(plan[j].RoomID, plan[j].Message)
				st.Messages++
			}
			for range r.Duplicates + 1 {
				if !plan[j].Unannounced {
					events = append(events, plan[j].Event())
				}
			}
		}
		if err := r.Publisher.Publish(ctx, events); err != nil {
			return st, err
		}
		st.Events += len(events)
		i = j
	}
	return st, nil
}

// SQSPublisher publishes chat events to an SQS queue in batches of ten.
type SQSPublisher struct {
	API      sqs.SendAPI
	QueueURL string
}

// Publish sends events; a failed call or entry is an error naming it.
func (p SQSPublisher) Publish(ctx context.Context, events []pipeline.ChatEvent) error {
	for chunk := range slices.Chunk(events, 10) {
		in := &awssqs.SendMessageBatchInput{QueueUrl: aws.String(p.QueueURL)}
		for i, ev := range chunk {
			if err := ev.Validate(); err != nil {
				return fmt.Errorf("chatreplay: %w", err)
			}
			body, err := json.Marshal(ev)
			if err != nil {
				return fmt.Errorf("chatreplay: encode: %w", err)
			}
			in.Entries = append(in.Entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(body))})
		}
		out, err := p.API.SendMessageBatch(ctx, in)
		if err != nil {
			return fmt.Errorf("chatreplay: send: %w", err)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return errors.New("chatreplay: send: " + aws.ToString(f.Code) + ": " + aws.ToString(f.Message))
		}
	}
	return nil
}
