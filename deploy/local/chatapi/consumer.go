package chatapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// DLQ message attributes of a rejected action, the names chatguard's own
// dead letters carry.
const (
	AttrErrorReason     = "chatguard_error_reason"
	AttrSourceMessageID = "chatguard_source_message_id"
)

// Consumer applies the actions queue to a Server: it long-polls, applies
// each delivery, deletes what was applied (or was a duplicate), and copies
// a rejected action to the DLQ with its reason before deleting it. A
// delivery it could not record (the journal failed) is left to come back.
type Consumer struct {
	Server *Server
	Inbox  pipeline.Inbox
	DLQ    pipeline.Sender
	// Clock paces the retries after a failed receive (nil: the wall clock).
	Clock clock.Clock
	Log   *slog.Logger
	// Wait is the long poll (default 10 s); Visibility hides a delivery
	// while it is applied (default 30 s).
	Wait, Visibility time.Duration
}

// Run consumes until ctx ends; it returns nil then. A Consumer is not
// safe for concurrent Runs.
func (c *Consumer) Run(ctx context.Context) error {
	if c.Server == nil || c.Inbox == nil || c.DLQ == nil {
		return errors.New("chatapi: consumer needs a server, the actions queue and its DLQ")
	}
	clk, log := clock.Or(c.Clock), c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	wait, vis := c.Wait, c.Visibility
	if wait <= 0 {
		wait = 10 * time.Second
	}
	if vis <= 0 {
		vis = 30 * time.Second
	}
	failures := 0
	for ctx.Err() == nil {
		msgs, err := c.Inbox.Receive(ctx, pipeline.ReceiveRequest{Max: pipeline.MaxReceive, Wait: wait, Visibility: vis})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			failures++
			log.Warn("chatapi: actions receive failed", "err", err)
			_ = clock.Sleep(ctx, clk, min(time.Duration(failures)*200*time.Millisecond, 5*time.Second))
			continue
		}
		failures = 0
		c.settle(ctx, log, msgs)
	}
	return nil
}

// settle applies one batch and acknowledges it.
func (c *Consumer) settle(ctx context.Context, log *slog.Logger, msgs []pipeline.Message) {
	var done []string
	for _, m := range msgs {
		out, err := c.Server.Apply(m.Body)
		var rej *RejectError
		switch {
		case errors.As(err, &rej):
			attrs := map[string]pipeline.Attribute{
				AttrErrorReason:     pipeline.StringAttribute(rej.Reason),
				AttrSourceMessageID: pipeline.StringAttribute(m.ID),
			}
			if err := c.DLQ.Send(ctx, []pipeline.OutMessage{{Body: m.Body, Attributes: attrs}}); err != nil {
				log.Warn("chatapi: dead-lettering an action failed; it comes back", "message_id", m.ID, "err", err)
				continue
			}
			log.Warn("chatapi: action rejected and dead-lettered", "message_id", m.ID, "reason", rej.Reason)
		case err != nil:
			log.Warn("chatapi: action not recorded; it comes back", "message_id", m.ID, "err", err)
			continue
		default:
			log.Debug("chatapi: action", "message_id", m.ID, "outcome", string(out))
		}
		done = append(done, m.ReceiptHandle)
	}
	if len(done) == 0 {
		return
	}
	if err := c.Inbox.Delete(ctx, done); err != nil {
		// Applied and recorded: a redelivery is a duplicate.
		log.Warn("chatapi: deleting actions failed; they come back as duplicates", "actions", len(done), "err", fmt.Sprint(err))
	}
}
