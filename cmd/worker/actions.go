package main

import (
	"context"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/policy"
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
	w.retractPolicy(pol)
	return protect.New(pol, w.store, clock.Real(), w.actionMetrics(), w.log), nil
}

// retraction bounds the policy's retraction step at start: what is left
// past the limit is finished by the next start (the hash is recorded only
// once nothing is left).
var retraction = moderation.Retraction{Limit: 1000, Lookback: 30 * 24 * time.Hour, TTL: 7 * 24 * time.Hour}

// retractPolicy reverses, once per policy file, the live actions of the
// rules (and rule actions) the file no longer keeps `on`
// (moderation.RetractPolicy). A failure is logged: the worker serves, and
// the next start tries again.
func (w *worker) retractPolicy(pol *policy.Policy) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := moderation.RetractPolicy(ctx, w.store, policyView(pol), retraction, clock.Real().Now().UTC())
	w.actionMetrics().Retracted(res.Retracted)
	if err != nil {
		w.log.Error("worker: the policy's retraction of removed rules failed; the next start tries again", "retracted", res.Retracted, "err", err)
		return
	}
	if !res.Skipped {
		w.log.Info("worker: policy applied", "policy_version", pol.Version, "retracted", res.Retracted, "more", res.More)
	}
}

// policyView is what the retraction reads of a policy.
func policyView(pol *policy.Policy) moderation.PolicyView {
	v := moderation.PolicyView{Version: pol.Version, Hash: pol.Hash}
	for _, r := range pol.Rules {
		for _, a := range r.Actions {
			if a.Mode == pipeline.ModeOn {
				v.On = append(v.On, moderation.RuleAction{Rule: r.ID, Action: a.Action})
			}
		}
	}
	return v
}
