package manifest

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The custom resources chatguard uses, with exactly the fields it sets or
// may set: KEDA 2.13+ (keda.sh/v1alpha1) and the Prometheus Operator
// (monitoring.coreos.com/v1). A field missing here fails decoding, which is
// the point: add it after checking the CRD's documentation.

// ScaledObject is KEDA's ScaledObject.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ScaledObjectSpec `json:"spec"`
}

// ScaledObjectSpec is the spec of a ScaledObject.
type ScaledObjectSpec struct {
	ScaleTargetRef   ScaleTarget    `json:"scaleTargetRef"`
	PollingInterval  *int32         `json:"pollingInterval,omitempty"`
	CooldownPeriod   *int32         `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount *int32         `json:"idleReplicaCount,omitempty"`
	MinReplicaCount  *int32         `json:"minReplicaCount,omitempty"`
	MaxReplicaCount  *int32         `json:"maxReplicaCount,omitempty"`
	Advanced         *Advanced      `json:"advanced,omitempty"`
	Triggers         []ScaleTrigger `json:"triggers"`
	Fallback         *Fallback      `json:"fallback,omitempty"`
}

// ScaleTarget names the workload a ScaledObject scales.
type ScaleTarget struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
}

// Advanced holds the HPA settings KEDA passes through.
type Advanced struct {
	RestoreToOriginalReplicaCount bool           `json:"restoreToOriginalReplicaCount,omitempty"`
	HorizontalPodAutoscalerConfig *HPAConfig     `json:"horizontalPodAutoscalerConfig,omitempty"`
	ScalingModifiers              map[string]any `json:"scalingModifiers,omitempty"`
}

// HPAConfig is the HPA KEDA creates.
type HPAConfig struct {
	Name     string                                         `json:"name,omitempty"`
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// Fallback is the replica count KEDA holds when a scaler fails.
type Fallback struct {
	FailureThreshold int32 `json:"failureThreshold"`
	Replicas         int32 `json:"replicas"`
}

// ScaleTrigger is one trigger; Metadata is the scaler's own settings (for
// aws-sqs-queue: queueURL, queueLength, awsRegion, scaleOnInFlight, ...).
type ScaleTrigger struct {
	Type              string            `json:"type"`
	Name              string            `json:"name,omitempty"`
	MetricType        string            `json:"metricType,omitempty"`
	UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string `json:"metadata"`
	AuthenticationRef *AuthRef          `json:"authenticationRef,omitempty"`
}

// AuthRef names a TriggerAuthentication.
type AuthRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

// TriggerAuthentication is KEDA's TriggerAuthentication.
type TriggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              TriggerAuthSpec `json:"spec"`
}

// TriggerAuthSpec is the spec of a TriggerAuthentication; chatguard uses
// pod identity only.
type TriggerAuthSpec struct {
	PodIdentity *PodIdentity `json:"podIdentity,omitempty"`
}

// PodIdentity is KEDA's pod identity (provider aws: IRSA or EKS Pod
// Identity).
type PodIdentity struct {
	Provider      string `json:"provider"`
	RoleArn       string `json:"roleArn,omitempty"`
	IdentityOwner string `json:"identityOwner,omitempty"`
}

// PodMonitor is the Prometheus Operator's PodMonitor.
type PodMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              PodMonitorSpec `json:"spec"`
}

// PodMonitorSpec is the spec of a PodMonitor.
type PodMonitorSpec struct {
	JobLabel            string               `json:"jobLabel,omitempty"`
	Selector            metav1.LabelSelector `json:"selector"`
	NamespaceSelector   *NamespaceSelector   `json:"namespaceSelector,omitempty"`
	PodMetricsEndpoints []PodMetricsEndpoint `json:"podMetricsEndpoints"`
	PodTargetLabels     []string             `json:"podTargetLabels,omitempty"`
	SampleLimit         *uint64              `json:"sampleLimit,omitempty"`
}

// NamespaceSelector picks the namespaces a monitor looks in.
type NamespaceSelector struct {
	Any        bool     `json:"any,omitempty"`
	MatchNames []string `json:"matchNames,omitempty"`
}

// PodMetricsEndpoint is one scraped port of the selected pods.
type PodMetricsEndpoint struct {
	Port          string `json:"port"`
	Path          string `json:"path,omitempty"`
	Scheme        string `json:"scheme,omitempty"`
	Interval      string `json:"interval,omitempty"`
	ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
	HonorLabels   bool   `json:"honorLabels,omitempty"`
}

// PrometheusRule is the Prometheus Operator's PrometheusRule. Its spec is a
// Prometheus rule file; tests load it with Prometheus' rulefmt.
type PrometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              PrometheusRuleSpec `json:"spec"`
}

// PrometheusRuleSpec is the spec of a PrometheusRule.
type PrometheusRuleSpec struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is a Prometheus rule group.
type RuleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	Rules    []Rule `json:"rules"`
}

// Rule is an alerting or recording rule.
type Rule struct {
	Alert         string            `json:"alert,omitempty"`
	Record        string            `json:"record,omitempty"`
	Expr          string            `json:"expr"`
	For           string            `json:"for,omitempty"`
	KeepFiringFor string            `json:"keep_firing_for,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// ExternalSecret is the External Secrets Operator's ExternalSecret
// (external-secrets.io/v1): a Secret synced from a secret manager.
type ExternalSecret struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ExternalSecretSpec `json:"spec"`
}

// ExternalSecretSpec is the spec of an ExternalSecret, with the fields
// chatguard sets.
type ExternalSecretSpec struct {
	RefreshInterval string               `json:"refreshInterval,omitempty"`
	SecretStoreRef  SecretStoreRef       `json:"secretStoreRef"`
	Target          ExternalSecretTarget `json:"target"`
	DataFrom        []ExternalSecretFrom `json:"dataFrom,omitempty"`
}

// SecretStoreRef names the (Cluster)SecretStore an ExternalSecret reads.
type SecretStoreRef struct {
	Kind string `json:"kind,omitempty"`
	Name string `json:"name"`
}

// ExternalSecretTarget is the Secret an ExternalSecret writes.
type ExternalSecretTarget struct {
	Name           string `json:"name"`
	CreationPolicy string `json:"creationPolicy,omitempty"`
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
}

// ExternalSecretFrom takes every property of one remote entry.
type ExternalSecretFrom struct {
	Extract *ExternalSecretRemoteRef `json:"extract,omitempty"`
}

// ExternalSecretRemoteRef is one entry of the secret manager.
type ExternalSecretRemoteRef struct {
	Key string `json:"key"`
}
