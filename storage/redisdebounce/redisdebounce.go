// Package redisdebounce keeps the real-time trigger's per-room debounce
// state in Redis (pipeline.RoomActivity), shared by every trigger replica.
//
// Layout, for Redis Cluster: rooms are spread over a fixed number of
// shards by a hash of the room id. Shard i's keys all carry the hash tag
// "{rt<i>}", so they live in one slot:
//
//	<prefix>{rt<i>}:due          sorted set: room id -> due time (ms)
//	<prefix>{rt<i>}:r:<room id>  hash: the room's state (see scripts.go)
//	<prefix>{rt<i>}:s:<room id>  sorted set: seen message ids -> sent_at (ms)
//	<prefix>{rt<i>}:l:<room id>  sorted set: late message ids not yet in a
//	                             window -> sent_at (ms)
//
// Every operation on a room is one Lua script over the room's keys and its
// shard's due set: one slot, atomic. Claiming a due room sets a lease on
// it, so exactly one replica publishes it; a claimer that dies leaves the
// pending window recorded and another replica republishes it, unchanged,
// once the lease has run out.
//
// Memory per room is bounded: the hash has a fixed set of numeric fields
// and the seen and late sets keep at most Config.SeenCap ids each (the
// earliest sent go first; a duplicate of one is taken as new and at worst
// reviewed again).
//
// Late messages: a message sent before what its room's windows covered
// is recorded as late and leaves the room's next window alone (the
// trigger gives it a window of its own), so no window reaches back over
// an earlier one; the claim would still count such an overlap
// (pipeline.RoomWindow.DoubleCovered).
// A room's keys expire Config.Retention after its last write, so a room
// that fired and went quiet leaves nothing behind.
package redisdebounce

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

var _ pipeline.RoomActivity = (*Store)(nil)

// Config tunes the store. Start from DefaultConfig.
type Config struct {
	// Prefix starts every key; it must not contain braces (the hash tag
	// is the store's).
	Prefix string
	// Shards is the fixed number of due-set shards. Changing it moves
	// rooms between shards, so it is set once per deployment.
	Shards int
	// Quiet fires a room that has been quiet this long.
	Quiet time.Duration
	// MaxDelay fires a room this long after its first unreviewed message,
	// however busy it is.
	MaxDelay time.Duration
	// MaxWindow is the worker's longest window; no window is longer.
	MaxWindow time.Duration
	// Slack starts a window this long before its first message arrived:
	// the time a chat event may take from the chat service to the trigger,
	// so the message that opened the window is inside it.
	Slack time.Duration
	// Lease is how long a claim holds a room before another replica may
	// take the pending window over.
	Lease time.Duration
	// SeenCap bounds the message ids kept per room for deduplication.
	SeenCap int
	// Retention is how long a room's state outlives its last write.
	Retention time.Duration
}

// The defaults.
const (
	DefaultPrefix    = "chatguard:rt:"
	DefaultShards    = 64
	DefaultQuiet     = time.Minute
	DefaultMaxDelay  = 5 * time.Minute
	DefaultSlack     = time.Minute
	DefaultLease     = 30 * time.Second
	DefaultSeenCap   = 512
	DefaultRetention = time.Hour
)

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Prefix: DefaultPrefix, Shards: DefaultShards, Quiet: DefaultQuiet, MaxDelay: DefaultMaxDelay,
		MaxWindow: pipeline.DefaultMaxWindow, Slack: DefaultSlack, Lease: DefaultLease, SeenCap: DefaultSeenCap, Retention: DefaultRetention}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if strings.ContainsAny(c.Prefix, "{}") {
		errs = append(errs, fmt.Errorf("key prefix %q must not contain braces", c.Prefix))
	}
	if c.Shards < 1 || c.Shards > 16384 {
		errs = append(errs, fmt.Errorf("shards %d must be within 1..16384", c.Shards))
	}
	if c.Quiet < time.Second {
		errs = append(errs, fmt.Errorf("quiet %s must be at least 1s", c.Quiet))
	}
	if c.MaxDelay < c.Quiet {
		errs = append(errs, fmt.Errorf("max delay %s must not be shorter than quiet %s", c.MaxDelay, c.Quiet))
	}
	if c.MaxWindow < c.MaxDelay+c.Slack {
		errs = append(errs, fmt.Errorf("max window %s must be at least max delay + slack (%s)", c.MaxWindow, c.MaxDelay+c.Slack))
	}
	if c.Slack < 0 {
		errs = append(errs, fmt.Errorf("slack %s must not be negative", c.Slack))
	}
	if c.Lease < time.Second {
		errs = append(errs, fmt.Errorf("lease %s must be at least 1s", c.Lease))
	}
	if c.SeenCap < 1 || c.SeenCap > 100_000 {
		errs = append(errs, fmt.Errorf("seen cap %d must be within 1..100000", c.SeenCap))
	}
	if least := max(2*(c.MaxDelay+c.Lease), time.Minute); c.Retention < least {
		errs = append(errs, fmt.Errorf("retention %s must be at least twice max delay + lease, and 1m (%s)", c.Retention, least))
	}
	return errors.Join(errs...)
}

// Store is the Redis debounce state. It is safe for concurrent use.
type Store struct {
	rdb redis.UniversalClient
	cfg Config
	clk clock.Clock
}

// New returns the store over rdb (whose options bound every call), reading
// the time from clk.
func New(rdb redis.UniversalClient, cfg Config, clk clock.Clock) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("redisdebounce: %w", err)
	}
	return &Store{rdb: rdb, cfg: cfg, clk: clk}, nil
}

// Shards implements pipeline.RoomActivity.
func (s *Store) Shards() int { return s.cfg.Shards }

// Shard returns the shard of a room.
func (s *Store) Shard(roomID string) int {
	return int(crc32.ChecksumIEEE([]byte(roomID)) % uint32(s.cfg.Shards))
}

func (s *Store) tag(shard int) string { return s.cfg.Prefix + "{rt" + strconv.Itoa(shard) + "}" }

// DueKey, RoomKey, SeenKey and LateKey name a shard's due set and a
// room's keys.
func (s *Store) DueKey(shard int) string { return s.tag(shard) + ":due" }

// RoomKey names a room's state hash.
func (s *Store) RoomKey(roomID string) string { return s.tag(s.Shard(roomID)) + ":r:" + roomID }

// SeenKey names a room's set of seen message ids.
func (s *Store) SeenKey(roomID string) string { return s.tag(s.Shard(roomID)) + ":s:" + roomID }

// LateKey names a room's set of late messages not yet in a window.
func (s *Store) LateKey(roomID string) string { return s.tag(s.Shard(roomID)) + ":l:" + roomID }

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// recordKeys and the like are the keys each script touches, in order.
func (s *Store) recordKeys(roomID string) []string {
	return []string{s.RoomKey(roomID), s.SeenKey(roomID), s.DueKey(s.Shard(roomID)), s.LateKey(roomID)}
}

func (s *Store) claimKeys(roomID string) []string {
	return []string{s.RoomKey(roomID), s.DueKey(s.Shard(roomID)), s.SeenKey(roomID), s.LateKey(roomID)}
}

func (s *Store) ackKeys(roomID string) []string {
	return []string{s.RoomKey(roomID), s.DueKey(s.Shard(roomID))}
}

// Record implements pipeline.RoomActivity: one script call per event, all
// of them in one pipelined round trip.
func (s *Store) Record(ctx context.Context, evs []pipeline.ChatEvent) ([]pipeline.RecordOutcome, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	now := ms(s.clk.Now())
	run := func() ([]redis.Cmder, error) {
		return s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, ev := range evs {
				recordScript.EvalSha(ctx, p, s.recordKeys(ev.RoomID), ev.RoomID, ev.MessageID, now, ms(ev.SentAt),
					s.cfg.Quiet.Milliseconds(), s.cfg.MaxDelay.Milliseconds(), s.cfg.SeenCap, s.cfg.Retention.Milliseconds())
			}
			return nil
		})
	}
	cmds, err := run()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Redis restarted or its script cache was flushed: load and run
		// again. NOSCRIPT fails every call, so nothing ran twice.
		if err = recordScript.Load(ctx, s.rdb).Err(); err == nil {
			cmds, err = run()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("redisdebounce: record: %w", err)
	}
	out := make([]pipeline.RecordOutcome, len(cmds))
	for i, c := range cmds {
		v, err := c.(*redis.Cmd).Text()
		if err != nil {
			return nil, fmt.Errorf("redisdebounce: record: %w", err)
		}
		out[i] = pipeline.RecordOutcome(v)
	}
	return out, nil
}

// Due implements pipeline.RoomActivity.
func (s *Store) Due(ctx context.Context, shard, limit int) ([]string, error) {
	rooms, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.DueKey(shard), Start: "-inf", Stop: strconv.FormatInt(ms(s.clk.Now()), 10),
		ByScore: true, Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("redisdebounce: due: %w", err)
	}
	return rooms, nil
}

// Claim implements pipeline.RoomActivity.
func (s *Store) Claim(ctx context.Context, roomID string) (pipeline.RoomWindow, bool, error) {
	token := uuid.NewString()
	v, err := claimScript.Run(ctx, s.rdb, s.claimKeys(roomID), roomID, ms(s.clk.Now()), token, s.cfg.Lease.Milliseconds(),
		s.cfg.MaxWindow.Milliseconds(), s.cfg.Slack.Milliseconds(), s.cfg.Quiet.Milliseconds(), s.cfg.MaxDelay.Milliseconds(),
		s.cfg.Retention.Milliseconds()).Result()
	if errors.Is(err, redis.Nil) {
		return pipeline.RoomWindow{}, false, nil
	}
	if err != nil {
		return pipeline.RoomWindow{}, false, fmt.Errorf("redisdebounce: claim %s: %w", roomID, err)
	}
	if v == "gone" {
		return pipeline.RoomWindow{}, false, fmt.Errorf("redisdebounce: claim %s: %w", roomID, pipeline.ErrRoomStateLost)
	}
	fields, ok := v.([]any)
	if !ok {
		return pipeline.RoomWindow{}, false, fmt.Errorf("redisdebounce: claim %s: script answered %v", roomID, v)
	}
	w, err := parseWindow(roomID, token, fields)
	if err != nil {
		return pipeline.RoomWindow{}, false, fmt.Errorf("redisdebounce: claim %s: %w", roomID, err)
	}
	return w, true, nil
}

func parseWindow(roomID, token string, v []any) (pipeline.RoomWindow, error) {
	if len(v) != 6 {
		return pipeline.RoomWindow{}, fmt.Errorf("script answered %d values, want 6", len(v))
	}
	start, ok1 := v[0].(int64)
	end, ok2 := v[1].(int64)
	reason, ok3 := v[2].(string)
	n, ok4 := v[3].(int64)
	rep, ok5 := v[4].(int64)
	dbl, ok6 := v[5].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return pipeline.RoomWindow{}, fmt.Errorf("script answered %v", v)
	}
	return pipeline.RoomWindow{RoomID: roomID, Start: fromMS(start), End: fromMS(end), Reason: pipeline.FireReason(reason),
		Messages: int(n), DoubleCovered: int(dbl), Republish: rep == 1, Token: token}, nil
}

// Ack implements pipeline.RoomActivity.
func (s *Store) Ack(ctx context.Context, w pipeline.RoomWindow) (bool, error) {
	n, err := ackScript.Run(ctx, s.rdb, s.ackKeys(w.RoomID), w.RoomID, w.Token, ms(w.Start), ms(w.End), ms(s.clk.Now()),
		s.cfg.Quiet.Milliseconds(), s.cfg.MaxDelay.Milliseconds(), s.cfg.Retention.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("redisdebounce: ack %s: %w", w.RoomID, err)
	}
	if n < 0 {
		return false, fmt.Errorf("redisdebounce: ack %s: %w", w.RoomID, pipeline.ErrRoomStateLost)
	}
	return n == 1, nil
}

// Pending returns how many rooms wait in every shard's due set (pending
// or claimed), for the rooms-pending gauge: one ZCARD per shard.
func (s *Store) Pending(ctx context.Context) (int64, error) {
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range s.cfg.Shards {
			p.ZCard(ctx, s.DueKey(i))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("redisdebounce: pending: %w", err)
	}
	var total int64
	for _, c := range cmds {
		total += c.(*redis.IntCmd).Val()
	}
	return total, nil
}
