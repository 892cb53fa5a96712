package k8s_test

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/chatguard/chatguard/deploy/k8s/manifest"
)

// The trigger runs and the workers poll review-realtime only where an
// overlay lists components/realtime, and then the very queue the trigger
// publishes to; KEDA scales them on it too
// (TestKEDAScalesOnTheQueuesTheBinariesRead). Turning it off is removing
// the component: nothing of real time is left (KEDA's minimum of two
// triggers would undo scaling the Deployment to zero).
func TestRealtimeIsOffUntilTheComponentTurnsItOn(t *testing.T) {
	t.Parallel()
	for _, o := range overlays {
		s := render(t, o)
		require.Empty(t, envOf(t, s, container(t, s, "chatguard-worker"))["CHATGUARD_REALTIME_QUEUE_URL"].value, "%s: real time is off by default", o)
		require.Len(t, s.ScaledObjects["chatguard-worker"].Spec.Triggers, 2, "%s: the workers scale on review alone", o)
		for _, id := range s.Order {
			require.NotContains(t, id, "trigger", "%s: %s without components/realtime", o, id)
			require.NotContains(t, id, "realtime", "%s: %s without components/realtime", o, id)
		}
		require.Equal(t, "false", s.ConfigMaps["chatguard-batch"].Data["CHATGUARD_SWEEP"], "%s: the batch reviews every room", o)
	}
	for _, o := range realtimeOverlays {
		s := render(t, o)
		worker := envOf(t, s, container(t, s, "chatguard-worker"))["CHATGUARD_REALTIME_QUEUE_URL"].value
		trigger := envOf(t, s, container(t, s, "chatguard-trigger"))["CHATGUARD_REVIEW_REALTIME_QUEUE_URL"].value
		require.NotEmpty(t, worker, o)
		require.Equal(t, trigger, worker, "%s: the workers poll the queue the trigger publishes to", o)
		_, local := s.ConfigMaps["chatguard-realtime-keda"]
		require.False(t, local, "%s: the component's formula template is local, never applied", o)
	}
}

// The trigger talks to Redis and SQS (and DNS), nothing else: no MySQL, no
// chat API, no model pool, no internet.
func TestTriggerEgressIsRedisAndSQSOnly(t *testing.T) {
	t.Parallel()
	for _, o := range realtimeOverlays {
		s := render(t, o)
		podLabels := labels.Set(s.Deployments["chatguard-trigger"].Spec.Template.Labels)
		var egress []string
		for _, n := range manifest.Names(s.NetworkPolicies) {
			np := s.NetworkPolicies[n]
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			require.NoError(t, err)
			if sel.Matches(podLabels) && len(np.Spec.Egress) > 0 {
				egress = append(egress, n)
			}
		}
		sort.Strings(egress)
		require.Equal(t, []string{"chatguard-egress-aws", "chatguard-egress-dns", "chatguard-egress-redis"}, egress, o)
	}
}
