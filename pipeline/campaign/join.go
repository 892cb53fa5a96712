package campaign

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// JoinConfig bounds the campaign join: the periodic job that joins the
// marks of one script (its variants' script bands, the contacts it
// carried, the accounts that pushed it) into one campaign, and links the
// rooms reviewed before a mark became a campaign.
type JoinConfig struct {
	// Every is the time between runs; zero turns the join off.
	Every time.Duration
	// Window is how far back a run reads recorded marks.
	Window time.Duration
	// MaxRows bounds the rows one run reads (the newest).
	MaxRows int
	// MaxMarks bounds a campaign's marks: a join that would pass it is
	// refused (counted), so one phrase cannot chain half the fleet.
	MaxMarks int
	// MaxLinks bounds the earlier rooms linked to one campaign per run.
	MaxLinks int
	// MaxSenders is the most fleet-wide senders a mark may have counted
	// and still join others: above it the mark is a phrase many people
	// write, which links nothing.
	MaxSenders int
	// ReReviewMax is the most rooms of one campaign a run re-reviews with
	// the campaign signal, among those it just linked whose verdicts are
	// not flagged (escalation only: see ReReviewer); zero turns the
	// re-review off.
	ReReviewMax int
	// ReReviewMaxRun bounds the re-reviews of one run, all campaigns
	// together.
	ReReviewMaxRun int
}

// The join's defaults.
const (
	DefaultJoinEvery      = time.Minute
	DefaultJoinWindow     = 48 * time.Hour
	DefaultJoinMaxRows    = 200_000
	DefaultJoinMaxMarks   = 256
	DefaultJoinMaxLinks   = 200
	DefaultJoinMaxSenders = DefaultMaxSenders
	// DefaultReReviewMax is off: a campaign re-review is the operator's
	// choice.
	DefaultReReviewMax    = 0
	DefaultReReviewMaxRun = 50
	// MaxJoinMarks is the largest MaxMarks: a campaign's marks are named
	// in one query.
	MaxJoinMarks = 1024
)

// DefaultJoinConfig returns the defaults (a run a minute).
func DefaultJoinConfig() JoinConfig {
	return JoinConfig{Every: DefaultJoinEvery, Window: DefaultJoinWindow, MaxRows: DefaultJoinMaxRows, MaxMarks: DefaultJoinMaxMarks,
		MaxLinks: DefaultJoinMaxLinks, MaxSenders: DefaultJoinMaxSenders, ReReviewMax: DefaultReReviewMax, ReReviewMaxRun: DefaultReReviewMaxRun}
}

// Validate reports every problem at once.
func (c JoinConfig) Validate() error {
	var errs []error
	if c.Every < 0 || (c.Every > 0 && c.Every < time.Second) {
		errs = append(errs, fmt.Errorf("campaign join: every %s must be 0 (off) or at least 1s", c.Every))
	}
	if c.Window < time.Hour || c.Window > 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("campaign join: window %s must be within 1h..168h", c.Window))
	}
	if c.MaxRows < 1 || c.MaxRows > 5_000_000 {
		errs = append(errs, fmt.Errorf("campaign join: max rows %d must be within 1..5000000", c.MaxRows))
	}
	if c.MaxMarks < 2 || c.MaxMarks > MaxJoinMarks {
		errs = append(errs, fmt.Errorf("campaign join: max marks %d must be within 2..%d", c.MaxMarks, MaxJoinMarks))
	}
	if c.MaxLinks < 0 {
		errs = append(errs, fmt.Errorf("campaign join: max links %d must not be negative", c.MaxLinks))
	}
	if c.MaxSenders < 1 {
		errs = append(errs, fmt.Errorf("campaign join: max senders %d must be at least 1", c.MaxSenders))
	}
	if c.ReReviewMax < 0 || c.ReReviewMax > c.MaxLinks {
		errs = append(errs, fmt.Errorf("campaign join: re-review max %d must be within 0..%d (max links)", c.ReReviewMax, max(c.MaxLinks, 0)))
	}
	if c.ReReviewMaxRun < 1 || c.ReReviewMaxRun > 1000 {
		errs = append(errs, fmt.Errorf("campaign join: re-review max per run %d must be within 1..1000", c.ReReviewMaxRun))
	}
	return errors.Join(errs...)
}

// JoinStats counts what Join decided.
type JoinStats struct {
	// Campaigns are the components holding a campaign signal.
	Campaigns int
	// Refused counts the joins MaxMarks refused.
	Refused int
	// ReReviews counts the linked rooms the run re-reviewed (SetReReviewer).
	ReReviews int
}

// Join computes the campaigns of rows: the connected components of the
// graph whose nodes are marks and whose edges join the marks one verdict
// recorded (a script's bands and the contacts in the same room) and the
// marks of verdicts about the same subject (an account that pushed two
// variants). A mark counted from more than MaxSenders senders joins
// nothing. Components grow by size and never past MaxMarks. A component
// is a campaign when one of its rows is a campaign signal (or linked);
// its id is its smallest such mark. The links are the sightings of
// campaign marks, oldest verdict first, at most MaxLinks a campaign.
func Join(rows []pipeline.CampaignJoinRow, cfg JoinConfig) (pipeline.CampaignJoin, JoinStats) {
	phrase := map[string]bool{}
	for _, r := range rows {
		if r.Senders > cfg.MaxSenders {
			phrase[r.Mark] = true
		}
	}
	u := newUnion(cfg.MaxMarks)
	byVerdict := map[uint64]string{}
	bySubject := map[string]string{}
	for _, r := range rows {
		if phrase[r.Mark] {
			continue
		}
		u.add(r.Mark)
		if first, ok := byVerdict[r.VerdictID]; ok {
			u.join(first, r.Mark)
		} else {
			byVerdict[r.VerdictID] = r.Mark
		}
		for _, s := range r.Subjects {
			if first, ok := bySubject[s]; ok {
				u.join(first, r.Mark)
			} else {
				bySubject[s] = r.Mark
			}
		}
	}
	id := map[string]string{} // root -> campaign id
	for _, r := range rows {
		if phrase[r.Mark] || (r.Class != pipeline.ClassCampaign && r.Class != pipeline.ClassLinked) {
			continue
		}
		root := u.find(r.Mark)
		if cur, ok := id[root]; !ok || r.Mark < cur {
			id[root] = r.Mark
		}
	}
	out := pipeline.CampaignJoin{Members: map[string]string{}}
	for m := range u.parent {
		if c, ok := id[u.find(m)]; ok {
			out.Members[m] = c
		}
	}
	out.Links = links(rows, out.Members, cfg.MaxLinks)
	return out, JoinStats{Campaigns: len(id), Refused: u.refused}
}

// links are the sightings of campaign marks, oldest verdict first, at
// most limit a campaign.
func links(rows []pipeline.CampaignJoinRow, members map[string]string, limit int) []pipeline.CampaignLink {
	var cand []pipeline.CampaignJoinRow
	for _, r := range rows {
		if _, ok := members[r.Mark]; ok && r.Class == pipeline.ClassSighting {
			cand = append(cand, r)
		}
	}
	slices.SortFunc(cand, func(a, b pipeline.CampaignJoinRow) int {
		return cmp.Or(cmp.Compare(a.VerdictID, b.VerdictID), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Mark, b.Mark))
	})
	per := map[string]int{}
	var out []pipeline.CampaignLink
	for _, r := range cand {
		c := members[r.Mark]
		if per[c] >= limit {
			continue
		}
		per[c]++
		out = append(out, pipeline.CampaignLink{VerdictID: r.VerdictID, Kind: r.Kind, Mark: r.Mark})
	}
	return out
}

// union is a union-find over marks whose sets never pass max elements.
type union struct {
	parent  map[string]string
	size    map[string]int
	max     int
	refused int
}

func newUnion(limit int) *union {
	return &union{parent: map[string]string{}, size: map[string]int{}, max: limit}
}

func (u *union) add(m string) {
	if _, ok := u.parent[m]; !ok {
		u.parent[m], u.size[m] = m, 1
	}
}

func (u *union) find(m string) string {
	for u.parent[m] != m {
		u.parent[m] = u.parent[u.parent[m]]
		m = u.parent[m]
	}
	return m
}

func (u *union) join(a, b string) {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return
	}
	if u.size[ra]+u.size[rb] > u.max {
		u.refused++
		return
	}
	if u.size[ra] < u.size[rb] {
		ra, rb = rb, ra
	}
	u.parent[rb] = ra
	u.size[ra] += u.size[rb]
}

// Joiner runs the campaign join periodically over a store.
type Joiner struct {
	cfg   JoinConfig
	store pipeline.CampaignJoins
	clk   clock.Clock
	runs  *prometheus.CounterVec
	links prometheus.Counter
	camps prometheus.Gauge
	refus prometheus.Counter
	// rr re-reviews linked rooms (nil: none); rereviews counts them.
	rr        pipeline.CampaignReReviewer
	rereviews *prometheus.CounterVec
}

// NewJoiner returns a joiner over store on clk (nil: the wall clock); reg
// may be nil.
func NewJoiner(cfg JoinConfig, store pipeline.CampaignJoins, reg prometheus.Registerer, clk clock.Clock) (*Joiner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("campaign join: store is nil")
	}
	j := &Joiner{cfg: cfg, store: store, clk: clock.Or(clk),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_campaign_join_runs_total",
			Help: "Runs of the campaign join by outcome (ok, error)."}, []string{"outcome"}),
		links: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_campaign_rooms_linked_total",
			Help: "Rooms reviewed before their mark became a campaign, linked to it by the campaign join (retro-linking)."}),
		camps: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chatguard_campaigns",
			Help: "Campaigns (joined components holding a campaign signal) the last campaign join found in its window."}),
		refus: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_campaign_joins_refused_total",
			Help: "Joins of two campaigns the campaign join refused because the result would pass the marks cap."}),
		rereviews: newReReviewMetric(),
	}
	j.runs.WithLabelValues("ok")
	j.runs.WithLabelValues("error")
	if reg != nil {
		for _, c := range []prometheus.Collector{j.runs, j.links, j.camps, j.refus, j.rereviews} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("campaign join: register metrics: %w", err)
			}
		}
	}
	return j, nil
}

// RunOnce reads the window's rows, joins them and saves the result, then
// re-reviews the rooms it linked (SetReReviewer). A failed re-review fails
// the run after the others ran: the join itself was saved.
func (j *Joiner) RunOnce(ctx context.Context) (JoinStats, int, error) {
	at := j.clk.Now().UTC()
	rows, err := j.store.JoinRows(ctx, at.Add(-j.cfg.Window), j.cfg.MaxRows)
	if err != nil {
		j.runs.WithLabelValues("error").Inc()
		return JoinStats{}, 0, fmt.Errorf("campaign join: %w", err)
	}
	joined, st := Join(rows, j.cfg)
	joined.At = at
	n, err := j.store.SaveJoin(ctx, joined)
	if err != nil {
		j.runs.WithLabelValues("error").Inc()
		return st, 0, fmt.Errorf("campaign join: %w", err)
	}
	j.runs.WithLabelValues("ok").Inc()
	j.links.Add(float64(n))
	j.camps.Set(float64(st.Campaigns))
	j.refus.Add(float64(st.Refused))
	st.ReReviews, err = j.reReview(ctx, rows, joined)
	if err != nil {
		return st, n, fmt.Errorf("campaign join: %w", err)
	}
	return st, n, nil
}

// Run runs the join every Config.Every until ctx ends (at once when the
// join is off); a failed run is logged by the caller's onError and the
// next one tries again.
func (j *Joiner) Run(ctx context.Context, onError func(error)) error {
	if j.cfg.Every == 0 {
		<-ctx.Done()
		return nil
	}
	for {
		if _, _, err := j.RunOnce(ctx); err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-j.clk.After(j.cfg.Every):
		}
	}
}
