package main

import (
	"context"
	"fmt"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/protect"
	"github.com/chatguard/chatguard/storage/sqs"
)

// actionMetrics are the protective actions' series, registered once.
func (w *worker) actionMetrics() *protect.Metrics {
	if w.actMetrics == nil {
		w.actMetrics = protect.NewMetrics(w.reg)
	}
	return w.actMetrics
}

// actionSenders adds the actions queue to the relay's senders when
// actions are on; the queue it opened is closed by closeActions.
func (w *worker) actionSenders(senders map[pipeline.OutboxDestination]pipeline.Sender) error {
	if !w.cfg.Actions.On() {
		return nil
	}
	q, err := sqs.New(w.sqs, w.cfg.Actions.Queue)
	if err != nil {
		return fmt.Errorf("actions queue: %w", err)
	}
	w.actionsQueue = q
	senders[pipeline.OutboxActions] = protect.NewLatencySender(q, clock.Real(), w.actionMetrics())
	return nil
}

func (w *worker) closeActions(ctx context.Context) error {
	if w.actionsQueue == nil {
		return nil
	}
	return w.actionsQueue.Close(ctx)
}

// actionPlanner is the review handler's action step, nil when actions
// are off.
func (w *worker) actionPlanner() (*protect.Planner, error) {
	pol, err := w.cfg.Actions.Load()
	if err != nil || pol == nil {
		return nil, err
	}
	w.log.Info("worker: protective actions on", "policy_version", pol.Version, "policy_hash", pol.Hash)
	return protect.New(pol, w.store, clock.Real(), w.actionMetrics(), w.log), nil
}
