package campaign

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// rowsStore is a pipeline.CampaignJoins over fixed rows that links every
// link it is given.
type rowsStore struct{ rows []pipeline.CampaignJoinRow }

func (s *rowsStore) JoinRows(context.Context, time.Time, int) ([]pipeline.CampaignJoinRow, error) {
	return s.rows, nil
}

func (s *rowsStore) SaveJoin(_ context.Context, j pipeline.CampaignJoin) (int, error) {
	return len(j.Links), nil
}

// labeller answers each room's re-review with its label, or an error for
// a room it has none for, and records the rooms asked.
type labeller struct {
	labels map[string]pipeline.Label
	asked  []string
}

func (l *labeller) ReReviewCampaign(_ context.Context, room string, start, end time.Time) (pipeline.Label, error) {
	l.asked = append(l.asked, room)
	if !start.Before(end) {
		return "", errors.New("no window")
	}
	if lb, ok := l.labels[room]; ok {
		return lb, nil
	}
	return "", errors.New("the review failed")
}

// campaignRows are two campaigns' rows: mark a's signal in verdict 100
// with sightings in verdicts 1..5 (unflagged), 6 (abusive) and 7 (a
// campaign re-review already); mark b's signal in verdict 200 with
// sightings in verdicts 10 and 11.
func campaignRows() []pipeline.CampaignJoinRow {
	row := func(id uint64, mark string, class pipeline.CampaignClass, label pipeline.Label, run string) pipeline.CampaignJoinRow {
		return pipeline.CampaignJoinRow{VerdictID: id, Kind: pipeline.CampaignScript, Mark: mark, Class: class, Senders: 2,
			RoomID: fmt.Sprintf("room-%d", id), WindowStart: t0, WindowEnd: t0.Add(time.Hour), Label: label, RunID: run}
	}
	rows := []pipeline.CampaignJoinRow{row(100, "a", pipeline.ClassCampaign, pipeline.LabelAbusive, "run"), row(200, "b", pipeline.ClassCampaign, pipeline.LabelAbusive, "run")}
	for id := uint64(1); id <= 5; id++ {
		rows = append(rows, row(id, "a", pipeline.ClassSighting, pipeline.LabelClean, "run"))
	}
	return append(rows, row(6, "a", pipeline.ClassSighting, pipeline.LabelAbusive, "run"),
		row(7, "a", pipeline.ClassSighting, pipeline.LabelClean, pipeline.CampaignReReviewRunPrefix+"x"),
		row(10, "b", pipeline.ClassSighting, pipeline.LabelClean, "run"), row(11, "b", pipeline.ClassSighting, "", "run"))
}

func reReviewJoiner(t *testing.T, cfg JoinConfig, rr pipeline.CampaignReReviewer) *Joiner {
	t.Helper()
	j, err := NewJoiner(cfg, &rowsStore{rows: campaignRows()}, prometheus.NewRegistry(), clock.NewFake(t0.Add(time.Hour)))
	require.NoError(t, err)
	j.SetReReviewer(rr)
	return j
}

func TestCampaignReReviewIsOffByDefault(t *testing.T) {
	require.Equal(t, 0, DefaultJoinConfig().ReReviewMax)
	rr := &labeller{}
	j := reReviewJoiner(t, DefaultJoinConfig(), rr)
	st, linked, err := j.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 9, linked, "the join links as before")
	require.Zero(t, st.ReReviews)
	require.Empty(t, rr.asked, "no room is re-reviewed at 0")
	for _, o := range ReReviewOutcomes {
		require.Zero(t, testutil.ToFloat64(j.rereviews.WithLabelValues(o)), o)
	}
}

func TestCampaignReReviewIsBoundedPerCampaignAndRunAndCounted(t *testing.T) {
	cfg := DefaultJoinConfig()
	cfg.ReReviewMax, cfg.ReReviewMaxRun = 2, 3
	rr := &labeller{labels: map[string]pipeline.Label{"room-1": pipeline.LabelSuspicious, "room-2": pipeline.LabelClean}}
	j := reReviewJoiner(t, cfg, rr)
	st, _, err := j.RunOnce(context.Background())
	require.ErrorContains(t, err, "re-review: 1 of 3 failed")
	require.Equal(t, 3, st.ReReviews)
	require.Equal(t, []string{"room-1", "room-2", "room-10"}, rr.asked,
		"two of campaign a (oldest first; the flagged room and a re-review's own left out), then the run's bound")
	want := map[string]float64{ReReviewFlagged: 1, ReReviewClean: 1, ReReviewFailed: 1, ReReviewCapped: 4}
	for o, n := range want {
		require.Equal(t, n, testutil.ToFloat64(j.rereviews.WithLabelValues(o)), o)
	}
}

func TestJoinConfigValidatesTheReReviewBounds(t *testing.T) {
	cfg := DefaultJoinConfig()
	cfg.ReReviewMax, cfg.ReReviewMaxRun = cfg.MaxLinks+1, 0
	err := cfg.Validate()
	require.ErrorContains(t, err, "re-review max 201")
	require.ErrorContains(t, err, "re-review max per run 0")
	cfg.ReReviewMax, cfg.ReReviewMaxRun = -1, 1
	require.ErrorContains(t, cfg.Validate(), "re-review max -1")
}
