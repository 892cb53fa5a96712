package k8s_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/chatguard/chatguard/deploy/k8s/manifest"
	"github.com/chatguard/chatguard/deploy/k8s/verify"
)

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	return string(b)
}

func problemsOf(r verify.Report) string {
	var b strings.Builder
	for _, p := range r.Problems {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}

// TestDeployVerifyRefusesTheTemplate: the shipped prod overlay renders, but
// deploy-verify names every value still to fill in, the unpinned images and
// the spending caps left open.
func TestDeployVerifyRefusesTheTemplate(t *testing.T) {
	t.Parallel()
	s, err := manifest.Render(filepath.Join("overlays", "prod"))
	require.NoError(t, err)
	r := verify.Check(s, verify.Options{Prod: true, Docs: readme(t)})
	got := problemsOf(r)
	// The values only real time reads (the trigger's role and queues, the
	// realtime reserve) are named once components/realtime is listed.
	k := filepath.Join("overlays", "prod", "kustomization.yaml")
	kb, err := os.ReadFile(k)
	require.NoError(t, err)
	rs, err := manifest.RenderWith(filepath.Join("overlays", "prod"), map[string][]byte{k: addComponent(t, kb, "../../components/realtime")})
	require.NoError(t, err)
	got += problemsOf(verify.Check(rs, verify.Options{Prod: true, Docs: readme(t)}))
	for _, want := range []string{
		`placeholder: ConfigMap/chatguard-worker-`, `data.CHATGUARD_REDIS_ADDR: "REPLACE_ME.cache.amazonaws.com:6379"`,
		`placeholder: ServiceAccount/chatguard-worker metadata.annotations.eks.amazonaws.com/role-arn: "arn:aws:iam::000000000000:role/chatguard-prod-worker"`,
		`data.CHATGUARD_FALLBACK_BASE_URL: "https://REPLACE_ME/v1"`,
		`placeholder: ExternalSecret/chatguard-worker spec.secretStoreRef.name: "REPLACE_ME"`,
		`image: Deployment/chatguard-worker container worker:`,
		`image: Deployment/chatguard-console container oauth2-proxy:`,
		`spending: Deployment/chatguard-worker CHATGUARD_FLEET_FALLBACK_RPM`,
		`spending: Deployment/chatguard-worker CHATGUARD_PRIMARY_PRICE`,
	} {
		require.Contains(t, got, want)
	}
	// Every REPLACE_ME line of values.env shows up as a problem.
	values, err := os.ReadFile(filepath.Join("overlays", "prod", "values", "values.env"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(values), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") && (strings.Contains(v, "REPLACE_ME") || strings.Contains(v, "000000000000")) {
			require.Contains(t, got, v, "values.env %s is a placeholder deploy-verify does not name", k)
		}
	}
}

// TestDeployVerifyPassesTheFilledSample: the same overlay with every value
// filled in (testdata/prod-values.env) has no problem, and the console and
// the workers run the same pipeline version.
func TestDeployVerifyPassesTheFilledSample(t *testing.T) {
	t.Parallel()
	for _, o := range []string{"prod", "prod" + realtimeSuffix} {
		s := render(t, o)
		r := verify.Check(s, verify.Options{Prod: true, Docs: readme(t)})
		require.Empty(t, r.Problems, "%s: %s", o, problemsOf(r))
		require.Len(t, r.PipelineVersions, 2)
		require.Equal(t, r.PipelineVersions[verify.Worker], r.PipelineVersions[verify.Console])
		require.Regexp(t, `^[0-9a-f]{12}$`, r.PipelineVersions[verify.Worker])
	}
}

// TestDeployVerifyKeepsRealTimeAndTheBatchInStep: turning real time on
// switches the batch to sweep mode and keeps vLLM slots for real time, and
// deploy-verify refuses every render where the two disagree: the trigger
// with a full hourly batch (every room reviewed twice), the trigger with no
// realtime reserve under a fleet limit (the hourly run takes every slot),
// and sweep mode with no trigger (rooms reviewed by neither).
func TestDeployVerifyKeepsRealTimeAndTheBatchInStep(t *testing.T) {
	t.Parallel()
	on := render(t, "prod"+realtimeSuffix)
	require.Equal(t, "true", on.ConfigMaps[verify.Batch].Data["CHATGUARD_SWEEP"], "the component sets sweep mode")
	require.Equal(t, "48", envOf(t, on, container(t, on, "chatguard-worker"))["CHATGUARD_FLEET_PRIMARY_RESERVED_REALTIME"].value, "the reserve of values.env")
	require.Equal(t, "48", envOf(t, on, container(t, on, "chatguard-console"))["CHATGUARD_FLEET_PRIMARY_RESERVED_REALTIME"].value, "the console shares the fleet")
	off := render(t, "prod")
	require.Equal(t, "false", off.ConfigMaps[verify.Batch].Data["CHATGUARD_SWEEP"])
	_, trigger := off.Deployments[verify.Trigger]
	require.False(t, trigger, "no trigger without the component")

	sample, err := os.ReadFile(sampleValues["prod"])
	require.NoError(t, err)
	k := filepath.Join("overlays", "prod", "kustomization.yaml")
	kb, err := os.ReadFile(k)
	require.NoError(t, err)
	fresh := func(t *testing.T, realtime bool) *manifest.Set {
		replace := map[string][]byte{filepath.Join("overlays", "prod", "values", "values.env"): sample}
		if realtime {
			replace[k] = addComponent(t, kb, "../../components/realtime")
		}
		s, err := manifest.RenderWith(filepath.Join("overlays", "prod"), replace)
		require.NoError(t, err)
		return s
	}
	for _, c := range []struct {
		name     string
		realtime bool
		break_   func(t *testing.T, s *manifest.Set)
		want     string
	}{
		{"trigger with a full batch", true, func(t *testing.T, s *manifest.Set) {
			s.ConfigMaps[verify.Batch].Data["CHATGUARD_SWEEP"] = "false"
		}, "realtime: ConfigMap/chatguard-batch CHATGUARD_SWEEP: the trigger runs but the batch does not sweep"},
		{"trigger without a reserve", true, func(t *testing.T, s *manifest.Set) {
			configMapOf(t, s, "chatguard-worker").Data["CHATGUARD_FLEET_PRIMARY_RESERVED_REALTIME"] = "0"
		}, `realtime: Deployment/chatguard-worker CHATGUARD_FLEET_PRIMARY_RESERVED_REALTIME: "0" with a fleet limit of 384`},
		{"sweep without a trigger", false, func(t *testing.T, s *manifest.Set) {
			s.ConfigMaps[verify.Batch].Data["CHATGUARD_SWEEP"] = "true"
		}, "realtime: ConfigMap/chatguard-batch CHATGUARD_SWEEP: the batch sweeps but no trigger runs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := fresh(t, c.realtime)
			require.Empty(t, verify.Check(s, verify.Options{Prod: true, Docs: readme(t)}).Problems, "the unbroken render passes")
			c.break_(t, s)
			require.Contains(t, problemsOf(verify.Check(s, verify.Options{Prod: true, Docs: readme(t)})), c.want)
		})
	}
}

// TestDeployVerifyNamesEachProblem breaks the filled sample one way at a
// time (in the rendered objects, as a hand edit or a stray patch would) and
// expects deploy-verify to name exactly that.
func TestDeployVerifyNamesEachProblem(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		break_ func(t *testing.T, s *manifest.Set)
		want   []string
	}{
		{"console on another Redis", func(t *testing.T, s *manifest.Set) {
			cm := configMapOf(t, s, "chatguard-console")
			cm.Data["CHATGUARD_REDIS_ADDR"] = "other-redis.chatguard.internal:6379"
		}, []string{"disagree: CHATGUARD_REDIS_ADDR: workers", `console "other-redis.chatguard.internal:6379"`}},
		{"console without the fallback", func(t *testing.T, s *manifest.Set) {
			cm := configMapOf(t, s, "chatguard-console")
			cm.Data["CHATGUARD_FALLBACK_BASE_URL"], cm.Data["CHATGUARD_FALLBACK_MODEL"] = "", ""
		}, []string{"disagree: CHATGUARD_FALLBACK_BASE_URL", "pipeline-version: Deployment/chatguard-worker, Deployment/chatguard-console: workers"}},
		{"console on another digest key", func(t *testing.T, s *manifest.Set) {
			c := &s.Deployments["chatguard-console"].Spec.Template.Spec.Containers[1]
			for i := range c.Env {
				if c.Env[i].Name == "CHATGUARD_QUOTE_DIGEST_KEY" {
					c.Env[i].ValueFrom.SecretKeyRef.Name = "chatguard-console"
				}
			}
		}, []string{`disagree: CHATGUARD_QUOTE_DIGEST_KEY: workers read Secret key "chatguard-worker/quote-digest-key", console "chatguard-console/quote-digest-key"`,
			"secret: Deployment/chatguard-console console CHATGUARD_QUOTE_DIGEST_KEY: Secret chatguard-console/quote-digest-key is read but not in deploy/README.md"}},
		{"identity headers from the pod network", func(t *testing.T, s *manifest.Set) {
			configMapOf(t, s, "chatguard-console").Data["CHATGUARD_TRUSTED_PROXIES"] = "127.0.0.1/32,10.0.0.0/8"
		}, []string{`trust: Deployment/chatguard-console CHATGUARD_TRUSTED_PROXIES: "10.0.0.0/8"`}},
		{"image by tag", func(t *testing.T, s *manifest.Set) {
			s.CronJobs["chatguard-purge"].Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "registry.chatguard.internal/chatguard:v1.4.0"
		}, []string{`image: CronJob/chatguard-purge container purge: "registry.chatguard.internal/chatguard:v1.4.0" is not pinned by digest`}},
		{"zero spending cap", func(t *testing.T, s *manifest.Set) {
			configMapOf(t, s, "chatguard-worker").Data["CHATGUARD_FLEET_FALLBACK_TPM"] = "0"
		}, []string{`spending: Deployment/chatguard-worker CHATGUARD_FLEET_FALLBACK_TPM: "0"`}},
		{"free fallback", func(t *testing.T, s *manifest.Set) {
			configMapOf(t, s, "chatguard-worker").Data["CHATGUARD_FALLBACK_PRICE"] = ""
		}, []string{"spending: Deployment/chatguard-worker CHATGUARD_FALLBACK_PRICE: no price"}},
		{"undocumented Secret", func(t *testing.T, s *manifest.Set) {
			c := &s.Deployments["chatguard-worker"].Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "CHATGUARD_X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "chatguard-extra"}, Key: "token"}}})
		}, []string{"secret: Deployment/chatguard-worker worker CHATGUARD_X: Secret chatguard-extra/token is read but not in deploy/README.md"}},
		{"egress to the metadata service", func(t *testing.T, s *manifest.Set) {
			s.NetworkPolicies["chatguard-egress-internet-https"].Spec.Egress[0].To[0].IPBlock.Except = []string{"10.0.0.0/8"}
		}, []string{"egress: NetworkPolicy/chatguard-egress-internet-https egress.0: 0.0.0.0/0 reaches the instance metadata service"}},
		{"chat API in a namespace egress does not reach", func(t *testing.T, s *manifest.Set) {
			for _, name := range []string{"chatguard-worker", "chatguard-console"} {
				configMapOf(t, s, name).Data["CHATGUARD_CHAT_API_URL"] = "http://chat-history.chat-v2.svc.cluster.local:8080"
			}
		}, []string{`egress: Deployment/chatguard-worker CHATGUARD_CHAT_API_URL: "http://chat-history.chat-v2.svc.cluster.local:8080": no egress policy of its pods allows namespace chat-v2 port 8080`,
			`egress: Deployment/chatguard-console CHATGUARD_CHAT_API_URL`}},
		{"no default deny", func(t *testing.T, s *manifest.Set) {
			delete(s.NetworkPolicies, "chatguard-default-deny-egress")
		}, []string{"egress: NetworkPolicy: no default-deny egress policy"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A fresh render per case: the cases edit it.
			b, err := os.ReadFile(sampleValues["prod"])
			require.NoError(t, err)
			s, err := manifest.RenderWith(filepath.Join("overlays", "prod"), map[string][]byte{filepath.Join("overlays", "prod", "values", "values.env"): b})
			require.NoError(t, err)
			c.break_(t, s)
			r := verify.Check(s, verify.Options{Prod: true, Docs: readme(t)})
			got := problemsOf(r)
			require.NotEmpty(t, r.Problems)
			for _, w := range c.want {
				require.Contains(t, got, w)
			}
		})
	}
}

// configMapOf returns the rendered ConfigMap generated as name (its name
// carries a content hash).
func configMapOf(t *testing.T, s *manifest.Set, name string) *corev1.ConfigMap {
	t.Helper()
	for n, cm := range s.ConfigMaps {
		if strings.HasPrefix(n, name+"-") && strings.Count(strings.TrimPrefix(n, name+"-"), "-") == 0 {
			return cm
		}
	}
	t.Fatalf("no ConfigMap %s", name)
	return nil
}

// TestPipelineVersionIsTheBinaries': deploy-verify's pipeline version
// follows the fallback's URL and both models as the binaries' does.
func TestPipelineVersionFollowsTheModels(t *testing.T) {
	t.Parallel()
	base, err := verify.PipelineVersion("http://vllm:8000/v1", "judge", "https://api.test/v1", "managed")
	require.NoError(t, err)
	for _, other := range [][4]string{
		{"http://vllm:8000/v1", "judge-2", "https://api.test/v1", "managed"},
		{"http://vllm:8000/v1", "judge", "https://api.test/v1", "managed-2"},
		{"http://vllm:8000/v1", "judge", "", ""},
	} {
		v, err := verify.PipelineVersion(other[0], other[1], other[2], other[3])
		require.NoError(t, err)
		require.NotEqual(t, base, v, "%v", other)
	}
	same, err := verify.PipelineVersion("http://other-vllm:8000/v1", "judge", "https://other.test/v1", "managed")
	require.NoError(t, err)
	require.Equal(t, base, same, "the pool URLs are not part of the version, only the models")
}

// TestRotatedSecretsReachThePods: in prod every Secret a pod reads is
// synced by an ExternalSecret from the store named in values.env, and every
// Deployment names each Secret it reads in its Reloader annotation, so a
// rotation rolls the pods that hold the old value.
func TestRotatedSecretsReachThePods(t *testing.T) {
	t.Parallel()
	s := render(t, "prod")
	synced := map[string]bool{}
	for _, es := range s.ExternalSecrets {
		require.Equal(t, "aws-secrets-manager", es.Spec.SecretStoreRef.Name, "the store of values.env")
		require.Equal(t, "ClusterSecretStore", es.Spec.SecretStoreRef.Kind)
		require.NotEmpty(t, es.Spec.RefreshInterval)
		synced[es.Spec.Target.Name] = true
	}
	require.True(t, synced["chatguard-batch"], "the batch pod's Secret is synced too")
	for _, n := range manifest.Names(s.Deployments) {
		d := s.Deployments[n]
		reads := map[string]bool{}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					reads[e.ValueFrom.SecretKeyRef.Name] = true
				}
			}
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil {
				reads[v.Secret.SecretName] = true
			}
		}
		reloads := map[string]bool{}
		for _, r := range strings.Split(d.Annotations["secret.reloader.stakater.com/reload"], ",") {
			if r = strings.TrimSpace(r); r != "" {
				reloads[r] = true
			}
		}
		for secret := range reads {
			require.True(t, synced[secret], "Deployment %s reads Secret %s, which no ExternalSecret syncs", n, secret)
			require.True(t, reloads[secret], "Deployment %s reads Secret %s but Reloader does not roll it when it changes", n, secret)
		}
	}
	for _, n := range manifest.Names(s.Jobs) {
		for _, c := range s.Jobs[n].Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					require.True(t, synced[e.ValueFrom.SecretKeyRef.Name], "Job %s reads Secret %s, which no ExternalSecret syncs", n, e.ValueFrom.SecretKeyRef.Name)
				}
			}
		}
	}
}
