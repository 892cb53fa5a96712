// Package verify checks a rendered overlay for what `kubectl apply` would
// accept and the cluster would then get wrong: placeholder values left from
// the template, images not pinned by digest, a console that disagrees with
// the workers on a dependency they share (and so on the pipeline version),
// a Secret the deploy docs do not list, spending caps left off in prod,
// identity headers trusted from beyond loopback, egress that reaches the
// instance metadata service, and egress that does not reach the in-cluster
// model pool or chat API. `make deploy-verify` runs it through
// cmd/deploy-verify.
package verify

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/chatguard/chatguard/deploy/k8s/manifest"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/review"
	"github.com/chatguard/chatguard/stages"
)

// Problem is one thing wrong with a render.
type Problem struct {
	Check string // placeholder, image, disagree, pipeline-version, secret, spending, trust, egress, realtime
	Where string // Kind/name and the field
	What  string
}

func (p Problem) String() string { return p.Check + ": " + p.Where + ": " + p.What }

// Options say what the render is checked against.
type Options struct {
	// Prod requires the spending caps and prices.
	Prod bool
	// Docs is deploy/README.md: its Secrets table lists every Secret and
	// key a pod may read.
	Docs string
}

// Report is the outcome of Check.
type Report struct {
	Problems []Problem
	// PipelineVersions are the workers' and the console's, by Deployment.
	PipelineVersions map[string]string
}

// The Deployments whose shared configuration must agree.
const (
	Worker  = "chatguard-worker"
	Console = "chatguard-console"
)

// Shared are the settings the console and the workers must have alike: the
// same Redis (stop signals, fleet leases, live streams), the same chat API,
// the same model pools (the pipeline version), the same image gate and
// pseudonymisation (the same verdict for the same chat), the same prices
// (cost per review), the same fleet limits and budgets, region and feedback
// queue, and the same account-history window (what the stages are shown).
var Shared = []string{
	"AWS_REGION", "CHATGUARD_FEEDBACK_QUEUE_URL",
	"CHATGUARD_REDIS_ADDR", "CHATGUARD_REDIS_USERNAME", "CHATGUARD_REDIS_DB", "CHATGUARD_REDIS_TLS",
	"CHATGUARD_REDIS_CA_FILE", "CHATGUARD_REDIS_SERVER_NAME",
	"CHATGUARD_STOP_CHANNEL", "CHATGUARD_STOP_KEY_PREFIX",
	"CHATGUARD_FLEET_PRIMARY_LIMIT", "CHATGUARD_FLEET_REPLICAS", "CHATGUARD_FLEET_KEY_PREFIX",
	"CHATGUARD_CHAT_API_URL",
	"CHATGUARD_PRIMARY_BASE_URL", "CHATGUARD_PRIMARY_MODEL",
	"CHATGUARD_FALLBACK_BASE_URL", "CHATGUARD_FALLBACK_MODEL",
	"CHATGUARD_IMAGE_HOSTS", "CHATGUARD_IMAGE_INLINE", "CHATGUARD_IMAGE_MAX_BYTES",
	"CHATGUARD_PRIMARY_PSEUDONYMIZE", "CHATGUARD_FALLBACK_PSEUDONYMIZE",
	"CHATGUARD_PRIMARY_PRICE", "CHATGUARD_FALLBACK_PRICE", "CHATGUARD_DAILY_BUDGET",
	"CHATGUARD_FLEET_FALLBACK_RPM", "CHATGUARD_FLEET_FALLBACK_TPM",
	"CHATGUARD_ACCOUNT_HISTORY",
}

// SharedSecrets must come from the same Secret key in both.
var SharedSecrets = []string{
	"CHATGUARD_QUOTE_DIGEST_KEY", "CHATGUARD_REDIS_PASSWORD", "CHATGUARD_PRIMARY_API_KEY", "CHATGUARD_FALLBACK_API_KEY",
}

// placeholder matches what the templates use for a value to fill in, and
// the documentation names and account that are never real.
var placeholder = regexp.MustCompile(`(?i)REPLACE_ME|CHANGE_?ME|set-from-(values|configmap)|\bexample\.(com|org|net)\b|\.example(\.|:|/|$)|\b0{12}\b`)

var digestRef = regexp.MustCompile(`^[a-z0-9][a-z0-9.:-]*(/[a-z0-9._-]+)+@sha256:[0-9a-f]{64}$`)

// Check runs every check on s.
func Check(s *manifest.Set, o Options) Report {
	r := Report{PipelineVersions: map[string]string{}}
	r.Problems = append(r.Problems, placeholders(s)...)
	r.Problems = append(r.Problems, images(s)...)
	r.Problems = append(r.Problems, agreement(s, &r)...)
	r.Problems = append(r.Problems, secrets(s, o.Docs)...)
	if o.Prod {
		r.Problems = append(r.Problems, spending(s)...)
	}
	r.Problems = append(r.Problems, realtime(s)...)
	r.Problems = append(r.Problems, trust(s)...)
	r.Problems = append(r.Problems, egress(s)...)
	r.Problems = append(r.Problems, reachable(s)...)
	return r
}

// Trigger is the real-time trigger's Deployment, present where an overlay
// lists components/realtime.
const Trigger = "chatguard-trigger"

// Batch is the ConfigMap the Airflow DAG's batch pods read.
const Batch = "chatguard-batch"

// realtime checks that real time and the hourly batch agree: with the
// trigger running, the batch must sweep (else every room is reviewed twice,
// by real time and in full by the batch) and the workers must keep vLLM
// slots for real-time calls wherever a fleet limit is set (else the hourly
// run takes every slot and real time waits behind it); without the
// trigger, the batch must not sweep (nothing would review the rooms).
func realtime(s *manifest.Set) []Problem {
	batch, ok := s.ConfigMaps[Batch]
	if !ok {
		return nil
	}
	sweep, _ := strconv.ParseBool(batch.Data["CHATGUARD_SWEEP"])
	_, on := s.Deployments[Trigger]
	where := "ConfigMap/" + Batch + " CHATGUARD_SWEEP"
	switch {
	case on && !sweep:
		return []Problem{{"realtime", where, "the trigger runs but the batch does not sweep: every room would be reviewed twice (list components/realtime last; do not override CHATGUARD_SWEEP)"}}
	case !on && sweep:
		return []Problem{{"realtime", where, "the batch sweeps but no trigger runs: rooms would be reviewed by neither (list components/realtime, or set it false)"}}
	case !on:
		return nil
	}
	w := workerEnv(s)
	limit, _ := strconv.Atoi(w["CHATGUARD_FLEET_PRIMARY_LIMIT"].value)
	reserved, err := strconv.Atoi(w["CHATGUARD_FLEET_PRIMARY_RESERVED_REALTIME"].value)
	if limit > 0 && (err != nil || reserved <= 0) {
		return []Problem{{"realtime", "Deployment/" + Worker + " CHATGUARD_FLEET_PRIMARY_RESERVED_REALTIME",
			fmt.Sprintf("%q with a fleet limit of %d: real time needs slots the hourly sweep cannot take (FLEET_PRIMARY_RESERVED_REALTIME in values.env)", w["CHATGUARD_FLEET_PRIMARY_RESERVED_REALTIME"].value, limit)}}
	}
	return nil
}

// workerEnv is the worker container's environment, empty without one.
func workerEnv(s *manifest.Set) map[string]setting {
	d, ok := s.Deployments[Worker]
	if !ok {
		return map[string]setting{}
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "worker" {
			return Env(s, c)
		}
	}
	return map[string]setting{}
}

// placeholders walks every rendered object.
func placeholders(s *manifest.Set) []Problem {
	var out []Problem
	for _, id := range s.Order {
		var doc any
		if err := yaml.Unmarshal(s.YAML[id], &doc); err != nil {
			out = append(out, Problem{"placeholder", id, "cannot read: " + err.Error()})
			continue
		}
		walk(doc, "", func(path, v string) {
			if placeholder.MatchString(v) {
				out = append(out, Problem{"placeholder", id + " " + path, strconv.Quote(v)})
			}
		})
	}
	return out
}

func walk(v any, path string, f func(path, v string)) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walk(t[k], strings.TrimPrefix(path+"."+k, "."), f)
		}
	case []any:
		for i, e := range t {
			// Containers and env entries are named: say which.
			name := strconv.Itoa(i)
			if m, ok := e.(map[string]any); ok {
				if n, ok := m["name"].(string); ok {
					name = "[name=" + n + "]"
				}
			}
			walk(e, path+"."+name, f)
		}
	case string:
		f(path, t)
	}
}

// pod is one pod template.
type pod struct {
	owner string
	spec  *corev1.PodSpec
}

func pods(s *manifest.Set) []pod {
	var out []pod
	for _, n := range manifest.Names(s.Deployments) {
		out = append(out, pod{"Deployment/" + n, &s.Deployments[n].Spec.Template.Spec})
	}
	for _, n := range manifest.Names(s.Jobs) {
		out = append(out, pod{"Job/" + n, &s.Jobs[n].Spec.Template.Spec})
	}
	for _, n := range manifest.Names(s.CronJobs) {
		out = append(out, pod{"CronJob/" + n, &s.CronJobs[n].Spec.JobTemplate.Spec.Template.Spec})
	}
	return out
}

func images(s *manifest.Set) []Problem {
	var out []Problem
	for _, p := range pods(s) {
		for _, c := range append(append([]corev1.Container(nil), p.spec.InitContainers...), p.spec.Containers...) {
			if !digestRef.MatchString(c.Image) {
				out = append(out, Problem{"image", p.owner + " container " + c.Name, fmt.Sprintf("%q is not pinned by digest (REGISTRY/REPO@sha256:<64 hex>)", c.Image)})
			}
		}
	}
	return out
}

// setting is one variable of a container: a value, or a Secret's key.
type setting struct {
	value  string
	secret string // "name/key" when from a Secret
}

// Env resolves a container's environment against the rendered ConfigMaps;
// a missing ConfigMap contributes nothing.
func Env(s *manifest.Set, c corev1.Container) map[string]setting {
	out := map[string]setting{}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		if cm, ok := s.ConfigMaps[ef.ConfigMapRef.Name]; ok {
			for k, v := range cm.Data {
				out[ef.Prefix+k] = setting{value: v}
			}
		}
	}
	for _, e := range c.Env {
		st := setting{value: e.Value}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			st = setting{secret: e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key}
		}
		out[e.Name] = st
	}
	return out
}

// mainContainer returns the container of a Deployment named like its component
// (worker, console), or its only container.
func mainContainer(s *manifest.Set, deployment string) (corev1.Container, bool) {
	d, ok := s.Deployments[deployment]
	if !ok {
		return corev1.Container{}, false
	}
	cs := d.Spec.Template.Spec.Containers
	want := strings.TrimPrefix(deployment, "chatguard-")
	for _, c := range cs {
		if c.Name == want {
			return c, true
		}
	}
	if len(cs) == 1 {
		return cs[0], true
	}
	return corev1.Container{}, false
}

func agreement(s *manifest.Set, r *Report) []Problem {
	var out []Problem
	wc, okW := mainContainer(s, Worker)
	cc, okC := mainContainer(s, Console)
	if !okW || !okC {
		return []Problem{{"disagree", "Deployment/" + Worker + ", Deployment/" + Console, "the overlay must hold both the workers and the console"}}
	}
	w, c := Env(s, wc), Env(s, cc)
	for _, k := range Shared {
		wv, wok := w[k]
		cv, cok := c[k]
		switch {
		case !wok && !cok:
		case !wok || !cok:
			out = append(out, Problem{"disagree", k, fmt.Sprintf("set on the %s only", map[bool]string{true: "workers", false: "console"}[wok])})
		case wv.value != cv.value:
			out = append(out, Problem{"disagree", k, fmt.Sprintf("workers %q, console %q", wv.value, cv.value)})
		}
	}
	for _, k := range SharedSecrets {
		if w[k].secret != c[k].secret {
			out = append(out, Problem{"disagree", k, fmt.Sprintf("workers read Secret key %q, console %q", w[k].secret, c[k].secret)})
		}
	}
	var versions []string
	for _, d := range []struct {
		name string
		env  map[string]setting
	}{{Worker, w}, {Console, c}} {
		v, err := PipelineVersion(d.env["CHATGUARD_PRIMARY_BASE_URL"].value, d.env["CHATGUARD_PRIMARY_MODEL"].value,
			d.env["CHATGUARD_FALLBACK_BASE_URL"].value, d.env["CHATGUARD_FALLBACK_MODEL"].value)
		if err != nil {
			out = append(out, Problem{"pipeline-version", "Deployment/" + d.name, err.Error()})
			continue
		}
		r.PipelineVersions[d.name] = v
		versions = append(versions, v)
	}
	if len(versions) == 2 && versions[0] != versions[1] {
		out = append(out, Problem{"pipeline-version", "Deployment/" + Worker + ", Deployment/" + Console,
			fmt.Sprintf("workers %s, console %s: on-demand verdicts would not share the workers' review keys", versions[0], versions[1])})
	}
	return append(out, sweepAgreement(s, r)...)
}

// BatchConfigMap is the batch pod's ConfigMap, which the Airflow DAG reads.
const BatchConfigMap = "chatguard-batch"

// sweepAgreement checks that the batch names the workers' pipeline version
// by their model names: a sweep under another version would count no real
// time verdict as coverage and publish every room every hour.
func sweepAgreement(s *manifest.Set, r *Report) []Problem {
	cm, ok := s.ConfigMaps[BatchConfigMap]
	wv, okW := r.PipelineVersions[Worker]
	if !ok || !okW {
		return nil
	}
	// The batch's version is the one its --primary-model and
	// --fallback-model give (cmd/batch: stages.Fingerprint).
	bv := stages.Fingerprint(cm.Data["CHATGUARD_PRIMARY_MODEL"], cm.Data["CHATGUARD_FALLBACK_MODEL"])
	if bv == wv {
		return nil
	}
	return []Problem{{"pipeline-version", "ConfigMap/" + BatchConfigMap,
		fmt.Sprintf("batch %s, workers %s: a sweep would count no real-time verdict as coverage (set the workers' model names; the fallback model only where they have a fallback pool)", bv, wv)}}
}

// PipelineVersion is the version a binary stores with its verdicts for
// these model pools, computed by the production router and reviewer
// exactly as the worker and the console build them (an empty fallback URL
// disables the fallback). It fails when the router would refuse the pools.
func PipelineVersion(primaryURL, primaryModel, fallbackURL, fallbackModel string) (string, error) {
	cfg := llm.Config{
		Primary:  llm.PoolConfig{BaseURL: primaryURL, Model: primaryModel, MaxConcurrency: 1},
		Fallback: llm.PoolConfig{BaseURL: fallbackURL, Model: fallbackModel, MaxConcurrency: 1},
	}
	router, err := llm.New(cfg, nil)
	if err != nil {
		return "", fmt.Errorf("the model pools are refused: %w", err)
	}
	rv, err := review.New(review.Config{}, router, nil, nil, nil)
	if err != nil {
		return "", err
	}
	return rv.PipelineVersion(), nil
}

// secretsRow is a row of deploy/README.md's Secrets table: | `name` | key
// column |; the key column is `key` for one key, or prose for a Secret
// mounted whole.
var (
	secretsRow = regexp.MustCompile("(?m)^\\| `(chatguard-[a-z0-9-]+)` \\| ([^|]*) \\|")
	secretsKey = regexp.MustCompile("^`([A-Za-z0-9._-]+)`$")
)

func secrets(s *manifest.Set, docs string) []Problem {
	documented := map[string]bool{} // "name/key" and "name"
	for _, m := range secretsRow.FindAllStringSubmatch(docs, -1) {
		documented[m[1]] = true
		if k := secretsKey.FindStringSubmatch(strings.TrimSpace(m[2])); k != nil {
			documented[m[1]+"/"+k[1]] = true
		}
	}
	var out []Problem
	seen := map[string]bool{}
	report := func(ref, where string) {
		if !documented[ref] && !seen[ref] {
			seen[ref] = true
			out = append(out, Problem{"secret", where, fmt.Sprintf("Secret %s is read but not in deploy/README.md's Secrets table", ref)})
		}
	}
	for _, p := range pods(s) {
		for _, c := range p.spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					report(e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key, p.owner+" "+c.Name+" "+e.Name)
				}
			}
		}
		for _, v := range p.spec.Volumes {
			if v.Secret == nil {
				continue
			}
			if len(v.Secret.Items) == 0 {
				report(v.Secret.SecretName, p.owner+" volume "+v.Name)
			}
			for _, it := range v.Secret.Items {
				report(v.Secret.SecretName+"/"+it.Key, p.owner+" volume "+v.Name)
			}
		}
	}
	for _, n := range manifest.Names(s.ExternalSecrets) {
		report(s.ExternalSecrets[n].Spec.Target.Name, "ExternalSecret/"+n)
	}
	return out
}

// spending requires the caps and prices of a prod render.
func spending(s *manifest.Set) []Problem {
	wc, ok := mainContainer(s, Worker)
	if !ok {
		return nil
	}
	w := Env(s, wc)
	var out []Problem
	for _, k := range []string{"CHATGUARD_FLEET_PRIMARY_LIMIT", "CHATGUARD_FLEET_FALLBACK_RPM", "CHATGUARD_FLEET_FALLBACK_TPM"} {
		n, err := strconv.ParseInt(strings.TrimSpace(w[k].value), 10, 64)
		if err != nil || n <= 0 {
			out = append(out, Problem{"spending", "Deployment/" + Worker + " " + k, fmt.Sprintf("%q: a spending cap must be a whole number above 0 in prod", w[k].value)})
		}
	}
	pools := []struct{ price, url string }{{"CHATGUARD_PRIMARY_PRICE", "CHATGUARD_PRIMARY_BASE_URL"}, {"CHATGUARD_FALLBACK_PRICE", "CHATGUARD_FALLBACK_BASE_URL"}}
	for _, p := range pools {
		v := w[p.price].value
		if w[p.url].value == "" {
			continue
		}
		pr, err := llm.ParsePrice(v)
		switch {
		case err != nil:
			out = append(out, Problem{"spending", "Deployment/" + Worker + " " + p.price, fmt.Sprintf("%q: %v", v, err)})
		case pr == (llm.Price{}):
			out = append(out, Problem{"spending", "Deployment/" + Worker + " " + p.price, "no price: every call of this pool would be recorded as free"})
		}
	}
	return out
}

// trust refuses identity headers trusted from anything but loopback.
func trust(s *manifest.Set) []Problem {
	cc, ok := mainContainer(s, Console)
	if !ok {
		return nil
	}
	v := Env(s, cc)["CHATGUARD_TRUSTED_PROXIES"].value
	var out []Problem
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			if a, aerr := netip.ParseAddr(f); aerr == nil {
				p, err = a.Prefix(a.BitLen())
			}
		}
		if err != nil || !p.Addr().IsLoopback() || (p.Addr().Is4() && p.Bits() < 8) {
			out = append(out, Problem{"trust", "Deployment/" + Console + " CHATGUARD_TRUSTED_PROXIES",
				fmt.Sprintf("%q: identity headers may be trusted from loopback only (the oauth2-proxy container of the pod)", f)})
		}
	}
	return out
}

var imds = netip.MustParseAddr("169.254.169.254")

// egress requires a default deny and no rule that reaches the instance
// metadata service.
func egress(s *manifest.Set) []Problem {
	var out []Problem
	deny := false
	for _, n := range manifest.Names(s.NetworkPolicies) {
		np := s.NetworkPolicies[n]
		isEgress := false
		for _, t := range np.Spec.PolicyTypes {
			isEgress = isEgress || t == "Egress"
		}
		if !isEgress {
			continue
		}
		if len(np.Spec.PodSelector.MatchLabels) == 0 && len(np.Spec.PodSelector.MatchExpressions) == 0 && len(np.Spec.Egress) == 0 {
			deny = true
		}
		for i, rule := range np.Spec.Egress {
			if len(rule.To) == 0 {
				out = append(out, Problem{"egress", fmt.Sprintf("NetworkPolicy/%s egress.%d", n, i), "a rule without peers allows every address, the metadata service included"})
			}
			for _, peer := range rule.To {
				if peer.IPBlock == nil {
					continue
				}
				p, err := netip.ParsePrefix(peer.IPBlock.CIDR)
				if err != nil {
					out = append(out, Problem{"egress", fmt.Sprintf("NetworkPolicy/%s egress.%d", n, i), fmt.Sprintf("cidr %q: %v", peer.IPBlock.CIDR, err)})
					continue
				}
				if !p.Contains(imds) {
					continue
				}
				cut := false
				for _, e := range peer.IPBlock.Except {
					if ep, err := netip.ParsePrefix(e); err == nil && ep.Contains(imds) {
						cut = true
					}
				}
				if !cut {
					out = append(out, Problem{"egress", fmt.Sprintf("NetworkPolicy/%s egress.%d", n, i), fmt.Sprintf("%s reaches the instance metadata service %s: add it to except", p, imds)})
				}
			}
		}
	}
	if !deny {
		out = append(out, Problem{"egress", "NetworkPolicy", "no default-deny egress policy (podSelector {} and policyTypes [Egress]): pods reach the metadata service, the VPC and the internet"})
	}
	return out
}

// reachable checks that the egress policies let the workers and the
// console reach the in-cluster services their URLs name
// (http://NAME.NAMESPACE.svc.cluster.local:PORT): a policy that names
// another namespace or port would leave them talking to nothing.
func reachable(s *manifest.Set) []Problem {
	var out []Problem
	for _, d := range []string{Worker, Console} {
		c, ok := mainContainer(s, d)
		if !ok {
			continue
		}
		env := Env(s, c)
		podLabels := labels.Set(s.Deployments[d].Spec.Template.Labels)
		for _, k := range []string{"CHATGUARD_PRIMARY_BASE_URL", "CHATGUARD_CHAT_API_URL"} {
			u, err := url.Parse(env[k].value)
			if err != nil || u.Host == "" {
				continue
			}
			parts := strings.Split(u.Hostname(), ".")
			if len(parts) < 3 || parts[2] != "svc" {
				continue // outside the cluster: the address rules apply
			}
			ns, port := parts[1], u.Port()
			if port == "" {
				port = map[string]string{"https": "443"}[u.Scheme]
				if port == "" {
					port = "80"
				}
			}
			if !allows(s, podLabels, ns, port) {
				out = append(out, Problem{"egress", "Deployment/" + d + " " + k,
					fmt.Sprintf("%q: no egress policy of its pods allows namespace %s port %s", env[k].value, ns, port)})
			}
		}
	}
	return out
}

// allows reports whether an egress policy selecting pods of podLabels lets
// them reach namespace ns on port.
func allows(s *manifest.Set, podLabels labels.Set, ns, port string) bool {
	for _, n := range manifest.Names(s.NetworkPolicies) {
		np := s.NetworkPolicies[n]
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(podLabels) {
			continue
		}
		for _, rule := range np.Spec.Egress {
			portOK := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				portOK = portOK || p.Port == nil || p.Port.String() == port
			}
			if !portOK {
				continue
			}
			for _, peer := range rule.To {
				if peer.NamespaceSelector != nil && peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == ns {
					return true
				}
			}
		}
	}
	return false
}

// String renders the report for a terminal.
func (r Report) String() string {
	var b strings.Builder
	for _, p := range r.Problems {
		b.WriteString(p.String() + "\n")
	}
	vs, _ := json.Marshal(r.PipelineVersions)
	fmt.Fprintf(&b, "pipeline versions: %s\n", vs)
	return b.String()
}
