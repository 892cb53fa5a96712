package depflags

import (
	"errors"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline/policy"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Actions is the protective actions' configuration (docs/actions.md),
// embedded by the worker and the console alike: the policy file and the
// `actions` queue. Without a queue URL no actions are decided at all, so
// that a deployment without the chat service's consumer writes none that
// would wait in the outbox for ever. The worker's outbox relay publishes
// what either binary writes.
type Actions struct {
	// Queue: --actions-queue-url.
	Queue sqs.Config
	// Policy: --actions-policy, a JSON policy file; empty is the shipped
	// default (every action in dry run but escalate).
	Policy string
}

// DefaultActions returns the defaults: off, the shipped policy.
func DefaultActions() Actions {
	q := sqs.DefaultConfig()
	q.Name = "actions"
	return Actions{Queue: q}
}

// Flags declares --actions-queue-url and --actions-policy.
func (a *Actions) Flags(fs *cli.FlagSet) {
	fs.StringVar(&a.Queue.URL, "actions-queue-url", "SQS actions queue URL: protective actions decided by the policy are written with each verdict and published there; empty: no actions are decided")
	fs.StringVar(&a.Policy, "actions-policy", "protective-action policy file (JSON, docs/actions.md); empty: the shipped default, dry run for everything but escalate")
}

// On reports whether actions are decided (a queue URL is set).
func (a Actions) On() bool { return a.Queue.URL != "" }

// Validate loads the policy when actions are on, so that a policy with
// problems stops the binary at start with every problem listed.
func (a Actions) Validate() error {
	if !a.On() {
		if a.Policy != "" {
			return errors.New("--actions-policy needs --actions-queue-url")
		}
		return nil
	}
	_, err := policy.Load(a.Policy)
	return errors.Join(err, a.Queue.Validate())
}

// Load returns the policy when actions are on, nil when they are off.
func (a Actions) Load() (*policy.Policy, error) {
	if !a.On() {
		return nil, nil
	}
	return policy.Load(a.Policy)
}
