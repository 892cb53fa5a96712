package protect

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/policy"
)

// Metrics are the protective actions' series. Their labels are small
// fixed sets: the actions, the modes and the outcomes; the rule appears
// only on the per-rule counter, whose set is the policy's rules.
type Metrics struct {
	actions    *prometheus.CounterVec
	byRule     *prometheus.CounterVec
	planErrors prometheus.Counter
	latency    *prometheus.HistogramVec
	policy     *prometheus.GaugeVec
	retracted  prometheus.Counter
}

// ProtectionBuckets are the protection latency's buckets (seconds). The
// SLO's threshold, 240 s (the freshness objective's 180 s and a minute for
// the outbox and the queue), is one of them: the alerts read its bucket.
var ProtectionBuckets = []float64{5, 15, 30, 45, 60, 75, 90, 120, 180, 240, 300, 600, 1800}

// NewMetrics registers the series with reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_actions_total",
			Help: "Protective actions the policy decided, by action, mode (dry_run, on) and outcome (written, suppressed, cleared, capped, rate_limited, weak_evidence, no_offender).",
		}, []string{"action", "mode", "outcome"}),
		byRule: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_actions_rule_total",
			Help: "Protective actions written, by policy rule and mode: the firing rate the per-rule alert watches.",
		}, []string{"rule", "mode"}),
		planErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_actions_plan_errors_total",
			Help: "Verdicts whose actions could not be decided (the store's record unreadable); the verdict is held and retried.",
		}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatguard_protection_latency_seconds",
			Help:    "From the newest message of the reviewed window to the action's publish on the actions queue, by action.",
			Buckets: ProtectionBuckets,
		}, []string{"action"}),
		policy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "chatguard_actions_policy_info",
			Help: "The protective-action policy this process runs (1), by version and hash.",
		}, []string{"version", "hash"}),
		retracted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_actions_retracted_total",
			Help: "Live protective actions reversed at start because a new policy file removed their rule or took their action off `on`.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.actions, m.byRule, m.planErrors, m.latency, m.policy, m.retracted)
	}
	for _, k := range pipeline.ProtectiveActionKinds {
		for _, mode := range []pipeline.ActionMode{pipeline.ModeDryRun, pipeline.ModeOn} {
			for _, o := range policy.Outcomes {
				m.actions.WithLabelValues(string(k), string(mode), string(o))
			}
		}
	}
	return m
}

func (m *Metrics) count(k pipeline.ActionKind, mode pipeline.ActionMode, outcome string) {
	m.actions.WithLabelValues(string(k), string(mode), outcome).Inc()
}

func (m *Metrics) policyInfo(p *policy.Policy) {
	m.policy.Reset()
	m.policy.WithLabelValues(p.Version, p.Hash[:12]).Set(1)
	for _, r := range p.Rules {
		for _, mode := range []pipeline.ActionMode{pipeline.ModeDryRun, pipeline.ModeOn} {
			m.byRule.WithLabelValues(r.ID, string(mode))
		}
	}
}

// Actions is chatguard_actions_total, for tests and dashboards' checks.
func (m *Metrics) Actions() *prometheus.CounterVec { return m.actions }

// Retracted counts n actions a policy change reversed.
func (m *Metrics) Retracted(n int) { m.retracted.Add(float64(n)) }
