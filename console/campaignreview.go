package console

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.CampaignReReviewer = (*App)(nil)

// campaignWho is who asks for a campaign re-review: the campaign join,
// not a moderator.
var campaignWho = Who{ID: "campaign-join"}

// errDraining refuses a campaign re-review on a pod that drains.
var errDraining = errors.New("this console pod is shutting down")

// ReReviewCampaign implements pipeline.CampaignReReviewer on the on-demand
// review path (reviews.run): the window is reviewed with the stage engine
// as source campaign, saved as a new revision of its verdict under a run
// id beginning pipeline.CampaignReReviewRunPrefix, and streamed under a
// review id of its own like any on-demand review. It waits for an
// admission slot (ctx bounds the wait), so moderators' reviews keep the
// others, and the drain waits for it. The label is read back from the
// saved revision.
func (a *App) ReReviewCampaign(ctx context.Context, roomID string, windowStart, windowEnd time.Time) (pipeline.Label, error) {
	rv := a.rv
	req := reviewRequest{RoomID: roomID, WindowStart: windowStart.UTC(), WindowEnd: windowEnd.UTC(), Source: pipeline.SourceCampaign}
	select {
	case rv.slots <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("campaign re-review: %w", context.Cause(ctx))
	}
	defer func() { <-rv.slots }()
	// Counted running under the lock the drain takes first, so the
	// drain's wait sees it.
	rv.mu.Lock()
	if rv.draining {
		rv.mu.Unlock()
		return "", fmt.Errorf("campaign re-review: %w", errDraining)
	}
	rv.running.Add(1)
	rv.mu.Unlock()
	defer rv.running.Done()
	st, err := rv.hub.Open(uuid.NewString())
	if err != nil {
		return "", fmt.Errorf("campaign re-review: %w", errDraining)
	}
	rv.log.Info("console: audit", "action", "campaign_rereview", "moderator", campaignWho.ID, "review_id", st.ID(), "room_id", roomID,
		"window_start", req.WindowStart, "window_end", req.WindowEnd)
	rv.runRecovered(st, req, campaignWho, trace.SpanContext{})
	return rv.savedLabel(ctx, req, req.runID(campaignWho, st.ID()))
}

// savedLabel reads back the label of the revision run saved for req's
// window: an error when the current revision is not run's (not saved) or
// is not done.
func (rv *reviews) savedLabel(ctx context.Context, req reviewRequest, run string) (pipeline.Label, error) {
	key := pipeline.ReviewKey{RoomID: req.RoomID, WindowStart: req.WindowStart, WindowEnd: req.WindowEnd, PipelineVersion: rv.reviewer.PipelineVersion()}
	id, err := rv.store.VerdictID(ctx, key)
	if err != nil {
		return "", fmt.Errorf("campaign re-review: %w", err)
	}
	v, err := rv.store.VerdictByID(ctx, id)
	switch {
	case err != nil:
		return "", fmt.Errorf("campaign re-review: %w", err)
	case v.RunID != run:
		return "", errors.New("campaign re-review: the verdict was not saved")
	case v.Status != pipeline.StatusDone:
		return "", fmt.Errorf("campaign re-review: the review ended %s", v.Status)
	}
	return v.Label, nil
}

// runID is the run id of req's verdict: a campaign re-review's begins
// pipeline.CampaignReReviewRunPrefix (the join re-reviews no room twice), a
// moderator's names the moderator.
func (req reviewRequest) runID(who Who, reviewID string) string {
	if req.Source == pipeline.SourceCampaign {
		return pipeline.CampaignReReviewRunPrefix + reviewID
	}
	return "ondemand:" + who.ID + ":" + reviewID
}
