package rediscampaign

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/pipeline/campaign/campaigntest"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

// BenchmarkCampaignCorpus runs the generated corpus (campaigntest.Corpus)
// through the reviewer's campaign step against the real Redis, in review
// order over the simulated day, and prints campaign recall, the
// ordinary rooms' false-positive rate and the step's added latency per
// review (fingerprinting, keying and the one Redis round trip). make
// bench-campaign; the figures are in docs/performance.md.
func BenchmarkCampaignCorpus(b *testing.B) {
	for b.Loop() {
		corpusFigures(b)
	}
}

func corpusFigures(b *testing.B) {
	c, _ := setup(b, func(c *Config) { c.Shards = DefaultShards })
	marker := chatprep.NewCampaignMarker([]byte("bench-key-of-at-least-thirty-two-bytes"), false)
	rooms := campaigntest.Corpus(campaigntest.DefaultCorpus())
	counts := make([][]pipeline.CampaignCount, len(rooms))
	var lat []time.Duration
	for i, r := range rooms {
		// What the reviewer adds: fingerprint and key the risky messages
		// (chatprep has found their signals already), one Redis call.
		var risky []pipeline.ChatMessage
		for _, m := range r.Msgs {
			if len(chatprep.FindSignals(m.MessageID, m.Text)) > 0 {
				risky = append(risky, m)
			}
		}
		if len(risky) == 0 {
			continue
		}
		start := time.Now()
		n, err := c.Observe(context.Background(), marker.Party("room", r.ID), marker.Sightings(risky), r.At)
		lat = append(lat, time.Since(start))
		require.NoError(b, err)
		counts[i] = n
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Microsecond) }
	fmt.Printf("| min rooms | rooms per sender | campaign rooms given a signal (recall, goal ≥ 95 %%) | ordinary rooms given one (goal ≤ 0.1 %%) | meet-up / photo-request rooms given one |\n")
	fmt.Printf("| --- | --- | --- | --- | --- |\n")
	for _, cfg := range sweep() {
		hit, total := map[campaigntest.RoomKind]int{}, map[campaigntest.RoomKind]int{}
		for i, r := range rooms {
			total[r.Kind]++
			if slices.ContainsFunc(counts[i], cfg.IsCampaign) {
				hit[r.Kind]++
			}
		}
		ordinary := total[campaigntest.Ordinary] + total[campaigntest.Meetup] + total[campaigntest.Photos]
		fp := hit[campaigntest.Ordinary] + hit[campaigntest.Meetup] + hit[campaigntest.Photos]
		mark := ""
		if cfg.MinRooms == campaign.DefaultMinRooms && cfg.RoomsPerSender == campaign.DefaultRoomsPerSender {
			mark = " (default)"
		}
		fmt.Printf("| %d%s | %g | %d / %d = %.1f %% | %d / %d = %.2f %% | %d / %d, %d / %d |\n", cfg.MinRooms, mark, cfg.RoomsPerSender,
			hit[campaigntest.Scam], total[campaigntest.Scam], 100*float64(hit[campaigntest.Scam])/float64(total[campaigntest.Scam]),
			fp, ordinary, 100*float64(fp)/float64(ordinary),
			hit[campaigntest.Meetup], total[campaigntest.Meetup], hit[campaigntest.Photos], total[campaigntest.Photos])
	}
	fmt.Printf("\n| added per review with a risky message (%d reviews, real Redis) | p50 | p99 | max | goal |\n| --- | --- | --- | --- | --- |\n", len(lat))
	fmt.Printf("| fingerprint, key, one pipelined round trip | %s | %s | %s | p99 ≤ 2 ms |\n", pct(0.5), pct(0.99), lat[len(lat)-1].Round(time.Microsecond))
}

// sweep are the thresholds the corpus figures compare, the defaults
// among them (MaxSenders at its default throughout).
func sweep() []campaign.Config {
	var out []campaign.Config
	for _, mr := range []int{3, 4, 5} {
		for _, rps := range []float64{1, 1.25, 1.5, 2, 3} {
			c := campaign.DefaultConfig()
			c.MinRooms, c.RoomsPerSender = mr, rps
			out = append(out, c)
		}
	}
	return out
}

// BenchmarkCampaignMemory fills the counter with BENCH_CAMPAIGN_MARKS
// marks (default 1,000,000; reviews of 5 marks, one in a hundred marks
// also seen in 40 rooms) and prints Redis's MEMORY USAGE of every key it
// wrote, per mark, at the density of 1 M marks over the default shards.
// The figure is in docs/performance.md.
func BenchmarkCampaignMemory(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_CAMPAIGN_MARKS")); err == nil && v > 0 {
		n = v
	}
	for b.Loop() {
		memoryFigures(b, n)
	}
}

func memoryFigures(b *testing.B, n int) {
	// Shards scaled so that each holds as many marks as at 1 M marks with
	// the default shards: Redis encodes small hashes and sorted sets
	// compactly, so the density, not the total, sets the bytes per mark.
	c, rdb := setup(b, func(c *Config) { c.Shards, c.MaxMarks = max(1, n*DefaultShards/1_000_000), 2*n })
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	const perReview = 5
	for i := 0; i < n; i += perReview {
		var s []pipeline.CampaignSighting
		for j := i; j < min(i+perReview, n); j++ {
			s = append(s, pipeline.CampaignSighting{Kind: pipeline.CampaignScript, Mark: campaigntest.Pseudonym(fmt.Sprint("m", j)),
				MessageID: "m", Sender: campaigntest.Pseudonym(fmt.Sprint("s", i))})
		}
		rooms := 1
		if i%100 == 0 {
			rooms = 40
		}
		for k := range rooms {
			_, err := c.Observe(ctx, campaigntest.Pseudonym(fmt.Sprint("r", i, "-", k)), s, at.Add(time.Duration(i)*time.Millisecond))
			require.NoError(b, err)
		}
	}
	var bytes, keys int64
	for shard := range c.cfg.Shards {
		for _, k := range c.Keys(shard) {
			v, err := rdb.MemoryUsage(ctx, k, 0).Result()
			if err == nil {
				bytes += v
				keys++
			}
		}
	}
	var marks int64
	for shard := range c.cfg.Shards {
		marks += rdb.HLen(ctx, c.Keys(shard)[0]).Val()
	}
	require.EqualValues(b, n, marks, "every mark kept")
	fmt.Printf("| marks | keys | MEMORY USAGE | bytes per mark | per 1 M marks | goal |\n| --- | --- | --- | --- | --- | --- |\n")
	fmt.Printf("| %d | %d | %.1f MB | %.0f | %.0f MB | ≤ 200 MB |\n", n, keys, float64(bytes)/1e6, float64(bytes)/float64(n),
		float64(bytes)/float64(n)*1e6/1e6)
}
