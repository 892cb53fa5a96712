package k8s_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// policy is an IAM policy document as the files in iam/ hold it.
type policy struct {
	Version   string
	Statement []struct {
		Sid      string
		Effect   string
		Action   stringOrList
		Resource stringOrList
	}
}

type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	err := json.Unmarshal(b, &many)
	*s = many
	return err
}

// grants reads iam/<name>-policy.json strictly and returns, per resource,
// the sorted actions allowed on it.
func grants(t *testing.T, name string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("iam", name+"-policy.json"))
	require.NoError(t, err)
	var p policy
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&p), "iam/%s-policy.json (no Condition or NotAction: keep it plain)", name)
	require.Equal(t, "2012-10-17", p.Version)
	out := map[string][]string{}
	sids := map[string]bool{}
	for _, st := range p.Statement {
		require.Equal(t, "Allow", st.Effect, "%s: %s", name, st.Sid)
		require.NotEmpty(t, st.Sid)
		require.False(t, sids[st.Sid], "%s: Sid %s twice", name, st.Sid)
		sids[st.Sid] = true
		for _, a := range st.Action {
			require.NotContains(t, a, "*", "%s: %s: wildcard action %s", name, st.Sid, a)
		}
		for _, r := range st.Resource {
			require.NotEqual(t, "*", r, "%s: %s: every statement names its resources", name, st.Sid)
			// Only S3 object paths end in a wildcard, and only after a prefix.
			if strings.Contains(r, "*") {
				require.Regexp(t, `^arn:aws:s3:::[a-z0-9.-]+/[A-Za-z0-9_./=-]+/\*$`, r, "%s: %s", name, st.Sid)
			}
			out[r] = append(out[r], st.Action...)
			sort.Strings(out[r])
		}
	}
	return out
}

// sqsARN turns https://sqs.REGION.amazonaws.com/ACCOUNT/NAME into the
// queue's ARN.
func sqsARN(t *testing.T, url string) string {
	t.Helper()
	m := regexp.MustCompile(`^https://sqs\.([a-z0-9-]+)\.amazonaws\.com/([0-9]{12})/([A-Za-z0-9_-]+)$`).FindStringSubmatch(url)
	require.NotNil(t, m, "queue URL %q", url)
	return "arn:aws:sqs:" + m[1] + ":" + m[2] + ":" + m[3]
}

// TestIAMPoliciesAreLeastPrivilegeForProd holds iam/*.json, written for the
// prod overlay, to the queues, bucket and workgroup prod's ConfigMaps name,
// and to exactly the calls each binary makes.
func TestIAMPoliciesAreLeastPrivilegeForProd(t *testing.T) {
	t.Parallel()
	s := render(t, "prod"+realtimeSuffix)
	worker := envOf(t, s, container(t, s, "chatguard-worker"))
	consumer := envOf(t, s, container(t, s, "chatguard-consumer"))
	batch := s.ConfigMaps["chatguard-batch"].Data

	receive := []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"}
	trigger := envOf(t, s, container(t, s, "chatguard-trigger"))
	realtime := sqsARN(t, trigger["CHATGUARD_REVIEW_REALTIME_QUEUE_URL"].value)
	require.Equal(t, map[string][]string{
		sqsARN(t, trigger["CHATGUARD_CHAT_EVENTS_QUEUE_URL"].value): receive,
		sqsARN(t, trigger["CHATGUARD_CHAT_EVENTS_DLQ_URL"].value):   {"sqs:SendMessage"},
		realtime: {"sqs:SendMessage"},
	}, grants(t, "trigger"), "the trigger receives chat events, dead-letters malformed ones and publishes real-time reviews, nothing else")

	// The workers poll review-realtime once components/realtime turns it
	// on; the grant is there before, so turning it on needs no IAM change.
	require.Equal(t, map[string][]string{
		realtime: receive,
		sqsARN(t, worker["CHATGUARD_REVIEW_QUEUE_URL"].value):   receive,
		sqsARN(t, worker["CHATGUARD_FEEDBACK_QUEUE_URL"].value): {"sqs:SendMessage"},
		sqsARN(t, worker["CHATGUARD_REVIEW_DLQ_URL"].value):     {"sqs:SendMessage"},
	}, grants(t, "worker"))
	rs := render(t, "prod"+realtimeSuffix)
	polled := envOf(t, rs, container(t, rs, "chatguard-worker"))["CHATGUARD_REALTIME_QUEUE_URL"].value
	require.Equal(t, receive, grants(t, "worker")[sqsARN(t, polled)],
		"with components/realtime the workers (and KEDA, with their role) read the queue the grant names")

	bucket := "arn:aws:s3:::" + consumer["CHATGUARD_LAKE_BUCKET"].value
	require.Equal(t, map[string][]string{
		sqsARN(t, consumer["CHATGUARD_FEEDBACK_QUEUE_URL"].value):      receive,
		bucket + "/" + consumer["CHATGUARD_LAKE_PREFIX"].value + "*":   {"s3:AbortMultipartUpload", "s3:PutObject"},
		bucket + "/" + consumer["CHATGUARD_ERRORS_PREFIX"].value + "*": {"s3:AbortMultipartUpload", "s3:PutObject"},
	}, grants(t, "consumer"))

	compact := envOf(t, s, s.CronJobs["chatguard-compact"].Spec.JobTemplate.Spec.Template.Spec.Containers[0])
	require.Equal(t, map[string][]string{
		"arn:aws:s3:::" + compact["CHATGUARD_LAKE_BUCKET"].value: {"s3:ListBucket"},
		"arn:aws:s3:::" + compact["CHATGUARD_LAKE_BUCKET"].value + "/" + compact["CHATGUARD_LAKE_PREFIX"].value + "*": {
			"s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject"},
	}, grants(t, "compact"), "compaction lists, reads, writes and deletes only the events prefix")

	b := grants(t, "batch")
	require.Equal(t, []string{"sqs:SendMessage"}, b[sqsARN(t, batch["CHATGUARD_REVIEW_QUEUE_URL"])], "batch publishes to the review queue")
	m := regexp.MustCompile(`^arn:aws:sqs:([a-z0-9-]+):([0-9]{12}):`).FindStringSubmatch(sqsARN(t, batch["CHATGUARD_REVIEW_QUEUE_URL"]))
	region, account := m[1], m[2]
	require.Equal(t, []string{"athena:GetQueryExecution", "athena:GetQueryResults", "athena:StartQueryExecution", "athena:StopQueryExecution"},
		b["arn:aws:athena:"+region+":"+account+":workgroup/"+batch["CHATGUARD_ATHENA_WORKGROUP"]])
	require.Contains(t, b, "arn:aws:glue:"+region+":"+account+":database/"+batch["CHATGUARD_ATHENA_DATABASE"])
	results := strings.TrimPrefix(batch["CHATGUARD_ATHENA_OUTPUT_LOCATION"], "s3://")
	require.Contains(t, b["arn:aws:s3:::"+results+"*"], "s3:PutObject", "batch writes query results under --athena-output-location")
	for r := range b {
		require.False(t, strings.HasPrefix(r, "arn:aws:sqs:") && r != sqsARN(t, batch["CHATGUARD_REVIEW_QUEUE_URL"]), "batch touches only the review queue, not %s", r)
	}
}

// trust is an IAM role trust policy as iam/<name>-trust.json holds it.
type trust struct {
	Version   string
	Statement []struct {
		Sid       string
		Effect    string
		Principal struct{ Federated string }
		Action    string
		Condition struct {
			StringEquals map[string]stringOrList
		}
	}
}

// kedaOperator is the ServiceAccount of KEDA's operator (the Helm chart's
// default release in namespace keda).
const kedaOperator = "system:serviceaccount:keda:keda-operator"

// TestIAMTrustPolicies holds iam/*-trust.json to prod's ServiceAccounts:
// each role trusts the cluster's OIDC provider for exactly its workload's
// ServiceAccount and, where KEDA reads a queue with that role
// (identityOwner: workload), KEDA's operator as well; no other role trusts
// KEDA.
func TestIAMTrustPolicies(t *testing.T) {
	t.Parallel()
	s := render(t, "prod"+realtimeSuffix)
	// The ServiceAccounts KEDA assumes the role of: those of the
	// Deployments a ScaledObject scales with workload identity.
	viaKEDA := map[string]bool{}
	for _, so := range s.ScaledObjects {
		for _, tr := range so.Spec.Triggers {
			if tr.AuthenticationRef == nil {
				continue
			}
			ta := s.TriggerAuths[tr.AuthenticationRef.Name]
			if ta != nil && ta.Spec.PodIdentity != nil && ta.Spec.PodIdentity.IdentityOwner == "workload" {
				viaKEDA[s.Deployments[so.Spec.ScaleTargetRef.Name].Spec.Template.Spec.ServiceAccountName] = true
			}
		}
	}
	require.True(t, viaKEDA["chatguard-worker"] && viaKEDA["chatguard-consumer"] && viaKEDA["chatguard-trigger"], "%v", viaKEDA)

	for _, name := range []string{"worker", "consumer", "batch", "compact", "trigger"} {
		t.Run(name, func(t *testing.T) {
			sa := s.ServiceAccounts["chatguard-"+name]
			require.NotNil(t, sa)
			account := requireIRSA(t, sa)
			b, err := os.ReadFile(filepath.Join("iam", name+"-trust.json"))
			require.NoError(t, err, "the role's trust policy ships next to its permissions")
			var p trust
			dec := json.NewDecoder(strings.NewReader(string(b)))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(&p))
			require.Equal(t, "2012-10-17", p.Version)
			require.Len(t, p.Statement, 1)
			st := p.Statement[0]
			require.Equal(t, "Allow", st.Effect)
			require.Equal(t, "sts:AssumeRoleWithWebIdentity", st.Action)
			m := regexp.MustCompile(`^arn:aws:iam::([0-9]{12}):oidc-provider/(oidc\.eks\.[a-z0-9-]+\.amazonaws\.com/id/[A-Z0-9]+)$`).FindStringSubmatch(st.Principal.Federated)
			require.NotNil(t, m, "principal %q is the cluster's OIDC provider", st.Principal.Federated)
			require.Equal(t, account, m[1], "the provider is in the role's account")
			provider := m[2]
			require.Len(t, st.Condition.StringEquals, 2, "only aud and sub are compared")
			require.Equal(t, stringOrList{"sts.amazonaws.com"}, st.Condition.StringEquals[provider+":aud"])
			want := []string{"system:serviceaccount:" + sa.Namespace + ":" + sa.Name}
			if viaKEDA[sa.Name] {
				want = append(want, kedaOperator)
			}
			got := []string(st.Condition.StringEquals[provider+":sub"])
			sort.Strings(got)
			sort.Strings(want)
			require.Equal(t, want, got, "%s: trusted subjects (KEDA's operator exactly where it scales on this role)", name)
		})
	}
}
