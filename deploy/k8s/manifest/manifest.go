// Package manifest renders chatguard's Kustomize overlays in-process and
// decodes every object strictly into its Go type: core Kubernetes kinds into
// k8s.io/api types, the KEDA and Prometheus Operator kinds into the small
// structs of this package. A field that the type does not have is an error,
// so a misspelt or misplaced field fails the tests instead of being dropped
// silently by the API server (or, for a CRD without a strict schema, kept
// and ignored).
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Set is one rendered overlay, its objects by kind and name.
type Set struct {
	Namespaces      map[string]*corev1.Namespace
	ServiceAccounts map[string]*corev1.ServiceAccount
	ConfigMaps      map[string]*corev1.ConfigMap
	Secrets         map[string]*corev1.Secret
	Services        map[string]*corev1.Service
	Deployments     map[string]*appsv1.Deployment
	Jobs            map[string]*batchv1.Job
	CronJobs        map[string]*batchv1.CronJob
	PDBs            map[string]*policyv1.PodDisruptionBudget
	NetworkPolicies map[string]*networkingv1.NetworkPolicy
	Roles           map[string]*rbacv1.Role
	RoleBindings    map[string]*rbacv1.RoleBinding
	ScaledObjects   map[string]*ScaledObject
	TriggerAuths    map[string]*TriggerAuthentication
	PodMonitors     map[string]*PodMonitor
	PrometheusRules map[string]*PrometheusRule
	ExternalSecrets map[string]*ExternalSecret
	// Order lists every object as "Kind/name" in rendered order.
	Order []string
	// YAML holds each object as rendered, by "Kind/name".
	YAML map[string][]byte
}

// Render builds the kustomization in dir (a path on disk) and decodes every
// object strictly. It fails on the first object of an unknown kind or with
// an unknown field, and on two objects of one kind with one name.
func Render(dir string) (*Set, error) {
	return RenderWith(dir, nil)
}

// RenderWith is Render with some files read from replace instead of the
// disk, keyed by their path (as given, relative to the working directory or
// absolute): how an overlay is rendered with another values.env without
// copying it.
func RenderWith(dir string, replace map[string][]byte) (*Set, error) {
	var fsys filesys.FileSystem = filesys.MakeFsOnDisk()
	if len(replace) > 0 {
		r := replacingFS{FileSystem: fsys, files: map[string][]byte{}}
		for p, b := range replace {
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, fmt.Errorf("manifest: %w", err)
			}
			r.files[abs] = b
		}
		fsys = r
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("manifest: kustomize build %s: %w", dir, err)
	}
	s := &Set{
		Namespaces: map[string]*corev1.Namespace{}, ServiceAccounts: map[string]*corev1.ServiceAccount{},
		ConfigMaps: map[string]*corev1.ConfigMap{}, Secrets: map[string]*corev1.Secret{},
		Services: map[string]*corev1.Service{}, Deployments: map[string]*appsv1.Deployment{},
		Jobs: map[string]*batchv1.Job{}, CronJobs: map[string]*batchv1.CronJob{}, PDBs: map[string]*policyv1.PodDisruptionBudget{},
		NetworkPolicies: map[string]*networkingv1.NetworkPolicy{}, ScaledObjects: map[string]*ScaledObject{},
		Roles: map[string]*rbacv1.Role{}, RoleBindings: map[string]*rbacv1.RoleBinding{},
		TriggerAuths: map[string]*TriggerAuthentication{}, PodMonitors: map[string]*PodMonitor{},
		PrometheusRules: map[string]*PrometheusRule{}, ExternalSecrets: map[string]*ExternalSecret{},
		YAML: map[string][]byte{},
	}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("manifest: %s: %w", r.CurId(), err)
		}
		if err := s.add(r.GetApiVersion(), r.GetKind(), r.GetName(), y); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// replacingFS reads some files from memory and the rest from the disk.
type replacingFS struct {
	filesys.FileSystem
	files map[string][]byte // by absolute path
}

// ReadFile returns the replacement of path, if any.
func (r replacingFS) ReadFile(path string) ([]byte, error) {
	if abs, err := filepath.Abs(path); err == nil {
		if b, ok := r.files[abs]; ok {
			return append([]byte(nil), b...), nil
		}
	}
	return r.FileSystem.ReadFile(path)
}

func (s *Set) add(apiVersion, kind, name string, y []byte) error {
	id := kind + "/" + name
	var err error
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		err = put(s.Namespaces, name, y)
	case "v1 ServiceAccount":
		err = put(s.ServiceAccounts, name, y)
	case "v1 ConfigMap":
		err = put(s.ConfigMaps, name, y)
	case "v1 Secret":
		err = put(s.Secrets, name, y)
	case "v1 Service":
		err = put(s.Services, name, y)
	case "apps/v1 Deployment":
		err = put(s.Deployments, name, y)
	case "batch/v1 Job":
		err = put(s.Jobs, name, y)
	case "batch/v1 CronJob":
		err = put(s.CronJobs, name, y)
	case "policy/v1 PodDisruptionBudget":
		err = put(s.PDBs, name, y)
	case "networking.k8s.io/v1 NetworkPolicy":
		err = put(s.NetworkPolicies, name, y)
	case "rbac.authorization.k8s.io/v1 Role":
		err = put(s.Roles, name, y)
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		err = put(s.RoleBindings, name, y)
	case "keda.sh/v1alpha1 ScaledObject":
		err = put(s.ScaledObjects, name, y)
	case "keda.sh/v1alpha1 TriggerAuthentication":
		err = put(s.TriggerAuths, name, y)
	case "monitoring.coreos.com/v1 PodMonitor":
		err = put(s.PodMonitors, name, y)
	case "monitoring.coreos.com/v1 PrometheusRule":
		err = put(s.PrometheusRules, name, y)
	case "external-secrets.io/v1 ExternalSecret":
		err = put(s.ExternalSecrets, name, y)
	default:
		err = fmt.Errorf("kind %s %s has no decoder here: add its type to package manifest", apiVersion, kind)
	}
	if err != nil {
		return fmt.Errorf("manifest: %s: %w", id, err)
	}
	s.Order = append(s.Order, id)
	s.YAML[id] = y
	return nil
}

// put decodes y strictly into a new T stored under name.
func put[T any](m map[string]*T, name string, y []byte) error {
	if _, dup := m[name]; dup {
		return fmt.Errorf("defined twice")
	}
	v := new(T)
	if err := DecodeStrict(y, v); err != nil {
		return err
	}
	m[name] = v
	return nil
}

// DecodeStrict decodes one YAML document into v, failing on any field that
// v's type does not have and on trailing data.
func DecodeStrict(y []byte, v any) error {
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("decode: trailing data")
	}
	return nil
}

// Names returns the keys of m in order, for stable test output.
func Names[T any](m map[string]*T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
