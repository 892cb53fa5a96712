package campaign

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
)

// The outcomes of chatguard_campaign_rereviews_total.
const (
	// ReReviewFlagged: the re-review labelled the room abusive or
	// suspicious (the policy lets it escalate, nothing more).
	ReReviewFlagged = "flagged"
	// ReReviewClean: the re-review labelled the room clean.
	ReReviewClean = "clean"
	// ReReviewFailed: the re-review failed or was not saved; the room
	// stays linked and is not tried again.
	ReReviewFailed = "failed"
	// ReReviewCapped: a linked, unflagged room the bounds left out.
	ReReviewCapped = "capped"
)

// ReReviewOutcomes are the outcome label's values.
var ReReviewOutcomes = []string{ReReviewFlagged, ReReviewClean, ReReviewFailed, ReReviewCapped}

func newReReviewMetric() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_campaign_rereviews_total",
		Help: "Rooms the campaign join linked and re-reviewed with the campaign signal (source campaign: escalation only), by outcome: flagged, clean, failed, or capped (left out by the per-campaign or per-run bound)."},
		[]string{"outcome"})
	for _, o := range ReReviewOutcomes {
		c.WithLabelValues(o)
	}
	return c
}

// SetReReviewer makes every later run re-review, after it saved, the rooms
// it just linked whose verdicts are not flagged, at most
// JoinConfig.ReReviewMax a campaign and ReReviewMaxRun a run, one after
// the other, through r. A ReReviewMax of zero, or a nil r, re-reviews
// nothing. Call it before Run.
func (j *Joiner) SetReReviewer(r pipeline.CampaignReReviewer) { j.rr = r }

// ReReviews picks, from the rooms joined links (a run's new links, oldest
// verdict first), those a run re-reviews: one pick a verdict, none whose
// verdict is flagged (abusive or suspicious: moderators already see it)
// or is a campaign re-review already, at most cfg.ReReviewMax a campaign
// and cfg.ReReviewMaxRun in all. capped counts the rooms the bounds left
// out. rows are the run's rows: they carry each verdict's window and
// label.
func ReReviews(rows []pipeline.CampaignJoinRow, joined pipeline.CampaignJoin, cfg JoinConfig) (picks []pipeline.CampaignJoinRow, capped int) {
	if cfg.ReReviewMax <= 0 {
		return nil, 0
	}
	byVerdict := make(map[uint64]pipeline.CampaignJoinRow, len(rows))
	for _, r := range rows {
		byVerdict[r.VerdictID] = r
	}
	seen := map[uint64]bool{}
	per := map[string]int{}
	for _, l := range joined.Links {
		r, ok := byVerdict[l.VerdictID]
		if !ok || seen[l.VerdictID] || !reReviewable(r) {
			continue
		}
		seen[l.VerdictID] = true
		c := joined.Members[l.Mark]
		if per[c] >= cfg.ReReviewMax || len(picks) >= cfg.ReReviewMaxRun {
			capped++
			continue
		}
		per[c]++
		picks = append(picks, r)
	}
	return picks, capped
}

// reReviewable says whether a linked room's verdict may be re-reviewed:
// not flagged, and not a campaign re-review's own (no room twice).
func reReviewable(r pipeline.CampaignJoinRow) bool {
	return r.Label != pipeline.LabelAbusive && r.Label != pipeline.LabelSuspicious && !strings.HasPrefix(r.RunID, pipeline.CampaignReReviewRunPrefix)
}

// reReview re-reviews a run's picks one after the other, counting each
// outcome, until ctx ends; it returns how many it ran and the first
// failure, which stops none of the others.
func (j *Joiner) reReview(ctx context.Context, rows []pipeline.CampaignJoinRow, joined pipeline.CampaignJoin) (int, error) {
	if j.rr == nil {
		return 0, nil
	}
	picks, capped := ReReviews(rows, joined, j.cfg)
	j.rereviews.WithLabelValues(ReReviewCapped).Add(float64(capped))
	var errs []error
	n := 0
	for _, r := range picks {
		if ctx.Err() != nil {
			break
		}
		label, err := j.rr.ReReviewCampaign(ctx, r.RoomID, r.WindowStart, r.WindowEnd)
		n++
		switch {
		case err != nil:
			j.rereviews.WithLabelValues(ReReviewFailed).Inc()
			errs = append(errs, err)
		case label == pipeline.LabelAbusive || label == pipeline.LabelSuspicious:
			j.rereviews.WithLabelValues(ReReviewFlagged).Inc()
		default:
			j.rereviews.WithLabelValues(ReReviewClean).Inc()
		}
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("re-review: %d of %d failed, the first: %w", len(errs), n, errs[0])
	}
	return n, nil
}
