package main

import (
	"context"
	"errors"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/outbox"
	"github.com/chatguard/chatguard/pipeline/protect"
	"github.com/chatguard/chatguard/storage/sqs"
)

// outboxFlags binds the outbox relay's settings (outbox.Config).
func outboxFlags(fs *cli.FlagSet, c *outbox.Config) {
	fs.IntVar(&c.Batch, "outbox-batch", "outbox rows one claim takes, sent in SQS batches of ten")
	fs.DurationVar(&c.Poll, "outbox-poll", "wait after a claim that found no outbox row due")
	fs.DurationVar(&c.Lease, "outbox-lease", "how long a claimed outbox row is kept from other pods' relays; at least twice --outbox-send-timeout")
	fs.DurationVar(&c.SendTimeout, "outbox-send-timeout", "bound of one batch's send to SQS, retries included")
	fs.DurationVar(&c.RetryBase, "outbox-retry-base", "backoff of an outbox row after its first failed send, doubling")
	fs.DurationVar(&c.RetryMax, "outbox-retry-max", "cap of an outbox row's backoff; a message SQS refuses waits this long each time")
	fs.DurationVar(&c.Retention, "outbox-retention", "how long sent outbox rows are kept before they are deleted")
	fs.DurationVar(&c.Drain, "outbox-drain-timeout", "on SIGTERM, after the job loop's drain, how long the relay may send what is due")
}

// relayService is the outbox relay: it sends the lake events and the
// protective actions (with --actions-queue-url) the verdicts' saves wrote
// to the outbox (every pod's relay shares the table). It starts after MySQL and stops after the job loop, so that the
// verdicts of the loop's last jobs leave with this pod when they can.
func (w *worker) relayService() lifecycle.Service {
	var (
		q     *sqs.Queue
		relay *outbox.Relay
	)
	return lifecycle.Service{
		Name: "outbox relay",
		Start: func(context.Context) (err error) {
			if q, err = sqs.New(w.sqs, w.cfg.Events.Config); err != nil {
				return err
			}
			senders := map[pipeline.OutboxDestination]pipeline.Sender{pipeline.OutboxFeedback: q}
			if err := w.actionSenders(senders); err != nil {
				return err
			}
			relay, err = outbox.New(w.cfg.Outbox, w.store, senders, clock.Real(), outbox.NewMetrics(w.reg), w.log)
			if err == nil && senders[pipeline.OutboxActions] != nil {
				// Each published action's lake event, for protection
				// latency in the lake.
				relay.FollowUp(pipeline.OutboxActions, protect.PublishedEvents)
			}
			return err
		},
		Run:   func(ctx context.Context) error { return relay.Run(ctx) },
		Stop:  func(ctx context.Context) error { return errors.Join(q.Close(ctx), w.closeActions(ctx)) },
		Drain: w.cfg.Outbox.Drain,
		Grace: outbox.StoreTimeout + lifecycle.Grace,
	}
}
