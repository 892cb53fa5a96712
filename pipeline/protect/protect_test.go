package protect_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/policy"
	"github.com/chatguard/chatguard/pipeline/protect"
)

var t0 = time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)

// ledger is a fixed state, recording the query it was asked.
type ledger struct {
	st  pipeline.ActionState
	err error
	q   pipeline.ActionStateQuery
}

func (l *ledger) ActionState(_ context.Context, q pipeline.ActionStateQuery) (pipeline.ActionState, error) {
	l.q = q
	return l.st, l.err
}

func verdict() pipeline.Verdict {
	return pipeline.Verdict{
		Key:    pipeline.ReviewKey{RoomID: "room-1", WindowStart: t0.Add(-10 * time.Minute), WindowEnd: t0, PipelineVersion: "p"},
		Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment,
		Severity: 4, Confidence: 0.95, OffenderRole: pipeline.RoleSeller, Subjects: []string{"seller-1"},
		NewestMessageAt: t0.Add(-50 * time.Second),
	}
}

func TestThePlannerAttachesTheShippedPolicysActions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := protect.NewMetrics(reg)
	l := &ledger{st: pipeline.ActionState{Suppressed: map[string]bool{pipeline.ActionSuppressKey("room-1", "seller-1", "payment_scam_notice"): false}}}
	p := protect.New(policy.Default(), l, clock.NewFake(t0), m, nil)
	v, err := p.Plan(context.Background(), verdict(), pipeline.ActionSourceRealtime)
	require.NoError(t, err)
	require.Equal(t, "room-1", l.q.RoomID)
	require.Equal(t, []string{"seller-1"}, l.q.Accounts)
	require.Len(t, l.q.Rules, len(policy.Default().Rules))
	var on, dry int
	for _, a := range v.Actions {
		require.NoError(t, a.Validate())
		require.Equal(t, v.Key, a.Key)
		if a.Mode == pipeline.ModeOn {
			on++
			require.Equal(t, pipeline.ActionEscalate, a.Action.ID)
		} else {
			dry++
		}
		if a.Action.ID.Notice() {
			require.Equal(t, t0.Add(24*time.Hour), a.SuppressUntil)
		} else {
			require.True(t, a.SuppressUntil.IsZero())
		}
	}
	// Two rules escalate (on); notices dry-run; the heavy rule's hold and
	// restrict are refused for single-room evidence.
	require.Equal(t, 2, on)
	require.Equal(t, 2, dry)
	require.Equal(t, 1.0, testutil.ToFloat64(m.Actions().WithLabelValues("hold_transaction", "dry_run", "weak_evidence")))
	p.Committed(v)
	require.Equal(t, 2.0, testutil.ToFloat64(m.Actions().WithLabelValues("escalate", "on", "written")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Actions().WithLabelValues("warn_counterpart", "dry_run", "written")))

	// An attempt again replaces, never appends.
	again, err := p.Plan(context.Background(), v, pipeline.ActionSourceRealtime)
	require.NoError(t, err)
	require.Len(t, again.Actions, 4)
	require.Equal(t, v.Actions[0].IdempotencyKey, again.Actions[0].IdempotencyKey)
}

func TestNoActionsForWhatIsNotADoneFinding(t *testing.T) {
	p := protect.New(policy.Default(), &ledger{err: errors.New("not asked")}, clock.NewFake(t0), nil, nil)
	for name, mutate := range map[string]func(*pipeline.Verdict){
		"clean":   func(v *pipeline.Verdict) { v.Label = pipeline.LabelClean },
		"stopped": func(v *pipeline.Verdict) { v.Status = pipeline.StatusStopped },
		"failed":  func(v *pipeline.Verdict) { v.Status = pipeline.StatusFailed },
	} {
		v := verdict()
		mutate(&v)
		v.Actions = []pipeline.ActionRecord{{}}
		got, err := p.Plan(context.Background(), v, pipeline.ActionSourceBatch)
		require.NoError(t, err, name)
		require.Empty(t, got.Actions, name)
	}
}

func TestAnUnreadableRecordFailsThePlan(t *testing.T) {
	p := protect.New(policy.Default(), &ledger{err: errors.New("mysql: down")}, clock.NewFake(t0), nil, nil)
	_, err := p.Plan(context.Background(), verdict(), pipeline.ActionSourceBatch)
	require.ErrorContains(t, err, "protect: mysql: down")
}

type sender struct{ err error }

func (s sender) Send(context.Context, []pipeline.OutMessage) error { return s.err }

func TestProtectionLatencyIsObservedOnAcceptedPublishes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := protect.NewMetrics(reg)
	p := protect.New(policy.Default(), &ledger{}, clock.NewFake(t0), m, nil)
	v, err := p.Plan(context.Background(), verdict(), pipeline.ActionSourceRealtime)
	require.NoError(t, err)
	var msgs []pipeline.OutMessage
	for _, a := range v.Actions {
		b, err := pipeline.EncodeProtectiveAction(a.ProtectiveAction)
		require.NoError(t, err)
		msgs = append(msgs, pipeline.OutMessage{Body: b})
	}
	msgs = append(msgs, pipeline.OutMessage{Body: []byte("not json")})
	s := protect.NewLatencySender(sender{err: &pipeline.BatchError{Errs: []error{nil, errors.New("throttled"), nil, nil, nil}}}, clock.NewFake(t0.Add(10*time.Second)), m)
	require.Error(t, s.Send(context.Background(), msgs))
	// 4 actions, one refused by the queue, the garbage body skipped.
	require.Equal(t, 3, countObs(t, reg))
}

func countObs(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != "chatguard_protection_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += int(m.GetHistogram().GetSampleCount())
			require.InDelta(t, 60.0*float64(m.GetHistogram().GetSampleCount()), m.GetHistogram().GetSampleSum(), 1e-9)
		}
	}
	return n
}
