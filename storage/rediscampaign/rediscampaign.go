// Package rediscampaign counts campaign marks fleet-wide in Redis
// (pipeline.CampaignCounter): for each mark, the distinct rooms and senders
// that carried it over a sliding window of whole hours.
//
// Layout, for Redis Cluster: marks are spread over a fixed number of
// shards by their last bytes. Shard i's three keys carry the hash tag
// "{cm<i>}", so they live in one slot:
//
//	<prefix>{cm<i>}:s  hash: a mark's first 8 bytes -> its state (script.go),
//	                   for states of at most 64 bytes (nearly every mark)
//	<prefix>{cm<i>}:b  hash: the same for the few larger states
//	<prefix>{cm<i>}:t  sorted set: a mark's 8 bytes -> last seen (s)
//
// A review's marks are grouped by shard; each shard's group is one script
// call over that shard's keys (one slot, atomic), and every call of the
// review goes in one pipelined round trip.
//
// Memory is bounded three ways: a mark's state holds at most the exact
// cap of rooms and of senders (above it a bottom-k sample); a mark unseen
// for a whole window is dropped; and each shard keeps at most
// MaxMarks/Shards marks, evicting the least recently seen (counted).
//
// The bytes per mark come from Redis's compact encodings: a hash or sorted
// set stays a listpack (a few bytes of framing per entry) while it has at
// most 128 entries of at most 64 bytes each (Redis's defaults for
// zset-max-listpack-entries and hash-max-listpack-value), and turns into
// a hashtable or skiplist, with about a hundred bytes of pointers per
// entry, the moment one entry breaks either bound. So a shard holds at
// most 128 marks (Validate), a mark is its first 8 bytes rather than 12,
// a state packs each room or sender in 6 bytes, and the states that
// outgrow 64 bytes (more than ten rooms and senders together) move to a hash of their
// own so that they cannot convert their neighbours' (docs/performance.md).
package rediscampaign

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.CampaignCounter = (*Counter)(nil)

// Config tunes the counter. Start from DefaultConfig.
type Config struct {
	// Prefix starts every key; it must not contain braces (the hash tag
	// is the counter's).
	Prefix string
	// Shards is the fixed number of shards. Changing it moves marks
	// between shards (their counts start again), so it is set once per
	// deployment. It must be at least MaxMarks/MaxPerShard.
	Shards int
	// MaxMarks bounds the marks kept fleet-wide; each shard keeps
	// MaxMarks/Shards (at most MaxPerShard) and evicts the least
	// recently seen above it.
	MaxMarks int
	// ExactCap is how many rooms (and senders) a mark counts exactly;
	// above it the count is a bottom-k estimate over as many hashes.
	ExactCap int
	// Window is the sliding window, in whole hours.
	Window time.Duration
}

// The defaults: 1 M marks over 8,192 shards, 122 marks a shard
// (docs/performance.md has the bytes per mark).
const (
	DefaultPrefix   = "chatguard:cm:"
	DefaultShards   = 8192
	DefaultMaxMarks = 1_000_000
	DefaultExactCap = 32
	DefaultWindow   = 24 * time.Hour
)

// MaxPerShard is the most marks a shard may keep: Redis's default
// zset-max-listpack-entries, above which the shard's recency set leaves
// its compact encoding and a mark costs about three times the bytes.
const MaxPerShard = 128

// compactValue is the largest state kept in a shard's compact hash:
// Redis's default hash-max-listpack-value. A larger state would turn the
// whole hash into a hashtable, so it goes to the shard's other hash.
const compactValue = 64

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Prefix: DefaultPrefix, Shards: DefaultShards, MaxMarks: DefaultMaxMarks, ExactCap: DefaultExactCap, Window: DefaultWindow}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if strings.ContainsAny(c.Prefix, "{}") {
		errs = append(errs, fmt.Errorf("key prefix %q must not contain braces", c.Prefix))
	}
	if c.Shards < 1 || c.Shards > 1<<20 {
		errs = append(errs, fmt.Errorf("shards %d must be within 1..%d", c.Shards, 1<<20))
	}
	if c.MaxMarks < c.Shards {
		errs = append(errs, fmt.Errorf("max marks %d must be at least the shards (%d)", c.MaxMarks, c.Shards))
	}
	if c.Shards >= 1 && c.MaxMarks/c.Shards > MaxPerShard {
		errs = append(errs, fmt.Errorf("max marks %d over %d shards is %d a shard, above %d: raise the shards to at least %d so each shard's keys keep Redis's compact encoding",
			c.MaxMarks, c.Shards, c.MaxMarks/c.Shards, MaxPerShard, (c.MaxMarks+MaxPerShard-1)/MaxPerShard))
	}
	if c.ExactCap < 4 || c.ExactCap > 1024 {
		errs = append(errs, fmt.Errorf("exact cap %d must be within 4..1024", c.ExactCap))
	}
	if c.Window < time.Hour || c.Window > 7*24*time.Hour || c.Window%time.Hour != 0 {
		errs = append(errs, fmt.Errorf("window %s must be whole hours within 1h..168h", c.Window))
	}
	return errors.Join(errs...)
}

// Counter is the Redis campaign counter. It is safe for concurrent use.
type Counter struct {
	rdb     redis.UniversalClient
	cfg     Config
	evicted prometheus.Counter
	expired prometheus.Counter
}

// New returns the counter over rdb, whose options bound every call (the
// caller's context bounds it further). reg may be nil.
func New(rdb redis.UniversalClient, cfg Config, reg prometheus.Registerer) (*Counter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("rediscampaign: %w", err)
	}
	c := &Counter{rdb: rdb, cfg: cfg,
		evicted: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_campaign_marks_evicted_total",
			Help: "Campaign marks evicted, least recently seen first, because their shard was over its share of the marks cap."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_campaign_marks_expired_total",
			Help: "Campaign marks dropped because no room carried them for a whole window."}),
	}
	if reg != nil {
		for _, m := range []prometheus.Collector{c.evicted, c.expired} {
			if err := reg.Register(m); err != nil {
				return nil, fmt.Errorf("rediscampaign: register metrics: %w", err)
			}
		}
	}
	return c, nil
}

// pseudonymBytes are a keyed pseudonym's 12 bytes.
func pseudonymBytes(p string) ([]byte, error) {
	if !pipeline.IsSubjectPseudonym(p) {
		return nil, errors.New("a mark is not a keyed pseudonym")
	}
	_, h, _ := strings.Cut(p, ":")
	return hex.DecodeString(h)
}

// field is what a shard keeps of a mark: its first 8 bytes, the hash
// field and recency member. 64 bits among a shard's 128 marks collide
// with odds of about 1 in 10^15; the last 4 bytes pick the shard.
func field(mark string) (f []byte, shard uint32, err error) {
	b, err := pseudonymBytes(mark)
	if err != nil {
		return nil, 0, err
	}
	return b[:8], binary.BigEndian.Uint32(b[8:12]), nil
}

// hash32 is the 32-bit hash the state keeps of a room or sender
// pseudonym: its first 4 bytes, uniform because it is an HMAC.
func hash32(pseudonym string) (uint32, error) {
	b, err := pseudonymBytes(pseudonym)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(b), nil
}

// Shard returns the shard of a mark (a keyed pseudonym); it fails, with
// shard 0, on anything else.
func (c *Counter) Shard(mark string) (int, error) {
	_, h, err := field(mark)
	return int(h % uint32(c.cfg.Shards)), err
}

func (c *Counter) tag(shard int) string { return c.cfg.Prefix + "{cm" + strconv.Itoa(shard) + "}" }

// Keys are the three keys of a shard, in the script's order: the compact
// states, the large states, the recency set.
func (c *Counter) Keys(shard int) []string {
	t := c.tag(shard)
	return []string{t + ":s", t + ":b", t + ":t"}
}

// group is one shard's part of a review: the script's mark arguments and
// where each answer goes.
type group struct {
	args []any
	idx  []int
}

// Observe implements pipeline.CampaignCounter: one script call per shard
// the marks fall in, all in one pipelined round trip.
func (c *Counter) Observe(ctx context.Context, room string, sightings []pipeline.CampaignSighting, at time.Time) ([]pipeline.CampaignCount, error) {
	if len(sightings) == 0 {
		return nil, nil
	}
	groups, order, err := c.group(room, sightings, at)
	if err != nil {
		return nil, fmt.Errorf("rediscampaign: observe: %w", err)
	}
	run := func() ([]redis.Cmder, error) {
		return c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, shard := range order {
				observeScript.EvalSha(ctx, p, c.Keys(shard), groups[shard].args...)
			}
			return nil
		})
	}
	cmds, err := run()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Redis restarted or its script cache was flushed: load and run
		// again. NOSCRIPT fails every call, so nothing ran twice.
		if err = observeScript.Load(ctx, c.rdb).Err(); err == nil {
			cmds, err = run()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("rediscampaign: observe: %w", err)
	}
	out := make([]pipeline.CampaignCount, len(sightings))
	for i, cmd := range cmds {
		if err := c.read(cmd, groups[order[i]].idx, sightings, out); err != nil {
			return nil, fmt.Errorf("rediscampaign: observe: %w", err)
		}
	}
	return out, nil
}

// group checks the pseudonyms and sorts the sightings by shard.
func (c *Counter) group(room string, sightings []pipeline.CampaignSighting, at time.Time) (map[int]*group, []int, error) {
	roomHash, err := hash32(room)
	if err != nil {
		return nil, nil, fmt.Errorf("room: %w", err)
	}
	win := int64(c.cfg.Window / time.Hour)
	ttl := (c.cfg.Window + time.Hour).Milliseconds()
	groups := map[int]*group{}
	var order []int
	for i, s := range sightings {
		f, h, err := field(s.Mark)
		if err != nil {
			return nil, nil, err
		}
		sender, err := hash32(s.Sender)
		if err != nil {
			return nil, nil, fmt.Errorf("sender: %w", err)
		}
		shard := int(h % uint32(c.cfg.Shards))
		g := groups[shard]
		if g == nil {
			g = &group{args: []any{at.Unix(), at.Unix() / 3600, win, c.cfg.ExactCap, c.cfg.MaxMarks / c.cfg.Shards, ttl, roomHash, compactValue}}
			groups[shard] = g
			order = append(order, shard)
		}
		g.args = append(g.args, f, sender)
		g.idx = append(g.idx, i)
	}
	return groups, order, nil
}

// read copies one script answer into out and counts its evictions.
func (c *Counter) read(cmd redis.Cmder, idx []int, sightings []pipeline.CampaignSighting, out []pipeline.CampaignCount) error {
	vals, err := cmd.(*redis.Cmd).Int64Slice()
	if err != nil {
		return err
	}
	if len(vals) != 2*len(idx)+2 {
		return fmt.Errorf("script answered %d values, want %d", len(vals), 2*len(idx)+2)
	}
	for j, i := range idx {
		s := sightings[i]
		out[i] = pipeline.CampaignCount{Kind: s.Kind, Mark: s.Mark, MessageID: s.MessageID, Rooms: int(vals[2*j]), Senders: int(vals[2*j+1])}
	}
	c.evicted.Add(float64(vals[len(vals)-2]))
	c.expired.Add(float64(vals[len(vals)-1]))
	return nil
}
