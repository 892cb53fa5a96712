package k8s_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/chatguard/chatguard/deploy/k8s/manifest"
)

// operatorDocs are the documents that give operators kubectl commands to
// copy, relative to this directory: every page of docs/ (the operations
// pages among them) and the deploy README.
func operatorDocs(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(repoRoot + "/docs/*.md")
	require.NoError(t, err)
	require.Contains(t, pages, repoRoot+"/docs/install.md", "the install page gives the upgrade's commands")
	return append(pages, "../README.md")
}

var (
	// applyCmdRe is `kubectl apply -k PATH [-l key=value]`.
	applyCmdRe = regexp.MustCompile("kubectl apply -k ([^\\s`]+)(?:\\s+-l\\s+([^\\s=`]+)=([^\\s`]+))?")
	// waitCmdRe is `kubectl -n NS wait … kind/name` and `kubectl -n NS
	// delete job NAME`.
	waitCmdRe   = regexp.MustCompile(`kubectl -n (\S+) wait [^\n]*?\b(job)/([a-z0-9-]+)`)
	deleteCmdRe = regexp.MustCompile(`kubectl -n (\S+) delete (job) ([a-z0-9-]+)`)
)

// documentedApply is one `kubectl apply -k` of a document, at offset at.
type documentedApply struct {
	at                   int
	path, label, value   string
	overlays, unresolved []string // render names; paths that are no overlay
	line                 string
}

// TestDocumentedKubectlCommandsMatchTheManifests reads the kubectl commands
// the operator documents give and checks them against the rendered
// manifests: every `apply -k` names a deployable kustomization (an
// overlay or an overlay's migrate), a `-l` selector picks at least one of
// its objects, and every Job a command waits for or deletes is one the
// nearest apply before it creates, in that namespace. A command that
// applies nothing and then waits for a Job that never comes fails here,
// not in an upgrade.
func TestDocumentedKubectlCommandsMatchTheManifests(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, doc := range operatorDocs(t) {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := string(b)
		applies := documentedApplies(text)
		for _, a := range applies {
			require.Empty(t, a.unresolved, "%s: %q applies %s, which is not a deployable kustomization (overlays/<env> or overlays/<env>/migrate)", doc, a.line, a.path)
			for _, o := range a.overlays {
				objs := selected(t, render(t, o), a.label, a.value)
				require.NotEmpty(t, objs, "%s: %q selects nothing in %s", doc, a.line, o)
				checked++
			}
		}
		// A wait is for what the nearest apply before it created.
		for _, m := range waitCmdRe.FindAllStringSubmatchIndex(text, -1) {
			ns, kind, name := text[m[2]:m[3]], text[m[4]:m[5]], text[m[6]:m[7]]
			line := text[m[0]:m[1]]
			var before *documentedApply
			for i := range applies {
				if applies[i].at < m[0] {
					before = &applies[i]
				}
			}
			require.NotNil(t, before, "%s: %q waits with no apply before it", doc, line)
			for _, o := range before.overlays {
				meta, ok := selected(t, render(t, o), before.label, before.value)["Job/"+name]
				require.True(t, ok, "%s: %q: %s is not among what the apply before it (%s) creates in %s", doc, line, kind+"/"+name, before.line, o)
				if !placeholder(ns) {
					require.Equal(t, ns, meta.Namespace, "%s: %q: the Job is in namespace %s", doc, line, meta.Namespace)
				}
				checked++
			}
		}
		// A delete is of something one of the document's applies creates.
		for _, m := range deleteCmdRe.FindAllStringSubmatchIndex(text, -1) {
			ns, name, line := text[m[2]:m[3]], text[m[6]:m[7]], text[m[0]:m[1]]
			found := false
			for _, a := range applies {
				for _, o := range a.overlays {
					if meta, ok := selected(t, render(t, o), a.label, a.value)["Job/"+name]; ok && (placeholder(ns) || meta.Namespace == ns) {
						found = true
					}
				}
			}
			require.True(t, found, "%s: %q deletes a Job that none of the document's applies creates", doc, line)
			checked++
		}
	}
	require.Positive(t, checked, "the documents give kubectl commands to check")
}

// documentedApplies finds the `kubectl apply -k` commands of text, each
// path resolved to the render names it means ("<env>" is every overlay).
func documentedApplies(text string) []documentedApply {
	var out []documentedApply
	for _, m := range applyCmdRe.FindAllStringSubmatchIndex(text, -1) {
		a := documentedApply{at: m[0], path: text[m[2]:m[3]], line: text[m[0]:m[1]]}
		if m[4] >= 0 {
			a.label, a.value = text[m[4]:m[5]], text[m[6]:m[7]]
		}
		p := a.path
		for _, prefix := range []string{"deploy/k8s/", "k8s/"} {
			p = strings.TrimPrefix(p, prefix)
		}
		rest, ok := strings.CutPrefix(filepath.ToSlash(filepath.Clean(p)), "overlays/")
		envs := overlays
		env, sub, _ := strings.Cut(rest, "/")
		if env != "<env>" {
			envs = []string{env}
		}
		for _, e := range envs {
			switch {
			case !ok || !slices.Contains(overlays, e) || (sub != "" && sub != "migrate"):
				a.unresolved = append(a.unresolved, a.path)
			case sub == "":
				a.overlays = append(a.overlays, e)
			default:
				a.overlays = append(a.overlays, e+"/migrate")
			}
		}
		out = append(out, a)
	}
	return out
}

// placeholder reports a namespace written as one ("<namespace>": each
// overlay's own), which any namespace fills.
func placeholder(ns string) bool { return strings.HasPrefix(ns, "<") && strings.HasSuffix(ns, ">") }

// objectMeta is what the checks read of a rendered object.
type objectMeta struct {
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels"`
}

// selected returns the objects of s, by "Kind/name", that carry the label
// key=value (every object when key is empty).
func selected(t *testing.T, s *manifest.Set, key, value string) map[string]objectMeta {
	t.Helper()
	out := map[string]objectMeta{}
	for _, id := range s.Order {
		var obj struct {
			Metadata objectMeta `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal(s.YAML[id], &obj), id)
		if key == "" || obj.Metadata.Labels[key] == value {
			out[id] = obj.Metadata
		}
	}
	return out
}
