package k8s_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// TestConsoleManifests checks the moderators' console in each overlay:
// every flag of `console --help` is wired by the ConfigMap or a Secret and
// nothing else is set, the container is hardened, the probes hit the admin
// routes, the grace period covers the drain, it listens on loopback behind
// the oauth2-proxy sidecar and trusts identity headers from loopback only,
// it reads the workers' Secret for what they share, and its pods are the
// peers the worker's operator-API NetworkPolicy admits.
func TestConsoleManifests(t *testing.T) {
	t.Parallel()
	flags := flagsOf(t)["/console"]
	require.NotEmpty(t, flags)
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			d, ok := s.Deployments["chatguard-console"]
			require.True(t, ok, "Deployment chatguard-console")
			c := container(t, s, "chatguard-console")
			require.Equal(t, []string{"/console"}, c.Command)
			env := envOf(t, s, c)
			for name, src := range env {
				if runtimeEnv[name] {
					continue
				}
				_, ok := flags[name]
				require.True(t, ok, "%s (from %s) is not a flag of console", name, src.from)
			}
			for name, f := range flags {
				_, ok := env[name]
				require.True(t, ok, "--%s (%s) is wired nowhere", f.Name, name)
			}
			require.Equal(t, "chatguard-console", env["CHATGUARD_MYSQL_DSN"].secretRef.Name)
			// What the console shares with the workers comes from their Secret.
			for _, secret := range []string{"CHATGUARD_REDIS_PASSWORD", "CHATGUARD_PRIMARY_API_KEY", "CHATGUARD_FALLBACK_API_KEY", "CHATGUARD_QUOTE_DIGEST_KEY"} {
				require.NotNil(t, env[secret].secretRef, "%s comes from a Secret", secret)
				require.Equal(t, "chatguard-worker", env[secret].secretRef.Name, "%s: the workers' Secret", secret)
			}
			require.Equal(t, "false", env["CHATGUARD_DEV_LOGIN"].value, "no development login in a cluster")
			require.Equal(t, "127.0.0.1/32", env["CHATGUARD_TRUSTED_PROXIES"].value, "identity headers only from the pod's own oauth2-proxy")
			require.True(t, strings.HasPrefix(env["CHATGUARD_LISTEN_ADDR"].value, "127.0.0.1:"), "the pages listen on loopback only")
			for _, file := range []string{"CHATGUARD_OPERATOR_TOKEN_FILE", "CHATGUARD_SESSION_KEY_FILE"} {
				require.True(t, strings.HasPrefix(env[file].value, "/var/run/chatguard/"), "%s is a file of the mounted Secret", file)
			}

			// oauth2-proxy sends to the console's loopback address and owns
			// the "web" port the Service targets.
			var proxy *corev1.Container
			for i := range d.Spec.Template.Spec.Containers {
				if d.Spec.Template.Spec.Containers[i].Name == "oauth2-proxy" {
					proxy = &d.Spec.Template.Spec.Containers[i]
				}
			}
			require.NotNil(t, proxy, "the oauth2-proxy sidecar")
			require.Contains(t, proxy.Args, "--upstream=http://"+env["CHATGUARD_LISTEN_ADDR"].value+"/")
			require.Contains(t, proxy.Args, "--pass-user-headers=true", "oauth2-proxy sets X-Forwarded-Email, the console's identity header")
			require.Equal(t, "X-Forwarded-Email", env["CHATGUARD_IDENTITY_HEADER"].value)
			require.Equal(t, "web", proxy.Ports[0].Name)
			require.Equal(t, "web", s.Services["chatguard-console"].Spec.Ports[0].TargetPort.String())

			sc := c.SecurityContext
			require.NotNil(t, sc)
			require.False(t, *sc.AllowPrivilegeEscalation)
			require.True(t, *sc.ReadOnlyRootFilesystem)
			require.Equal(t, "ALL", string(sc.Capabilities.Drop[0]))
			require.True(t, *d.Spec.Template.Spec.SecurityContext.RunAsNonRoot)
			require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
			require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
			require.Equal(t, "admin", c.ReadinessProbe.HTTPGet.Port.String())
			drain := duration(t, env["CHATGUARD_DRAIN_TIMEOUT"].value)
			require.Greater(t, int64(*d.Spec.Template.Spec.TerminationGracePeriodSeconds), int64(drain.Seconds()))

			// The worker's operator API admits pods named moderator-console
			// of its own namespace.
			require.Equal(t, "moderator-console", d.Spec.Template.Labels["app.kubernetes.io/name"])
			require.Equal(t, "http://chatguard-worker:9091", env["CHATGUARD_OPERATOR_URL"].value)
			_, ok = s.PDBs["chatguard-console"]
			require.True(t, ok)

			// Autoscaled on its in-flight reviews: KEDA owns the count, one
			// replica per threshold reviews running, below the slots a pod has.
			require.Nil(t, d.Spec.Replicas, "KEDA owns the console's replica count")
			so, ok := s.ScaledObjects["chatguard-console"]
			require.True(t, ok, "ScaledObject chatguard-console")
			require.Equal(t, "chatguard-console", so.Spec.ScaleTargetRef.Name)
			require.Len(t, so.Spec.Triggers, 1)
			tr := so.Spec.Triggers[0]
			require.Equal(t, "prometheus", tr.Type)
			sels := checkExpr(t, "console autoscaling", tr.Metadata["query"], exported(t))
			require.Equal(t, "chatguard_console_reviews_running", sels[0].name, "the console's in-flight reviews")
			require.Contains(t, tr.Metadata["query"], `namespace="`+d.Namespace+`"`)
			require.Less(t, atoi(t, tr.Metadata["threshold"]), atoi(t, env["CHATGUARD_MAX_REVIEWS"].value),
				"a replica is added before a pod's --max-reviews slots are all taken")
			require.NotNil(t, so.Spec.Fallback)
			require.GreaterOrEqual(t, *so.Spec.MinReplicaCount, int32(1))
			require.GreaterOrEqual(t, so.Spec.Fallback.Replicas, *so.Spec.MinReplicaCount)
			stab := time.Duration(*so.Spec.Advanced.HorizontalPodAutoscalerConfig.Behavior.ScaleDown.StabilizationWindowSeconds) * time.Second
			require.Greater(t, stab, time.Duration(*d.Spec.Template.Spec.TerminationGracePeriodSeconds)*time.Second)
		})
	}
}
