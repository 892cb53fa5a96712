package k8s_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/k8s/inventory"
)

// promParser parses PromQL as Prometheus does by default.
var promParser = parser.NewParser(parser.Options{})

// targetLabels are the labels Prometheus adds to every scraped series of a
// PodMonitor target.
var targetLabels = map[string]bool{"namespace": true, "pod": true, "container": true, "job": true, "instance": true, "endpoint": true}

// externalMetrics are the series rules and panels may use that chatguard
// does not export: the scrape's own up, and the SQS queue metrics YACE
// exports from CloudWatch (deploy/README.md, "Prerequisites").
// KEDA's operator exports keda_scaled_object_errors_total (2.14+).
var externalMetrics = regexp.MustCompile(`^(up|aws_sqs_(approximate_age_of_oldest_message|approximate_number_of_messages_(visible|not_visible|delayed))_maximum|keda_scaled_object_errors_total)$`)

// seriesIndex maps each sample name the product exposes to its family.
func seriesIndex(inv map[string]inventory.Metric) map[string]inventory.Metric {
	out := map[string]inventory.Metric{}
	for _, m := range inv {
		for _, s := range m.Series() {
			out[s] = m
		}
	}
	return out
}

// selector is one vector selector of an expression.
type selector struct {
	name     string
	matchers []*labels.Matcher
}

// checkExpr parses expr and checks every series it selects: chatguard_
// series must be exported by the binaries, with the labels they match on;
// anything else must be a known external metric. It returns the selectors.
func checkExpr(t *testing.T, where, expr string, inv map[string]inventory.Metric) []selector {
	t.Helper()
	e, err := promParser.ParseExpr(expr)
	require.NoError(t, err, "%s: %s", where, expr)
	series := seriesIndex(inv)
	var out []selector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		require.NotEmpty(t, vs.Name, "%s: select series by name: %s", where, vs.String())
		out = append(out, selector{name: vs.Name, matchers: vs.LabelMatchers})
		if sqlExporterMetrics(t)[vs.Name] {
			// Defined by the shipped sql-exporter collector, not a binary.
			return nil
		}
		if !strings.HasPrefix(vs.Name, "chatguard_") {
			require.Regexp(t, externalMetrics, vs.Name, "%s: %s is neither a chatguard metric nor a known exporter's", where, vs.Name)
			return nil
		}
		m, ok := series[vs.Name]
		require.True(t, ok, "%s: %s is not exported by the binaries (inventory read from the source)", where, vs.Name)
		for _, lm := range vs.LabelMatchers {
			if lm.Name == model.MetricNameLabel || targetLabels[lm.Name] {
				continue
			}
			require.True(t, m.HasLabel(vs.Name, lm.Name), "%s: %s has no label %q (it has %v; defined at %s)", where, vs.Name, lm.Name, m.Labels, m.Pos)
		}
		return nil
	})
	require.NotEmpty(t, out, "%s: selects nothing: %s", where, expr)
	return out
}

// queueNames returns every SQS queue name of every overlay: the worker's
// three queues and the feedback queue's DLQ (named <feedback>-dlq, see
// deploy/README.md), and the trigger's three (from the overlay with
// components/realtime, which runs the trigger).
func queueNames(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, o := range overlays {
		s := render(t, o)
		w := envOf(t, s, container(t, s, "chatguard-worker"))
		for _, k := range []string{"CHATGUARD_REVIEW_QUEUE_URL", "CHATGUARD_REVIEW_DLQ_URL", "CHATGUARD_FEEDBACK_QUEUE_URL"} {
			out[o] = append(out[o], w[k].value[strings.LastIndex(w[k].value, "/")+1:])
		}
		out[o] = append(out[o], out[o][2]+"-dlq")
		rt := render(t, o+realtimeSuffix)
		tr := envOf(t, rt, container(t, rt, "chatguard-trigger"))
		for _, k := range []string{"CHATGUARD_CHAT_EVENTS_QUEUE_URL", "CHATGUARD_CHAT_EVENTS_DLQ_URL", "CHATGUARD_REVIEW_REALTIME_QUEUE_URL"} {
			out[o] = append(out[o], tr[k].value[strings.LastIndex(tr[k].value, "/")+1:])
		}
	}
	return out
}

// checkQueueMatchers requires every dimension_QueueName matcher, and every
// job matcher on up, to match something real in every overlay: a queue of
// the overlay, or the job name Prometheus gives a PodMonitor's targets.
func checkQueueMatchers(t *testing.T, where string, sels []selector) {
	t.Helper()
	queues := queueNames(t)
	for _, sel := range sels {
		for _, lm := range sel.matchers {
			switch {
			case lm.Name == "dimension_QueueName":
				for o, names := range queues {
					hit := false
					for _, n := range names {
						hit = hit || lm.Matches(n)
					}
					require.True(t, hit, "%s: %s matches no queue of %s (%v)", where, lm, o, names)
				}
			case lm.Name == "job":
				for _, o := range realtimeOverlays {
					s := render(t, o)
					hit := false
					for name, pm := range s.PodMonitors {
						hit = hit || lm.Matches(pm.Namespace+"/"+name)
					}
					require.True(t, hit, "%s: %s matches no PodMonitor job of %s", where, lm, o)
				}
			}
		}
	}
}
