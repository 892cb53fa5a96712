package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/policy"
	"github.com/chatguard/chatguard/pipeline/protect"
	"github.com/chatguard/chatguard/storage/sqs"
)

// ActionsConfig is the protective actions' (docs/actions.md): the policy
// file and the queue the outbox's relay publishes `on` actions to.
// Without a queue URL the worker decides no actions at all, so that a
// deployment without the chat service's consumer writes none that would
// wait in the outbox for ever.
type ActionsConfig struct {
	// Queue: --actions-queue-url.
	Queue sqs.Config
	// Policy: --actions-policy, a JSON policy file; empty is the shipped
	// default (every action in dry run but escalate).
	Policy string
}

func defaultActions() ActionsConfig {
	q := sqs.DefaultConfig()
	q.Name = "actions"
	return ActionsConfig{Queue: q}
}

func (c *Config) actionsFlags(fs *cli.FlagSet) {
	fs.StringVar(&c.Actions.Queue.URL, "actions-queue-url", "SQS actions queue URL: protective actions decided by the policy are written with each verdict and published there; empty: no actions are decided")
	fs.StringVar(&c.Actions.Policy, "actions-policy", "protective-action policy file (JSON, docs/actions.md); empty: the shipped default, dry run for everything but escalate")
}

// validateActions loads the policy when actions are on, so that a policy
// with problems stops the worker at start with every problem listed.
func (c Config) validateActions() error {
	if c.Actions.Queue.URL == "" {
		if c.Actions.Policy != "" {
			return errors.New("--actions-policy needs --actions-queue-url")
		}
		return nil
	}
	_, err := policy.Load(c.Actions.Policy)
	return errors.Join(err, c.Actions.Queue.Validate())
}

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
	if w.cfg.Actions.Queue.URL == "" {
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
	if w.cfg.Actions.Queue.URL == "" {
		return nil, nil
	}
	pol, err := policy.Load(w.cfg.Actions.Policy)
	if err != nil {
		return nil, err
	}
	w.log.Info("worker: protective actions on", "policy_version", pol.Version, "policy_hash", pol.Hash)
	return protect.New(pol, w.store, clock.Real(), w.actionMetrics(), w.log), nil
}
