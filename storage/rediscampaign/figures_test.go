package rediscampaign

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/pipeline/campaign/campaigntest"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
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
	c, _ := setup(b, stacktest.RedisNode(b), func(c *Config) { c.Shards, c.MaxMarks = DefaultShards, DefaultMaxMarks })
	keys, err := pseudonym.New([]byte("bench-key-of-at-least-thirty-two-bytes"))
	require.NoError(b, err)
	marker := chatprep.NewCampaignMarker(keys, false)
	rooms := campaigntest.Corpus(campaigntest.DefaultCorpus())
	counts := make([][]pipeline.CampaignCount, len(rooms))
	var lat []time.Duration
	// CPU time beside wall time: on a shared, loaded machine the wall
	// time's tail is mostly waiting for a core, while CPU time is the work
	// a review adds. Redis's is the server's over the whole run, every
	// client's, so on a shared Redis it is an upper bound.
	var goCPU time.Duration
	redisCPU0 := redisCPU(b, c.rdb)
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
		cpu0 := processCPU()
		start := time.Now()
		n, err := c.Observe(context.Background(), marker.Party("room", r.ID), marker.Sightings(risky), r.At)
		lat = append(lat, time.Since(start))
		goCPU += processCPU() - cpu0
		require.NoError(b, err)
		counts[i] = n
	}
	perReview := func(d time.Duration) time.Duration { return (d / time.Duration(len(lat))).Round(time.Microsecond) }
	redisPerReview := perReview(redisCPU(b, c.rdb) - redisCPU0)
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
	fmt.Printf("\n| added per review with a risky message (%d reviews, real Redis) | p50 | p90 | p99 | max | goal |\n| --- | --- | --- | --- | --- | --- |\n", len(lat))
	fmt.Printf("| fingerprint, key, one pipelined round trip | %s | %s | %s | %s | p99 ≤ 2 ms |\n", pct(0.5), pct(0.9), pct(0.99), lat[len(lat)-1].Round(time.Microsecond))
	fmt.Printf("\n| CPU per review with a risky message | this process (fingerprint, key, client) | Redis server (every client's) |\n| --- | --- | --- |\n")
	fmt.Printf("| mean over %d reviews | %s | %s |\n", len(lat), perReview(goCPU), redisPerReview)
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is the Redis server's user and system CPU time so far (INFO
// cpu).
func redisCPU(b *testing.B, rdb redis.UniversalClient) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	require.NoError(b, err)
	var total float64
	for _, line := range strings.Split(info, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_user" || name == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(b, err)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
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

// BenchmarkCampaignMemory fills the counter past its cap of
// BENCH_CAMPAIGN_MARKS marks (default 1,000,000; reviews of 5 marks, one
// review in 20 also seen in 40 rooms), so that every shard is full and
// evicting as at steady state, and prints Redis's MEMORY USAGE of every
// key it wrote, by key kind, per mark kept, with shards scaled to the
// default density. The figure is in docs/performance.md.
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
	c, rdb := setup(b, stacktest.RedisNode(b), func(c *Config) { c.Shards, c.MaxMarks = max(1, n*DefaultShards/DefaultMaxMarks), n })
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	const perReview = 5
	written := n + n/3
	for i := 0; i < written; i += perReview {
		var s []pipeline.CampaignSighting
		for j := i; j < min(i+perReview, written); j++ {
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
	kinds := []string{"compact states (hash)", "large states (hash)", "recency (sorted set)"}
	var bytes, keys, entries [3]int64
	encodings := [3]map[string]int{{}, {}, {}}
	for shard := range c.cfg.Shards {
		for k, key := range c.Keys(shard) {
			v, err := rdb.MemoryUsage(ctx, key, 0).Result()
			if err != nil {
				continue
			}
			bytes[k] += v
			keys[k]++
			encodings[k][rdb.ObjectEncoding(ctx, key).Val()]++
			if k < 2 {
				entries[k] += rdb.HLen(ctx, key).Val()
			} else {
				entries[k] += rdb.ZCard(ctx, key).Val()
			}
		}
	}
	marks := entries[0] + entries[1]
	require.Equal(b, entries[2], marks, "every mark kept is in one hash and the recency set")
	require.LessOrEqual(b, marks, int64(n), "the cap holds")
	total := bytes[0] + bytes[1] + bytes[2]
	fmt.Printf("| key kind | keys | encodings | entries | MEMORY USAGE | bytes per mark kept |\n| --- | --- | --- | --- | --- | --- |\n")
	for k, name := range kinds {
		fmt.Printf("| %s | %d | %v | %d | %.2f MB | %.1f |\n", name, keys[k], encodings[k], entries[k], float64(bytes[k])/1e6, float64(bytes[k])/float64(marks))
	}
	fmt.Printf("\n| marks written | cap | marks kept | shards | MEMORY USAGE | bytes per mark | per 1 M marks | goal |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	fmt.Printf("| %d | %d | %d | %d | %.2f MB | %.1f | %.1f MB | ≤ 200 MB |\n", written, n, marks, c.cfg.Shards, float64(total)/1e6,
		float64(total)/float64(marks), float64(total)/float64(marks)*1e6/1e6)
}
