package rediscampaign

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign/campaigntest"
)

var t0 = time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)

// setup returns a counter on the real Redis under a key prefix of its own
// (removed when the test ends).
func setup(t testing.TB, r stacktest.RedisTarget, mod func(*Config)) (*Counter, redis.UniversalClient) {
	t.Helper()
	rdb := r.Client(t, nil)
	cfg := DefaultConfig()
	cfg.Prefix = stacktest.Unique("test:cm") + ":"
	cfg.Shards, cfg.MaxMarks = 16, 16*MaxPerShard
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(rdb, cfg, prometheus.NewRegistry())
	require.NoError(t, err)
	t.Cleanup(func() { cleanup(rdb, cfg.Prefix) })
	return c, rdb
}

func cleanup(rdb redis.UniversalClient, prefix string) { stacktest.DeleteKeys(rdb, prefix) }

// TestRedisCounterConforms runs the suite the fake passes against the
// real Redis.
func TestRedisCounterConforms(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		campaigntest.Run(t, func(t *testing.T) pipeline.CampaignCounter {
			c, _ := setup(t, r, nil)
			return c
		})
	})
}

func sighting(i int) pipeline.CampaignSighting {
	return pipeline.CampaignSighting{Kind: pipeline.CampaignScript, Mark: campaigntest.Pseudonym(fmt.Sprint("mark-", i)),
		MessageID: "m", Sender: campaigntest.Pseudonym("sender")}
}

// TestEvictsTheLeastRecentlySeenOverTheCap: each shard keeps its share of
// the cap; the marks seen longest ago go first, and every eviction is
// counted. A mark evicted and seen again starts from one room.
func TestEvictsTheLeastRecentlySeenOverTheCap(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		c, rdb := setup(t, r, func(c *Config) { c.Shards, c.MaxMarks = 1, 10 })
		ctx := context.Background()
		room := campaigntest.Pseudonym("r1")
		for i := range 15 {
			_, err := c.Observe(ctx, room, []pipeline.CampaignSighting{sighting(i)}, t0.Add(time.Duration(i)*time.Second))
			require.NoError(t, err)
		}
		require.EqualValues(t, 10, rdb.HLen(ctx, c.Keys(0)[0]).Val())
		require.EqualValues(t, 10, rdb.ZCard(ctx, c.Keys(0)[2]).Val())
		require.Equal(t, 5.0, testutil.ToFloat64(c.evicted))
		got, err := c.Observe(ctx, campaigntest.Pseudonym("r2"), []pipeline.CampaignSighting{sighting(0), sighting(14)}, t0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, 1, got[0].Rooms, "mark 0 was evicted: counted from this room on")
		require.Equal(t, 2, got[1].Rooms, "mark 14 was seen last and kept")
		require.Equal(t, 6.0, testutil.ToFloat64(c.evicted), "making room for mark 0 evicted the oldest")
	})
}

// TestUnseenMarksLeaveAndKeysExpire: a mark no room carried for a whole
// window is dropped (counted) at the shard's next call, and the shard's
// keys expire an hour after the window when nothing touches them.
func TestUnseenMarksLeaveAndKeysExpire(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		c, rdb := setup(t, r, func(c *Config) { c.Shards, c.MaxMarks = 1, MaxPerShard })
		ctx := context.Background()
		room := campaigntest.Pseudonym("r1")
		_, err := c.Observe(ctx, room, []pipeline.CampaignSighting{sighting(1), sighting(2)}, t0)
		require.NoError(t, err)
		ttl := rdb.PTTL(ctx, c.Keys(0)[0]).Val()
		require.InDelta(t, (25 * time.Hour).Seconds(), ttl.Seconds(), 60)
		_, err = c.Observe(ctx, room, []pipeline.CampaignSighting{sighting(3)}, t0.Add(25*time.Hour))
		require.NoError(t, err)
		require.Equal(t, 2.0, testutil.ToFloat64(c.expired))
		require.EqualValues(t, 1, rdb.HLen(ctx, c.Keys(0)[0]).Val())
	})
}

// TestOneRoundTripPerReview: a review's marks spread over shards cost one
// pipelined round trip (once the script is cached), counted by a hook on
// the client.
func TestOneRoundTripPerReview(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		c, rdb := setup(t, r, nil)
		// The first call after a Redis restart loads the script: a second trip.
		_, err := c.Observe(context.Background(), campaigntest.Pseudonym("r0"), []pipeline.CampaignSighting{sighting(0)}, t0)
		require.NoError(t, err)
		h := &countHook{}
		rdb.AddHook(h)
		var s []pipeline.CampaignSighting
		for i := range 30 {
			s = append(s, sighting(i))
		}
		_, err = c.Observe(context.Background(), campaigntest.Pseudonym("r"), s, t0)
		require.NoError(t, err)
		require.Equal(t, 1, h.pipelines, "one pipeline")
		require.Equal(t, 0, h.singles, "no call outside it")
		require.Greater(t, h.cmds, 1, "several shards")
	})
}

type countHook struct{ pipelines, singles, cmds int }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !strings.EqualFold(cmd.Name(), "hello") && !strings.EqualFold(cmd.Name(), "client") {
			h.singles++
		}
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines++
		h.cmds += len(cmds)
		return next(ctx, cmds)
	}
}

// TestEveryScriptTouchesOneSlot: a shard's three keys share a hash tag.
func TestEveryScriptTouchesOneSlot(t *testing.T) {
	c, err := New(nil, DefaultConfig(), nil)
	require.NoError(t, err)
	shards := map[int]bool{}
	for i := range 40000 {
		shard, err := c.Shard(sighting(i).Mark)
		require.NoError(t, err)
		keys := c.Keys(shard)
		require.Len(t, keys, 3)
		require.Equal(t, slot(keys[0]), slot(keys[1]))
		require.Equal(t, slot(keys[0]), slot(keys[2]))
		shards[shard] = true
	}
	require.Greater(t, len(shards), DefaultShards*9/10, "marks spread over the shards")
}

// TestConfigValidateJoinsEveryProblem: one error names them all.
func TestConfigValidateJoinsEveryProblem(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	err := Config{Prefix: "a{b", Shards: 0, MaxMarks: -1, ExactCap: 1, Window: 90 * time.Minute}.Validate()
	for _, want := range []string{"braces", "shards", "max marks", "exact cap", "window"} {
		require.ErrorContains(t, err, want)
	}
	cfg := DefaultConfig()
	cfg.MaxMarks = 2_000_000
	require.ErrorContains(t, cfg.Validate(), "raise the shards to at least 15625", "244 a shard would leave the compact encoding")
}

// TestRedisDownIsAnErrorWithinTheContext: an unreachable Redis answers an
// error, within the caller's deadline.
func TestRedisDownIsAnErrorWithinTheContext(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New(rdb, DefaultConfig(), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Observe(ctx, campaigntest.Pseudonym("r"), []pipeline.CampaignSighting{sighting(1)}, t0)
	require.ErrorContains(t, err, "rediscampaign: observe")
}

// TestLargeStatesLiveApartAndTheRestStayCompact: a mark in many rooms
// outgrows the compact bound and moves to the shard's large hash, so the
// compact hash and the recency set keep Redis's listpack encoding (the
// bytes per mark depend on it); its counts carry over the move, it moves
// back when its rooms age out, and expiry clears the large hash too.
func TestLargeStatesLiveApartAndTheRestStayCompact(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		c, rdb := setup(t, r, func(c *Config) { c.Shards, c.MaxMarks = 1, MaxPerShard })
		ctx := context.Background()
		keys := c.Keys(0)
		sender := campaigntest.Pseudonym("sender")
		mark := func(name string) pipeline.CampaignSighting {
			return pipeline.CampaignSighting{Kind: pipeline.CampaignScript, Mark: campaigntest.Pseudonym(name), MessageID: "m", Sender: sender}
		}
		fieldOf := func(s pipeline.CampaignSighting) string {
			f, _, err := field(s.Mark)
			require.NoError(t, err)
			return string(f)
		}
		a, b := mark("a"), mark("b")
		for i := range 12 {
			got, err := c.Observe(ctx, campaigntest.Pseudonym(fmt.Sprint("room-", i)), []pipeline.CampaignSighting{a, b, sighting(i)}, t0)
			require.NoError(t, err)
			require.Equal(t, i+1, got[0].Rooms, "counts carry over the move")
			require.Equal(t, 1, got[0].Senders)
		}
		for i := 12; i < 52; i++ {
			_, err := c.Observe(ctx, campaigntest.Pseudonym("room-x"), []pipeline.CampaignSighting{sighting(i)}, t0)
			require.NoError(t, err)
		}
		require.False(t, rdb.HExists(ctx, keys[0], fieldOf(a)).Val(), "12 rooms do not fit 64 bytes")
		require.True(t, rdb.HExists(ctx, keys[1], fieldOf(a)).Val())
		require.EqualValues(t, 52, rdb.HLen(ctx, keys[0]).Val())
		require.EqualValues(t, 2, rdb.HLen(ctx, keys[1]).Val())
		require.Equal(t, "listpack", rdb.ObjectEncoding(ctx, keys[0]).Val())
		require.Equal(t, "listpack", rdb.ObjectEncoding(ctx, keys[2]).Val())

		// A day and a second later: a is seen again in one room, b not at all.
		got, err := c.Observe(ctx, campaigntest.Pseudonym("room-new"), []pipeline.CampaignSighting{a}, t0.Add(24*time.Hour+time.Second))
		require.NoError(t, err)
		require.Equal(t, 1, got[0].Rooms, "the old rooms aged out")
		require.True(t, rdb.HExists(ctx, keys[0], fieldOf(a)).Val(), "a fits the compact hash again")
		require.False(t, rdb.HExists(ctx, keys[1], fieldOf(a)).Val())
		require.False(t, rdb.HExists(ctx, keys[1], fieldOf(b)).Val(), "b expired from the large hash")
		require.Equal(t, 53.0, testutil.ToFloat64(c.expired), "every mark but a was last seen over a window ago")
		require.EqualValues(t, 1, rdb.HLen(ctx, keys[0]).Val())
		require.EqualValues(t, 0, rdb.Exists(ctx, keys[1]).Val(), "the large hash emptied")
	})
}

// TestAnEntryFromTheNextHourStays: replicas' clocks differ a little, so at
// an hour's turn one may stamp a mark with the next hour before another
// counts it in the previous one; the 16-bit hours must not read that entry
// as a window old.
func TestAnEntryFromTheNextHourStays(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		c, _ := setup(t, r, nil)
		ctx := context.Background()
		turn := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
		_, err := c.Observe(ctx, campaigntest.Pseudonym("ahead"), []pipeline.CampaignSighting{sighting(1)}, turn.Add(time.Millisecond))
		require.NoError(t, err)
		got, err := c.Observe(ctx, campaigntest.Pseudonym("behind"), []pipeline.CampaignSighting{sighting(1)}, turn.Add(-time.Millisecond))
		require.NoError(t, err)
		require.Equal(t, 2, got[0].Rooms)
	})
}
