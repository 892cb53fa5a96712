package k8s_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/k8s/image"
	"github.com/chatguard/chatguard/deploy/k8s/inventory"
	"github.com/chatguard/chatguard/deploy/k8s/manifest"
)

// pod is one pod template of an overlay.
type pod struct {
	owner  string // Deployment/chatguard-worker
	labels map[string]string
	spec   *corev1.PodSpec
}

func pods(s *manifest.Set) []pod {
	var out []pod
	for _, n := range manifest.Names(s.Deployments) {
		d := s.Deployments[n]
		out = append(out, pod{"Deployment/" + n, d.Spec.Template.Labels, &d.Spec.Template.Spec})
	}
	for _, n := range manifest.Names(s.Jobs) {
		j := s.Jobs[n]
		out = append(out, pod{"Job/" + n, j.Spec.Template.Labels, &j.Spec.Template.Spec})
	}
	for _, n := range manifest.Names(s.CronJobs) {
		j := s.CronJobs[n]
		out = append(out, pod{"CronJob/" + n, j.Spec.JobTemplate.Spec.Template.Labels, &j.Spec.JobTemplate.Spec.Template.Spec})
	}
	return out
}

// commandOf names the binary (and subcommand) a container runs, as keyed in
// flagsOf: "/worker", "/worker migrate".
func commandOf(t *testing.T, c corev1.Container) string {
	t.Helper()
	require.NotEmpty(t, c.Command, "container %s must name its binary (the image's entrypoint is only a default)", c.Name)
	cmd := strings.Join(append(append([]string(nil), c.Command...), c.Args...), " ")
	return cmd
}

// envSource is where one environment variable of a container comes from.
type envSource struct {
	value     string // literal or ConfigMap value
	secretRef *corev1.SecretKeySelector
	from      string // "env", "ConfigMap/<name>"
}

// envOf resolves a container's environment against the rendered ConfigMaps.
func envOf(t *testing.T, s *manifest.Set, c corev1.Container) map[string]envSource {
	t.Helper()
	out := map[string]envSource{}
	for _, ef := range c.EnvFrom {
		require.Nil(t, ef.SecretRef, "%s: secrets are mapped key by key (env.valueFrom), never with envFrom", c.Name)
		require.NotNil(t, ef.ConfigMapRef, "%s: envFrom without a ConfigMap", c.Name)
		require.Empty(t, ef.Prefix, "%s: envFrom prefix", c.Name)
		cm, ok := s.ConfigMaps[ef.ConfigMapRef.Name]
		require.True(t, ok, "%s: ConfigMap %s is not in the overlay", c.Name, ef.ConfigMapRef.Name)
		for k, v := range cm.Data {
			out[k] = envSource{value: v, from: "ConfigMap/" + ef.ConfigMapRef.Name}
		}
	}
	for _, e := range c.Env {
		src := envSource{value: e.Value, from: "env"}
		if e.ValueFrom != nil {
			require.NotNil(t, e.ValueFrom.SecretKeyRef, "%s: %s: only secretKeyRef is used for valueFrom", c.Name, e.Name)
			src.secretRef = e.ValueFrom.SecretKeyRef
		}
		out[e.Name] = src
	}
	return out
}

// runtimeEnv are the variables a container may set that are not chatguard
// flags: the AWS SDK's region and the Go runtime's heap goal.
var runtimeEnv = map[string]bool{"AWS_REGION": true, "GOMEMLIMIT": true}

// unset are flags a deployment must leave alone, with the reason.
var unset = map[string]string{
	"/consumer debug-pause-after-write": "a test hook that delays deletes",
	"/worker purge erase-sender":        "an erasure request is a one-off run by an operator, never the retention CronJob's",
}

// setting returns a flag's value in a container: its variable, else the
// binary's default.
func setting(t *testing.T, env map[string]envSource, flags map[string]inventory.Flag, name string) string {
	t.Helper()
	for _, f := range flags {
		if f.Name == name {
			if e, ok := env[f.Env]; ok {
				require.Nil(t, e.secretRef, "--%s comes from a Secret; it cannot be checked here", name)
				return e.value
			}
			return f.Default
		}
	}
	t.Fatalf("no flag --%s", name)
	return ""
}

func duration(t *testing.T, v string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "duration %q", v)
	return d
}

func atoi(t *testing.T, v string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err, "integer %q", v)
	return n
}

// container returns a Deployment's chatguard container: its only one, or
// the one named after it (console in chatguard-console, beside the
// oauth2-proxy sidecar).
func container(t *testing.T, s *manifest.Set, deployment string) corev1.Container {
	t.Helper()
	d, ok := s.Deployments[deployment]
	require.True(t, ok, "Deployment %s missing", deployment)
	cs := d.Spec.Template.Spec.Containers
	for _, c := range cs {
		if c.Name == strings.TrimPrefix(deployment, "chatguard-") {
			return c
		}
	}
	require.Len(t, cs, 1)
	return cs[0]
}

// sidecars are the containers that do not run a chatguard binary: their
// image is pinned and hardened like the rest, their flags are their own.
var sidecars = map[string]bool{"oauth2-proxy": true}

func TestOverlaysRenderStrictly(t *testing.T) {
	t.Parallel()
	// The base renders too, with its placeholders.
	_, err := manifest.Render("base")
	require.NoError(t, err)
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			var got []string
			for _, id := range s.Order {
				if strings.HasPrefix(id, "ConfigMap/chatguard-") && id != "ConfigMap/chatguard-batch" && id != "ConfigMap/chatguard-dashboard" && id != "ConfigMap/chatguard-sql-exporter-collectors" {
					id = id[:strings.LastIndex(id, "-")] + "-<hash>"
				}
				got = append(got, id)
			}
			sort.Strings(got)
			env := strings.TrimSuffix(o, realtimeSuffix)
			want := running(o,
				"ConfigMap/chatguard-batch", "ConfigMap/chatguard-compact-<hash>", "ConfigMap/chatguard-console-<hash>", "ConfigMap/chatguard-consumer-<hash>", "ConfigMap/chatguard-dashboard",
				"ConfigMap/chatguard-purge-<hash>", "ConfigMap/chatguard-sql-exporter-collectors", "ConfigMap/chatguard-trigger-<hash>", "ConfigMap/chatguard-worker-<hash>",
				"CronJob/chatguard-compact", "CronJob/chatguard-purge",
				"Deployment/chatguard-console", "Deployment/chatguard-consumer", "Deployment/chatguard-trigger", "Deployment/chatguard-worker",
				"Namespace/"+map[string]string{"dev": "chatguard-dev", "prod": "chatguard"}[env],
				"NetworkPolicy/chatguard-console", "NetworkPolicy/chatguard-default-deny-egress", "NetworkPolicy/chatguard-default-deny-ingress",
				"NetworkPolicy/chatguard-egress-aws", "NetworkPolicy/chatguard-egress-dns", "NetworkPolicy/chatguard-egress-internet-https",
				"NetworkPolicy/chatguard-egress-mysql", "NetworkPolicy/chatguard-egress-redis", "NetworkPolicy/chatguard-egress-services",
				"NetworkPolicy/chatguard-metrics", "NetworkPolicy/chatguard-worker-operator-api",
				"PodDisruptionBudget/chatguard-console", "PodDisruptionBudget/chatguard-consumer", "PodDisruptionBudget/chatguard-trigger", "PodDisruptionBudget/chatguard-worker",
				"PodMonitor/chatguard-console", "PodMonitor/chatguard-consumer", "PodMonitor/chatguard-trigger", "PodMonitor/chatguard-worker",
				"PrometheusRule/chatguard", "PrometheusRule/chatguard-console", "PrometheusRule/chatguard-realtime",
				"Role/chatguard-airflow-pod-launcher", "RoleBinding/chatguard-airflow-pod-launcher",
				"ScaledObject/chatguard-console", "ScaledObject/chatguard-consumer", "ScaledObject/chatguard-trigger", "ScaledObject/chatguard-worker",
				"Service/chatguard-console", "Service/chatguard-worker",
				"ServiceAccount/chatguard-batch", "ServiceAccount/chatguard-compact", "ServiceAccount/chatguard-console", "ServiceAccount/chatguard-consumer",
				"ServiceAccount/chatguard-purge", "ServiceAccount/chatguard-trigger", "ServiceAccount/chatguard-worker",
				"TriggerAuthentication/chatguard-aws",
			)
			if env == "prod" {
				// The Secrets, synced from the secret manager.
				want = append(want, "ExternalSecret/chatguard-batch", "ExternalSecret/chatguard-console", "ExternalSecret/chatguard-migrate",
					"ExternalSecret/chatguard-operator-tokens", "ExternalSecret/chatguard-worker")
			}
			sort.Strings(want)
			require.Equal(t, want, got, "the migration Job is not here: overlays/%s/migrate applies it before the rollout", o)
			require.Empty(t, s.Secrets, "no Secret is kept in git; they are created as deploy/README.md says")
			for _, ns := range s.Namespaces {
				require.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"], "the namespace enforces the restricted pod security standard")
			}
		})
	}
}

func TestContainersAreHardened(t *testing.T) {
	t.Parallel()
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			for _, p := range pods(s) {
				sc := p.spec.SecurityContext
				require.NotNil(t, sc, p.owner)
				require.True(t, sc.RunAsNonRoot != nil && *sc.RunAsNonRoot, "%s: runAsNonRoot", p.owner)
				require.True(t, sc.RunAsUser != nil && *sc.RunAsUser == image.UID, "%s: runAsUser must be the image's user %d", p.owner, image.UID)
				require.True(t, sc.RunAsGroup != nil && *sc.RunAsGroup == image.UID, "%s: runAsGroup", p.owner)
				require.True(t, sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, "%s: seccomp RuntimeDefault", p.owner)
				require.True(t, p.spec.AutomountServiceAccountToken != nil && !*p.spec.AutomountServiceAccountToken, "%s: no Kubernetes API token", p.owner)
				require.False(t, p.spec.HostNetwork || p.spec.HostPID || p.spec.HostIPC, p.owner)
				_, ok := s.ServiceAccounts[p.spec.ServiceAccountName]
				require.True(t, ok, "%s: ServiceAccount %q missing", p.owner, p.spec.ServiceAccountName)
				require.Empty(t, p.spec.InitContainers, p.owner)
				for _, c := range p.spec.Containers {
					where := p.owner + "/" + c.Name
					cs := c.SecurityContext
					require.NotNil(t, cs, where)
					require.True(t, cs.AllowPrivilegeEscalation != nil && !*cs.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation", where)
					require.True(t, cs.ReadOnlyRootFilesystem != nil && *cs.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem", where)
					require.True(t, cs.Privileged == nil || !*cs.Privileged, "%s: privileged", where)
					require.NotNil(t, cs.Capabilities, where)
					require.Equal(t, []corev1.Capability{"ALL"}, cs.Capabilities.Drop, "%s: drop ALL", where)
					require.Empty(t, cs.Capabilities.Add, where)
					require.True(t, cs.RunAsUser == nil || *cs.RunAsUser == image.UID, where)

					for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
						req, okReq := c.Resources.Requests[r]
						lim, okLim := c.Resources.Limits[r]
						require.True(t, okReq && okLim, "%s: %s request and limit", where, r)
						require.True(t, req.Cmp(lim) <= 0, "%s: %s request %s above limit %s", where, r, req.String(), lim.String())
					}

					// The image is pinned: a version tag or a digest, never
					// latest or the base's placeholder name.
					require.Regexp(t, `^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9./-]+(:[A-Za-z0-9][A-Za-z0-9._-]*)?(@sha256:[0-9a-f]{64})?$`, c.Image, where)
					require.True(t, strings.Contains(c.Image, "@sha256:") || regexp.MustCompile(`:v?[0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.-]*$`).MatchString(c.Image),
						"%s: image %q must be pinned by version tag or digest", where, c.Image)
					require.NotEqual(t, corev1.PullAlways, c.ImagePullPolicy, where)

					if sidecars[c.Name] {
						continue
					}
					bin := strings.TrimPrefix(c.Command[0], "/")
					require.Contains(t, image.Binaries, bin, "%s runs %s, which the image does not have", where, c.Command[0])
					require.Equal(t, "/"+bin, c.Command[0])

					// GOMEMLIMIT is a goal under the limit, not at or above it.
					if v, ok := envOf(t, s, c)["GOMEMLIMIT"]; ok {
						goal, err := resource.ParseQuantity(strings.TrimSuffix(v.value, "B"))
						require.NoError(t, err, "%s: GOMEMLIMIT %q", where, v.value)
						lim := c.Resources.Limits[corev1.ResourceMemory]
						require.Equal(t, -1, goal.Cmp(lim), "%s: GOMEMLIMIT %s must stay under the memory limit %s", where, v.value, lim.String())
					}
				}
			}
		})
	}
}

// secretsTable is the Secrets table of deploy/README.md: secret, key,
// variable.
var secretsTable = regexp.MustCompile("(?m)^\\| `(chatguard-[a-z-]+)` \\| `([a-z0-9-]+)` \\| `(CHATGUARD_[A-Z0-9_]+)` \\|")

func TestEnvIsEveryFlag(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, m := range secretsTable.FindAllStringSubmatch(string(readme), -1) {
		documented[m[1]+" "+m[2]+" "+m[3]] = true
	}
	require.NotEmpty(t, documented, "deploy/README.md has no Secrets table")
	flags := flagsOf(t)
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			used := map[string]bool{}
			// The migration Job renders from its own kustomization.
			for _, set := range []*manifest.Set{s, render(t, strings.TrimSuffix(o, realtimeSuffix)+"/migrate")} {
				for _, p := range pods(set) {
					for _, c := range p.spec.Containers {
						if sidecars[c.Name] {
							continue
						}
						cmd := commandOf(t, c)
						fl, ok := flags[cmd]
						require.True(t, ok, "%s runs %q, whose flags are unknown", p.owner, cmd)
						env := envOf(t, set, c)
						for name, src := range env {
							if runtimeEnv[name] {
								continue
							}
							f, ok := fl[name]
							require.True(t, ok, "%s: %s (from %s) is not a flag of %s", p.owner, name, src.from, cmd)
							require.NotContains(t, unset, cmd+" "+f.Name, "%s: %s must not be set: %s", p.owner, name, unset[cmd+" "+f.Name])
							if src.secretRef != nil {
								k := src.secretRef.Name + " " + src.secretRef.Key + " " + name
								require.True(t, documented[k], "%s: secret %s key %s (%s) is missing from deploy/README.md's Secrets table", p.owner, src.secretRef.Name, src.secretRef.Key, name)
								used[k] = true
							}
						}
						// Every setting is wired: a deployment that leaves a flag to
						// the binary's default has to say so here.
						for envName, f := range fl {
							if _, ok := env[envName]; !ok {
								_, skip := unset[cmd+" "+f.Name]
								require.True(t, skip, "%s: --%s (%s) is wired nowhere: add it to the ConfigMap, a Secret, or the unset list with a reason", p.owner, f.Name, envName)
							}
						}
					}
				}
			}
			// The batch pod is Airflow's; its settings come from the batch
			// ConfigMap plus the DAG's arguments and Secret.
			batch := s.ConfigMaps["chatguard-batch"]
			require.NotNil(t, batch, "ConfigMap chatguard-batch (read by the Airflow DAG) missing")
			bf := flags["/batch"]
			// The mode (--sweep, --sweep-grace, --sweep-wait) is configuration,
			// set by components/realtime; the DAG may still pass --sweep.
			perRun := map[string]bool{"window-start": true, "window-end": true, "dry-run": true, "max-events": true, "run-id": true, "mysql-dsn": true}
			for k := range batch.Data {
				if runtimeEnv[k] {
					continue
				}
				f, ok := bf[k]
				require.True(t, ok, "ConfigMap chatguard-batch: %s is not a flag of batch", k)
				require.False(t, perRun[f.Name], "ConfigMap chatguard-batch: --%s is per run (DAG arguments or Secret), not configuration", f.Name)
			}
			for envName, f := range bf {
				_, ok := batch.Data[envName]
				require.True(t, ok || perRun[f.Name], "batch: --%s (%s) is wired nowhere", f.Name, envName)
			}
			used["chatguard-batch mysql-dsn CHATGUARD_MYSQL_DSN"] = true // read by the DAG
			// Every documented Secret is read with every component listed.
			for k := range documented {
				require.True(t, used[k] || !strings.HasSuffix(o, realtimeSuffix), "deploy/README.md documents secret %q that nothing reads", k)
			}
		})
	}
}

// servedRoutes are the admin routes binary bin registers: its own, and
// the shared admin handler's when it serves that (lifecycle.AdminHandler).
func servedRoutes(t *testing.T, bin string) []inventory.Route {
	t.Helper()
	dir := filepath.Join(repoRoot, "cmd", bin)
	dirs := []string{dir}
	if usesSharedAdmin(t, dir) {
		dirs = append(dirs, filepath.Join(repoRoot, "cmd", "internal", "lifecycle"))
	}
	var routes []inventory.Route
	for _, d := range dirs {
		r, err := inventory.Routes(d)
		if err != nil && !(d == dir && len(dirs) > 1 && strings.Contains(err.Error(), "no routes registered")) {
			require.NoError(t, err)
		}
		routes = append(routes, r...)
	}
	return routes
}

// usesSharedAdmin reports whether a non-test file in dir calls
// lifecycle.AdminHandler.
func usesSharedAdmin(t *testing.T, dir string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		if strings.Contains(string(b), "lifecycle.AdminHandler(") {
			return true
		}
	}
	return false
}

func TestProbesHitServedRoutes(t *testing.T) {
	t.Parallel()
	flags := flagsOf(t)
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			for _, d := range running(o, "chatguard-worker", "chatguard-consumer", "chatguard-trigger") {
				c := container(t, s, d)
				bin := strings.TrimPrefix(c.Command[0], "/")
				routes := servedRoutes(t, bin)
				env := envOf(t, s, c)
				_, port, err := net.SplitHostPort(setting(t, env, flags[c.Command[0]], "admin-addr"))
				require.NoError(t, err)
				// The admin port first; the worker adds "operator", which
				// must be --operator-addr's (probes and the authenticated
				// operator API listen apart, for different peers).
				require.Equal(t, "admin", c.Ports[0].Name)
				require.Equal(t, port, strconv.Itoa(int(c.Ports[0].ContainerPort)), "%s: the container port must be --admin-addr's", d)
				for _, cp := range c.Ports[1:] {
					require.Equal(t, "operator", cp.Name, "%s: unexpected port %s", d, cp.Name)
					_, op, err := net.SplitHostPort(setting(t, env, flags[c.Command[0]], "operator-addr"))
					require.NoError(t, err)
					require.Equal(t, op, strconv.Itoa(int(cp.ContainerPort)), "%s: the operator port must be --operator-addr's", d)
					require.Empty(t, setting(t, env, flags[c.Command[0]], "pprof-addr"), "%s: pprof stays off in a deployment", d)
				}

				probes := map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe}
				for kind, p := range probes {
					require.NotNil(t, p, "%s: %s probe", d, kind)
					require.NotNil(t, p.HTTPGet, "%s: %s probe over HTTP", d, kind)
					require.Equal(t, "admin", p.HTTPGet.Port.String(), "%s: %s probe port", d, kind)
					served := false
					for _, r := range routes {
						served = served || r.Serves("GET", p.HTTPGet.Path)
					}
					require.True(t, served, "%s: %s probe GET %s is not a route of %s (%v)", d, kind, p.HTTPGet.Path, bin, routes)
				}
				// Liveness must not depend on MySQL or the drain: a pod that
				// restarts because the database is down only makes it worse.
				require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, d)
				require.Equal(t, "/healthz", c.StartupProbe.HTTPGet.Path, d)
				require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path, d)
			}
			// The worker opens its admin port only after MySQL answered (it
			// waits up to 30 s): startup must allow more than that.
			sp := container(t, s, "chatguard-worker").StartupProbe
			require.Greater(t, sp.PeriodSeconds*sp.FailureThreshold, int32(30))
		})
	}
}

// reviewP99 is the planning figure for the p99 of a review's wall time
// that the worker's drain is sized from (deploy/README.md, "Rollouts",
// says where it comes from and how to measure it in production).
const reviewP99 = 90 * time.Second

func TestGracePeriodCoversTheDrain(t *testing.T) {
	t.Parallel()
	flags := flagsOf(t)
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			for _, d := range running(o, "chatguard-worker", "chatguard-consumer", "chatguard-trigger") {
				c := container(t, s, d)
				env, fl := envOf(t, s, c), flags[c.Command[0]]
				drain := triggerDrain(t, env, fl, d)
				wait := duration(t, setting(t, env, fl, "wait-time"))
				grace := s.Deployments[d].Spec.Template.Spec.TerminationGracePeriodSeconds
				require.NotNil(t, grace, d)
				require.Greater(t, time.Duration(*grace)*time.Second, drain+wait,
					"%s: terminationGracePeriodSeconds %d must exceed --drain-timeout %s + --wait-time %s", d, *grace, drain, wait)
				if d == "chatguard-worker" {
					require.GreaterOrEqual(t, drain, reviewP99+30*time.Second,
						"--drain-timeout %s must let a review at the p99 of review time (%s, deploy/README.md \"Rollouts\") finish, with margin", drain, reviewP99)
				}
				require.Zero(t, s.Deployments[d].Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue(),
					"%s: a rollout starts new pods before draining old ones", d)
			}
		})
	}
}

func TestKEDAScalesOnTheQueuesTheBinariesRead(t *testing.T) {
	t.Parallel()
	flags := flagsOf(t)
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			for _, d := range running(o, "chatguard-worker", "chatguard-consumer", "chatguard-trigger") {
				so, ok := s.ScaledObjects[d]
				require.True(t, ok, "ScaledObject %s", d)
				require.Equal(t, d, so.Spec.ScaleTargetRef.Name)
				require.Nil(t, s.Deployments[d].Spec.Replicas, "%s: KEDA owns the replica count; spec.replicas would reset it on every apply", d)
				require.Equal(t, "Deployment", so.Spec.ScaleTargetRef.Kind)
				c := container(t, s, d)
				env, fl := envOf(t, s, c), flags[c.Command[0]]
				tr := so.Spec.Triggers[0]
				require.Equal(t, "aws-sqs-queue", tr.Type)
				// A scaler that errors (IAM trust, throttling) holds a
				// fleet that still reviews, between the bounds.
				require.NotNil(t, so.Spec.Fallback, "%s: a fallback block", d)
				require.GreaterOrEqual(t, so.Spec.Fallback.FailureThreshold, int32(3), d)
				require.GreaterOrEqual(t, so.Spec.Fallback.Replicas, *so.Spec.MinReplicaCount, d)
				require.LessOrEqual(t, so.Spec.Fallback.Replicas, *so.Spec.MaxReplicaCount, d)
				require.NotNil(t, tr.AuthenticationRef, d)
				ta, ok := s.TriggerAuths[tr.AuthenticationRef.Name]
				require.True(t, ok, "%s: TriggerAuthentication %s", d, tr.AuthenticationRef.Name)
				require.Equal(t, "aws", ta.Spec.PodIdentity.Provider)
				require.Equal(t, "workload", ta.Spec.PodIdentity.IdentityOwner, "KEDA reads the queue with the workload's own IRSA role")
				require.Equal(t, env["AWS_REGION"].value, tr.Metadata["awsRegion"], d)
				require.Equal(t, "false", tr.Metadata["scaleOnDelayed"], d)
				min, max := *so.Spec.MinReplicaCount, *so.Spec.MaxReplicaCount
				require.GreaterOrEqual(t, min, int32(1), "%s: never scaled to zero (the probes and metrics need a pod)", d)
				require.GreaterOrEqual(t, max, min, d)

				drain := triggerDrain(t, env, fl, d)
				behavior := so.Spec.Advanced.HorizontalPodAutoscalerConfig.Behavior
				require.NotNil(t, behavior.ScaleDown.StabilizationWindowSeconds, d)
				stab := time.Duration(*behavior.ScaleDown.StabilizationWindowSeconds) * time.Second
				grace := time.Duration(*s.Deployments[d].Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
				require.Greater(t, stab, drain, "%s: scale-down stabilisation must be longer than the drain", d)
				require.Greater(t, stab, grace, d)

				switch d {
				case "chatguard-worker":
					require.Equal(t, env["CHATGUARD_REVIEW_QUEUE_URL"].value, tr.Metadata["queueURL"], "the worker scales on the queue it polls")
					require.Equal(t, "true", tr.Metadata["scaleOnInFlight"], "a worker's messages in flight are its work: count them")
					require.Equal(t, setting(t, env, fl, "concurrency"), tr.Metadata["queueLength"], "one worker per --concurrency messages")
					checkPrimaryGate(t, s, so, atoi(t, setting(t, env, fl, "concurrency")), env["CHATGUARD_REALTIME_QUEUE_URL"].value)
				case "chatguard-trigger":
					require.Equal(t, env["CHATGUARD_CHAT_EVENTS_QUEUE_URL"].value, tr.Metadata["queueURL"], "the trigger scales on the chat events it receives")
					require.Equal(t, "false", tr.Metadata["scaleOnInFlight"], "a trigger's in-flight events are held for Redis; more replicas do not help")
					require.GreaterOrEqual(t, min, int32(2), "rooms fire on silence: a restart of one trigger must not pause firing")
					require.Len(t, so.Spec.Triggers, 1, d)
				case "chatguard-consumer":
					require.Equal(t, env["CHATGUARD_FEEDBACK_QUEUE_URL"].value, tr.Metadata["queueURL"], "the consumer scales on the queue it drains")
					require.Equal(t, "false", tr.Metadata["scaleOnInFlight"], "a consumer holds messages on purpose while it buffers")
					held := atoi(t, setting(t, env, fl, "max-buffered-events")) + 10*atoi(t, setting(t, env, fl, "receive-concurrency"))
					require.Less(t, int64(max)*held, int64(120000),
						"maxReplicaCount %d x (max-buffered-events + 10 x receive-concurrency = %d) must stay under SQS's 120,000 in-flight messages", max, held)
					require.Len(t, so.Spec.Triggers, 1, d)
					require.Greater(t, atoi(t, tr.Metadata["queueLength"]), int64(0))
					require.LessOrEqual(t, atoi(t, tr.Metadata["queueLength"]), atoi(t, setting(t, env, fl, "max-buffered-events")),
						"a replica's share of the backlog fits in what one consumer buffers")
					// The memory limit holds the buffer twice over (messages and
					// the Parquet being encoded).
					lim := c.Resources.Limits[corev1.ResourceMemory]
					require.GreaterOrEqual(t, lim.Value(), 2*atoi(t, setting(t, env, fl, "max-buffered-bytes")),
						"consumer memory limit %s must be at least twice --max-buffered-bytes", lim.String())
				}
			}
		})
	}
}

// triggerDrain is how long a binary may take to stop: its --drain-timeout,
// or for the trigger (which has none) its engine's drain, --call-timeout
// plus 5 s (cmd/trigger), plus a receive's --wait-time.
func triggerDrain(t *testing.T, env map[string]envSource, fl map[string]inventory.Flag, d string) time.Duration {
	t.Helper()
	if d != "chatguard-trigger" {
		return duration(t, setting(t, env, fl, "drain-timeout"))
	}
	return duration(t, setting(t, env, fl, "call-timeout")) + 5*time.Second + duration(t, setting(t, env, fl, "wait-time"))
}

func TestDisruptionBudgetsAndSpread(t *testing.T) {
	t.Parallel()
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			for _, d := range running(o, "chatguard-worker", "chatguard-consumer", "chatguard-trigger") {
				dep := s.Deployments[d]
				podLabels := labels.Set(dep.Spec.Template.Labels)
				sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
				require.NoError(t, err)
				require.True(t, sel.Matches(podLabels), "%s: selector does not match its pods", d)

				pdb, ok := s.PDBs[d]
				require.True(t, ok, "PodDisruptionBudget %s", d)
				psel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				require.NoError(t, err)
				require.True(t, psel.Matches(podLabels), "%s: the PDB does not select the pods", d)
				require.NotNil(t, pdb.Spec.MaxUnavailable, "%s: maxUnavailable (minAvailable would block drains at one replica)", d)
				require.NotNil(t, pdb.Spec.UnhealthyPodEvictionPolicy)
				require.Equal(t, "AlwaysAllow", string(*pdb.Spec.UnhealthyPodEvictionPolicy), d)

				keys := map[string]bool{}
				for _, tsc := range dep.Spec.Template.Spec.TopologySpreadConstraints {
					if d == "chatguard-worker" && tsc.TopologyKey == "topology.kubernetes.io/zone" {
						require.Equal(t, corev1.DoNotSchedule, tsc.WhenUnsatisfiable, "workers spread over zones hard: a zone's loss takes at most its share")
					}
					tsel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
					require.NoError(t, err)
					require.True(t, tsel.Matches(podLabels), "%s: spread constraint on %s does not select the pods", d, tsc.TopologyKey)
					keys[tsc.TopologyKey] = true
				}
				require.True(t, keys["topology.kubernetes.io/zone"] && keys["kubernetes.io/hostname"], "%s: spread over zones and nodes", d)
			}
		})
	}
}

func TestNetworkPolicies(t *testing.T) {
	t.Parallel()
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			deny := s.NetworkPolicies["chatguard-default-deny-ingress"]
			require.NotNil(t, deny)
			require.Empty(t, deny.Spec.PodSelector.MatchLabels)
			require.Empty(t, deny.Spec.PodSelector.MatchExpressions)
			require.Empty(t, deny.Spec.Ingress, "default deny allows nothing")

			// Every allow rule names a port the selected pods have, and every
			// scraped pod is reachable from the monitoring namespace.
			for _, n := range manifest.Names(s.NetworkPolicies) {
				np := s.NetworkPolicies[n]
				sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
				require.NoError(t, err)
				for _, rule := range np.Spec.Ingress {
					require.NotEmpty(t, rule.From, "%s: a rule without peers opens the port to everyone", n)
					for _, peer := range rule.From {
						// A pod selector alone names this namespace's pods.
						require.NotNil(t, peer.PodSelector, "%s: peers are named by pod (and namespace, when another)", n)
						require.Nil(t, peer.IPBlock, "%s: peers are pods, not addresses", n)
					}
					for _, port := range rule.Ports {
						for _, p := range pods(s) {
							if !sel.Matches(labels.Set(p.labels)) {
								continue
							}
							found := false
							for _, c := range p.spec.Containers {
								for _, cp := range c.Ports {
									found = found || cp.Name == port.Port.String()
								}
							}
							require.True(t, found, "%s opens port %s, which %s does not have", n, port.Port.String(), p.owner)
						}
					}
				}
			}
			metrics := s.NetworkPolicies["chatguard-metrics"]
			msel, err := metav1.LabelSelectorAsSelector(&metrics.Spec.PodSelector)
			require.NoError(t, err)
			require.Equal(t, "monitoring", metrics.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
			for _, pm := range s.PodMonitors {
				for _, p := range pods(s) {
					psel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
					require.NoError(t, err)
					if psel.Matches(labels.Set(p.labels)) {
						require.True(t, msel.Matches(labels.Set(p.labels)), "%s is scraped but the metrics policy does not admit Prometheus", p.owner)
					}
				}
			}
			op := s.NetworkPolicies["chatguard-worker-operator-api"]
			require.Equal(t, "moderator-console", op.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/name"])
			require.Nil(t, op.Spec.Ingress[0].From[0].NamespaceSelector, "the console runs in the workers' namespace")
			require.Equal(t, "operator", op.Spec.Ingress[0].Ports[0].Port.String(), "the console reaches only the operator port")
			for _, rule := range metrics.Spec.Ingress {
				for _, p := range rule.Ports {
					require.Equal(t, "admin", p.Port.String(), "Prometheus reaches only the admin port")
				}
			}
		})
	}
}

func TestMonitorsScrapeWhatThePodsServe(t *testing.T) {
	t.Parallel()
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			ds := running(o, "chatguard-worker", "chatguard-consumer", "chatguard-console", "chatguard-trigger")
			require.Len(t, s.PodMonitors, len(ds))
			for _, d := range ds {
				pm, ok := s.PodMonitors[d]
				require.True(t, ok, "PodMonitor %s", d)
				sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
				require.NoError(t, err)
				require.True(t, sel.Matches(labels.Set(s.Deployments[d].Spec.Template.Labels)), "PodMonitor %s selects no pod of its Deployment", d)
				c := container(t, s, d)
				routes := servedRoutes(t, strings.TrimPrefix(c.Command[0], "/"))
				for _, ep := range pm.Spec.PodMetricsEndpoints {
					require.Equal(t, c.Ports[0].Name, ep.Port)
					served := false
					for _, r := range routes {
						served = served || r.Serves("GET", ep.Path)
					}
					require.True(t, served, "%s: scrapes %s, which is not served", d, ep.Path)
				}
			}
			// The Service for the operator API selects the worker's pods and
			// port.
			svc := s.Services["chatguard-worker"]
			require.NotNil(t, svc)
			require.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(s.Deployments["chatguard-worker"].Spec.Template.Labels)))
			require.Equal(t, "operator", svc.Spec.Ports[0].TargetPort.String(), "the Service exposes only the operator API")
		})
	}
}

func TestComponentsAgreeOnQueues(t *testing.T) {
	t.Parallel()
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			worker := envOf(t, s, container(t, s, "chatguard-worker"))
			consumer := envOf(t, s, container(t, s, "chatguard-consumer"))
			batch := s.ConfigMaps["chatguard-batch"].Data
			require.Equal(t, worker["CHATGUARD_REVIEW_QUEUE_URL"].value, batch["CHATGUARD_REVIEW_QUEUE_URL"], "the batch publishes to the queue the workers poll")
			require.Equal(t, worker["CHATGUARD_FEEDBACK_QUEUE_URL"].value, consumer["CHATGUARD_FEEDBACK_QUEUE_URL"].value, "the consumer drains the queue the workers publish to")
			require.Equal(t, worker["AWS_REGION"].value, consumer["AWS_REGION"].value)
			require.Equal(t, worker["AWS_REGION"].value, batch["AWS_REGION"])
			for _, q := range []string{worker["CHATGUARD_REVIEW_QUEUE_URL"].value, worker["CHATGUARD_REVIEW_DLQ_URL"].value, worker["CHATGUARD_FEEDBACK_QUEUE_URL"].value} {
				require.Regexp(t, `^https://sqs\.`+regexp.QuoteMeta(worker["AWS_REGION"].value)+`\.amazonaws\.com/[0-9]{12}/[A-Za-z0-9_-]+$`, q)
			}
		})
	}
}

func TestMigrationJob(t *testing.T) {
	t.Parallel()
	flags := flagsOf(t)
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			// Its own kustomization, applied and awaited before the
			// overlay: same namespace, same image as the workers.
			main := render(t, o)
			s := render(t, o+"/migrate")
			// The Job, its ServiceAccount and, where the Secrets come from
			// the secret manager, their ExternalSecrets: the first
			// migration of an install runs before the overlay's apply and
			// needs its Secret synced.
			require.Len(t, s.Jobs, 1, "%v", s.Order)
			require.Len(t, s.ServiceAccounts, 1, "%v", s.Order)
			require.Len(t, s.Order, 2+len(s.ExternalSecrets), "only the Job, its ServiceAccount and the ExternalSecrets: %v", s.Order)
			require.Equal(t, len(main.ExternalSecrets), len(s.ExternalSecrets), "the same ExternalSecrets as the overlay's")
			j, ok := s.Jobs["chatguard-migrate"]
			require.True(t, ok)
			require.Equal(t, main.Deployments["chatguard-worker"].Namespace, j.Namespace)
			require.Equal(t, container(t, main, "chatguard-worker").Image, j.Spec.Template.Spec.Containers[0].Image,
				"the migration runs the schema of the build the workers roll to")
			c := j.Spec.Template.Spec.Containers[0]
			require.Equal(t, []string{"/worker", "migrate"}, c.Command)
			require.Equal(t, corev1.RestartPolicyNever, j.Spec.Template.Spec.RestartPolicy)
			require.NotNil(t, j.Spec.BackoffLimit)
			timeout := duration(t, setting(t, envOf(t, s, c), flags["/worker migrate"], "migrate-timeout"))
			require.NotNil(t, j.Spec.ActiveDeadlineSeconds)
			require.Greater(t, time.Duration(*j.Spec.ActiveDeadlineSeconds)*time.Second, timeout, "the binary's own deadline ends a stuck migration first")
			sa := s.ServiceAccounts[j.Spec.Template.Spec.ServiceAccountName]
			require.NotContains(t, sa.Annotations, "eks.amazonaws.com/role-arn", "the migration needs no AWS access")
			require.Equal(t, "PreSync", j.Annotations["argocd.argoproj.io/hook"])
		})
	}
}

// requireIRSA checks a ServiceAccount's role annotation and returns the
// role's account.
func requireIRSA(t *testing.T, sa *corev1.ServiceAccount) string {
	t.Helper()
	arn := sa.Annotations["eks.amazonaws.com/role-arn"]
	m := regexp.MustCompile(`^arn:aws:iam::([0-9]{12}):role/[A-Za-z0-9+=,.@_-]+$`).FindStringSubmatch(arn)
	require.NotNil(t, m, "ServiceAccount %s: IRSA role annotation %q", sa.Name, arn)
	require.NotEqual(t, "000000000000", m[1], "ServiceAccount %s keeps the base's placeholder role", sa.Name)
	return m[1]
}

func TestServiceAccountsCarryTheirRoles(t *testing.T) {
	t.Parallel()
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			worker := envOf(t, s, container(t, s, "chatguard-worker"))
			account := regexp.MustCompile(`/([0-9]{12})/`).FindStringSubmatch(worker["CHATGUARD_REVIEW_QUEUE_URL"].value)[1]
			for _, n := range running(o, "chatguard-worker", "chatguard-consumer", "chatguard-batch", "chatguard-compact", "chatguard-trigger") {
				sa, ok := s.ServiceAccounts[n]
				require.True(t, ok, n)
				require.Equal(t, account, requireIRSA(t, sa), "%s: the role is in the queues' account", n)
				require.True(t, sa.AutomountServiceAccountToken != nil && !*sa.AutomountServiceAccountToken, n)
			}
			require.Equal(t, "chatguard-worker", s.Deployments["chatguard-worker"].Spec.Template.Spec.ServiceAccountName)
			require.Equal(t, "chatguard-consumer", s.Deployments["chatguard-consumer"].Spec.Template.Spec.ServiceAccountName)
			if d, ok := s.Deployments["chatguard-trigger"]; ok {
				require.Equal(t, "chatguard-trigger", d.Spec.Template.Spec.ServiceAccountName)
			}
		})
	}
}

// TestCronJobs checks the scheduled maintenance: lake compaction reads the
// lake the consumer writes, purge uses the workers' DSN, neither overlaps
// itself, and each binary's own deadline comes before the Job's.
func TestCronJobs(t *testing.T) {
	t.Parallel()
	flags := flagsOf(t)
	for _, o := range allOverlays {
		t.Run(o, func(t *testing.T) {
			s := render(t, o)
			for name, want := range map[string]struct {
				cmd     string
				timeout string
			}{
				"chatguard-compact": {"/consumer compact", "compact-timeout"},
				"chatguard-purge":   {"/worker purge", "purge-timeout"},
			} {
				cj, ok := s.CronJobs[name]
				require.True(t, ok, name)
				require.Equal(t, batchv1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy, name)
				require.NotNil(t, cj.Spec.TimeZone, "%s: a schedule without a time zone follows the controller's", name)
				js := cj.Spec.JobTemplate.Spec
				require.Equal(t, corev1.RestartPolicyNever, js.Template.Spec.RestartPolicy, name)
				c := js.Template.Spec.Containers[0]
				require.Equal(t, want.cmd, commandOf(t, c))
				timeout := duration(t, setting(t, envOf(t, s, c), flags[want.cmd], want.timeout))
				require.NotNil(t, js.ActiveDeadlineSeconds, name)
				require.Greater(t, time.Duration(*js.ActiveDeadlineSeconds)*time.Second, timeout, "%s: the binary's own deadline ends a long run first", name)
			}
			consumer := envOf(t, s, container(t, s, "chatguard-consumer"))
			compact := envOf(t, s, s.CronJobs["chatguard-compact"].Spec.JobTemplate.Spec.Template.Spec.Containers[0])
			for _, k := range []string{"CHATGUARD_LAKE_BUCKET", "CHATGUARD_LAKE_PREFIX", "CHATGUARD_S3_PATH_STYLE", "AWS_REGION"} {
				require.Equal(t, consumer[k].value, compact[k].value, "compaction and the consumer must agree on %s", k)
			}
			purge := envOf(t, s, s.CronJobs["chatguard-purge"].Spec.JobTemplate.Spec.Template.Spec.Containers[0])
			worker := envOf(t, s, container(t, s, "chatguard-worker"))
			require.Equal(t, worker["CHATGUARD_MYSQL_DSN"].secretRef, purge["CHATGUARD_MYSQL_DSN"].secretRef, "purge uses the workers' DSN")
			require.NotContains(t, s.ServiceAccounts["chatguard-purge"].Annotations, "eks.amazonaws.com/role-arn", "purge needs no AWS access")
		})
	}
}

// checkPrimaryGate checks the worker's scale-out bound while the primary
// pool is down: the formula scales on the queue trigger alone, except that
// while the primary_down trigger reads 1 the backlog counted is capped at
// a whole number of replicas' worth, between the bounds; the breaker query
// reads this overlay's workers.
func checkPrimaryGate(t *testing.T, s *manifest.Set, so *manifest.ScaledObject, concurrency int64, realtimeURL string) {
	t.Helper()
	formula := `^primary_down > 0 \? min\(queue, ([0-9]+)\) : queue$`
	if realtimeURL == "" {
		require.Len(t, so.Spec.Triggers, 2)
	} else {
		// Real time on: the workers poll review-realtime too, and scale on
		// the two queues' messages together, in flight included.
		require.Len(t, so.Spec.Triggers, 3)
		q, rt := so.Spec.Triggers[0], so.Spec.Triggers[2]
		require.Equal(t, "realtime", rt.Name)
		require.Equal(t, q.Type, rt.Type)
		require.Equal(t, realtimeURL, rt.Metadata["queueURL"], "the worker scales on the real-time queue it polls")
		require.NotEqual(t, q.Metadata["queueURL"], rt.Metadata["queueURL"])
		for _, k := range []string{"awsRegion", "queueLength", "scaleOnInFlight", "scaleOnDelayed"} {
			require.Equal(t, q.Metadata[k], rt.Metadata[k], "review-realtime is counted as review is: %s", k)
		}
		require.Equal(t, q.AuthenticationRef, rt.AuthenticationRef)
		formula = `^primary_down > 0 \? min\(queue \+ realtime, ([0-9]+)\) : queue \+ realtime$`
	}
	q, gate := so.Spec.Triggers[0], so.Spec.Triggers[1]
	require.Equal(t, "queue", q.Name)
	require.Equal(t, "primary_down", gate.Name)
	require.Equal(t, "prometheus", gate.Type)
	ns := s.Deployments["chatguard-worker"].Namespace
	require.Contains(t, gate.Metadata["query"], `namespace="`+ns+`"`, "the gate reads this overlay's workers")
	require.Contains(t, gate.Metadata["query"], `chatguard_llm_breaker_state{`)
	require.Contains(t, gate.Metadata["query"], `pool="primary"`)
	require.True(t, strings.HasSuffix(gate.Metadata["query"], "or vector(0)"), "no series reads as closed, not as an error")
	checkExpr(t, "primary_down", gate.Metadata["query"], exported(t))

	sm := so.Spec.Advanced.ScalingModifiers
	require.Equal(t, "AverageValue", sm["metricType"])
	require.Equal(t, strconv.FormatInt(concurrency, 10), sm["target"], "the formula's target is --concurrency, like queueLength")
	m := regexp.MustCompile(formula).FindStringSubmatch(fmt.Sprint(sm["formula"]))
	require.NotNil(t, m, "formula %q", sm["formula"])
	capMsgs, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	require.Zero(t, capMsgs%concurrency, "the cap %d is a whole number of replicas' worth of --concurrency %d", capMsgs, concurrency)
	capReplicas := int32(capMsgs / concurrency)
	require.GreaterOrEqual(t, capReplicas, *so.Spec.MinReplicaCount)
	require.Less(t, capReplicas, *so.Spec.MaxReplicaCount, "the cap bounds the scale-out below the maximum")
}
