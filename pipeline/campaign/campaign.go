// Package campaign turns fleet-wide counts of campaign marks into campaign
// signals: a script fingerprint or contact value seen in many rooms from
// few senders within the window. The reviewer gives the signals to the
// stages as a rule-signal block (never as chat text), lets no review with
// one end early as clean, and records them on the verdict.
//
// Counting is best effort by design: a counter that fails or is slower
// than Config.Timeout leaves the review without campaign signals (counted
// by outcome), never without a verdict.
package campaign

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// Config sets when a mark is a campaign. The defaults come from the
// generated corpus (docs/performance.md): a script runs in dozens of rooms
// from a handful of accounts, while a phrase everyone types comes from
// about as many senders as rooms, and a seller's phone number shared for
// meet-ups reaches a few rooms a day.
type Config struct {
	// Enabled turns counting and campaign signals on.
	Enabled bool
	// MinRooms is the fewest distinct rooms a campaign mark is seen in.
	MinRooms int
	// RoomsPerSender is how many rooms per distinct sender a campaign
	// mark averages at least: few senders, many rooms. A phrase everyone
	// types averages about one room per sender.
	RoomsPerSender float64
	// MaxSenders is the most distinct senders a campaign mark has; above
	// it the mark is something many people write.
	MaxSenders int
	// Timeout bounds the counter's call; past it the review goes on
	// without campaign signals.
	Timeout time.Duration
	// MinSenders is the fewest distinct senders that make a mark a
	// campaign whoever they are: a script or contact spread across
	// accounts. Below it the mark is a campaign only when its account is
	// neither verified nor established (RepeatSender).
	MinSenders int
	// EstablishedCleanRooms is the fewest earlier clean rooms (account
	// history) that make a lone sender established, provided none of its
	// flags stands.
	EstablishedCleanRooms int
	// EstablishedOverturned is the fewest earlier flags a moderator
	// overturned that make a lone sender established likewise.
	EstablishedOverturned int
	// VerifiedFile names the operator's list of verified business
	// accounts: one platform sender id a line, '#' comments and blank
	// lines ignored ("" none). It is read once at start; changing it is a
	// deployment (reviewed and recorded like any other).
	VerifiedFile string
}

// The defaults.
const (
	DefaultMinRooms       = 4
	DefaultRoomsPerSender = 1.25
	DefaultMaxSenders     = 10
	DefaultTimeout        = 50 * time.Millisecond
	// A script runs from 2 to 4 accounts; a shop's greeting from one.
	DefaultMinSenders = 2
	// Three clean rooms: a shop's first rooms, reviewed before its
	// greeting reaches the four rooms of a campaign.
	DefaultEstablishedCleanRooms = 3
	DefaultEstablishedOverturned = 1
	// maxVerified bounds the verified-accounts file.
	maxVerified = 100_000
)

// DefaultConfig returns the defaults (off).
func DefaultConfig() Config {
	return Config{MinRooms: DefaultMinRooms, RoomsPerSender: DefaultRoomsPerSender, MaxSenders: DefaultMaxSenders, Timeout: DefaultTimeout,
		MinSenders: DefaultMinSenders, EstablishedCleanRooms: DefaultEstablishedCleanRooms, EstablishedOverturned: DefaultEstablishedOverturned}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.MinRooms < 2 {
		errs = append(errs, fmt.Errorf("campaign: min rooms %d must be at least 2", c.MinRooms))
	}
	if c.RoomsPerSender < 1 || c.RoomsPerSender > 100 {
		errs = append(errs, fmt.Errorf("campaign: rooms per sender %g must be within 1..100", c.RoomsPerSender))
	}
	if c.MaxSenders < 1 {
		errs = append(errs, fmt.Errorf("campaign: max senders %d must be at least 1", c.MaxSenders))
	}
	if c.Timeout <= 0 || c.Timeout > 5*time.Second {
		errs = append(errs, fmt.Errorf("campaign: timeout %s must be within (0, 5s]", c.Timeout))
	}
	if c.MinSenders < 1 || c.MinSenders > c.MaxSenders {
		errs = append(errs, fmt.Errorf("campaign: min senders %d must be within 1..max senders (%d)", c.MinSenders, c.MaxSenders))
	}
	if c.EstablishedCleanRooms < 1 {
		errs = append(errs, fmt.Errorf("campaign: established clean rooms %d must be at least 1", c.EstablishedCleanRooms))
	}
	if c.EstablishedOverturned < 1 {
		errs = append(errs, fmt.Errorf("campaign: established overturned flags %d must be at least 1", c.EstablishedOverturned))
	}
	return errors.Join(errs...)
}

// IsCampaign reports whether a counted mark is a campaign: seen in at least
// MinRooms rooms, from at most MaxSenders senders, averaging at least
// RoomsPerSender rooms per sender.
func (c Config) IsCampaign(n pipeline.CampaignCount) bool {
	return n.Rooms >= c.MinRooms && n.Senders >= 1 && n.Senders <= c.MaxSenders && float64(n.Rooms) >= c.RoomsPerSender*float64(n.Senders)
}

// RepeatSender reports whether a campaign mark is one account repeating
// its own greeting or contact rather than a campaign: fewer than
// MinSenders senders, and an account that is verified, or that has no
// standing flag and at least EstablishedCleanRooms clean rooms or
// EstablishedOverturned overturned flags. An account without history (a
// new one pushing a contact into many rooms) stays a campaign.
func (c Config) RepeatSender(n pipeline.CampaignCount, s pipeline.SenderStanding) bool {
	if n.Senders >= c.MinSenders {
		return false
	}
	if s.Verified {
		return true
	}
	return s.FlaggedRooms == 0 && (s.CleanRooms >= c.EstablishedCleanRooms || s.OverturnedRooms >= c.EstablishedOverturned)
}

// ReadVerified reads a verified-accounts file (Config.VerifiedFile): one
// sender id a line, '#' comments and blank lines ignored, at most
// 100,000 ids of at most 128 bytes.
func ReadVerified(path string) (map[string]bool, error) {
	out := map[string]bool{}
	if path == "" {
		return out, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("campaign: verified accounts: %w", err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(line) > 128 || strings.ContainsAny(line, " \t") {
			return nil, fmt.Errorf("campaign: verified accounts: %s line %d: not one sender id of at most 128 bytes", path, i+1)
		}
		out[line] = true
	}
	if len(out) > maxVerified {
		return nil, fmt.Errorf("campaign: verified accounts: %s has %d ids, at most %d", path, len(out), maxVerified)
	}
	return out, nil
}

// Detector counts a review's marks and picks out the campaigns. It is
// safe for concurrent use.
type Detector struct {
	cfg     Config
	counter pipeline.CampaignCounter
	m       *metrics
	clk     clock.Clock
	// verified is the verified-accounts file's ids.
	verified map[string]bool
}

// New returns a detector over counter, timing its calls and stamping its
// sightings with clk (nil: the wall clock). reg may be nil.
func New(cfg Config, counter pipeline.CampaignCounter, reg prometheus.Registerer, clk clock.Clock) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if counter == nil {
		return nil, errors.New("campaign: counter is nil")
	}
	verified, err := ReadVerified(cfg.VerifiedFile)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Detector{cfg: cfg, counter: counter, m: m, clk: clock.Or(clk), verified: verified}, nil
}

// Classify marks each of a review's campaign signals that is one account
// repeating itself (Config.RepeatSender) as a repeat sender, in place.
// standing gives the account behind a signal's message, by the message's
// sender id; verified comes from the verified-accounts file. It counts
// the signals by class.
func (d *Detector) Classify(signals []pipeline.CampaignCount, standing func(messageID string) (senderID string, s pipeline.SenderStanding)) {
	for i := range signals {
		id, s := standing(signals[i].MessageID)
		s.Verified = s.Verified || (id != "" && d.verified[id])
		signals[i].RepeatSender = d.cfg.RepeatSender(signals[i], s)
		class := "campaign"
		if signals[i].RepeatSender {
			class = "repeat_sender"
		}
		d.m.classes.WithLabelValues(class).Inc()
	}
}

// Detect records the room's sightings now and returns its campaign
// signals: the marks that are campaigns, most rooms first, at most
// pipeline.MaxCampaigns. It never fails: a counter error or a call past
// Config.Timeout (or ctx's end) gives none, counted by outcome.
func (d *Detector) Detect(ctx context.Context, room string, sightings []pipeline.CampaignSighting) []pipeline.CampaignCount {
	return d.DetectWithLegacy(ctx, room, sightings, "", nil)
}

// DetectWithLegacy is Detect while the legacy pseudonym forms are on: it
// records the sightings in both forms (legacy is sightings' legacy twin,
// one for one, under the room's legacy pseudonym legacyRoom) and judges
// each mark by the larger of its two counts. Counts kept in the legacy
// form hold the rooms seen before the change; the current form's fill up
// over the counting window, after which the legacy form adds nothing.
// Both calls share Config.Timeout. The signals carry the current marks.
// A failed legacy call leaves the current counts alone.
func (d *Detector) DetectWithLegacy(ctx context.Context, room string, sightings []pipeline.CampaignSighting, legacyRoom string, legacy []pipeline.CampaignSighting) []pipeline.CampaignCount {
	hits, _ := d.Observe(ctx, room, sightings, legacyRoom, legacy)
	return hits
}

// Observe is DetectWithLegacy (legacy nil: Detect) that also returns the
// counted marks that are not campaigns, in the order given, at most
// pipeline.MaxSightings: the review records them so that a campaign found
// later can link this room (retro-linking).
func (d *Detector) Observe(ctx context.Context, room string, sightings []pipeline.CampaignSighting, legacyRoom string, legacy []pipeline.CampaignSighting) (hits, below []pipeline.CampaignCount) {
	if len(sightings) == 0 {
		d.m.lookups.WithLabelValues("no_marks").Inc()
		return nil, nil
	}
	ctx, cancel := clock.WithTimeout(ctx, d.clk, d.cfg.Timeout)
	defer cancel()
	start := d.clk.Now()
	counts, err := d.counter.Observe(ctx, room, sightings, start.UTC())
	if err == nil && len(legacy) == len(sightings) {
		if old, lerr := d.counter.Observe(ctx, legacyRoom, legacy, start.UTC()); lerr == nil && len(old) == len(counts) {
			for i := range counts {
				counts[i].Rooms = max(counts[i].Rooms, old[i].Rooms)
				counts[i].Senders = max(counts[i].Senders, old[i].Senders)
			}
		}
	}
	d.m.seconds.Observe(d.clk.Since(start).Seconds())
	switch {
	case err != nil && ctx.Err() != nil:
		d.m.lookups.WithLabelValues("timeout").Inc()
		return nil, nil
	case err != nil:
		d.m.lookups.WithLabelValues("unavailable").Inc()
		return nil, nil
	}
	seen := map[string]bool{}
	for _, n := range counts {
		key := string(n.Kind) + n.Mark
		switch {
		case seen[key]:
			// One mark in two messages: recorded once.
		case d.cfg.IsCampaign(n):
			hits = append(hits, n)
		case len(below) < pipeline.MaxSightings:
			below = append(below, n)
		}
		seen[key] = true
	}
	// Most rooms first, then by kind and mark, as storage reads them back.
	slices.SortFunc(below, func(a, b pipeline.CampaignCount) int {
		return cmp.Or(cmp.Compare(b.Rooms, a.Rooms), cmp.Compare(b.Kind, a.Kind), cmp.Compare(a.Mark, b.Mark))
	})
	if len(hits) == 0 {
		d.m.lookups.WithLabelValues("none").Inc()
		return nil, below
	}
	d.m.lookups.WithLabelValues("campaign").Inc()
	slices.SortStableFunc(hits, func(a, b pipeline.CampaignCount) int { return cmp.Compare(b.Rooms, a.Rooms) })
	return hits[:min(len(hits), pipeline.MaxCampaigns)], below
}

type metrics struct {
	lookups *prometheus.CounterVec
	classes *prometheus.CounterVec
	seconds prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_campaign_lookups_total",
			Help: "Campaign counts per review by outcome: campaign, none, no_marks (no risky message), unavailable (the counter failed) or timeout; the last two reviews went on without campaign signals."},
			[]string{"outcome"}),
		classes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_campaign_signals_total",
			Help: "Campaign signals by class: campaign (a script or contact spread across accounts or pushed by an account without an established clean history) or repeat_sender (one verified or established account repeating itself)."},
			[]string{"class"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chatguard_campaign_lookup_seconds",
			Help:    "Time of the one campaign-counter call a review makes.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25}}),
	}
	for _, o := range []string{"campaign", "none", "no_marks", "unavailable", "timeout"} {
		m.lookups.WithLabelValues(o)
	}
	for _, c := range []string{"campaign", "repeat_sender"} {
		m.classes.WithLabelValues(c)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.lookups, m.classes, m.seconds} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("campaign: register metrics: %w", err)
			}
		}
	}
	return m, nil
}
