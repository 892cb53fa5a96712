// Package redislive keeps the events of on-demand reviews in Redis Streams
// (one stream per review, bounded by MAXLEN and a TTL), so that a client
// that lost its connection resumes from Last-Event-ID on any console pod
// without a second model call.
//
// An event of sequence number n is the stream entry with id 0-n: the ids
// are then exactly the sequence, XREAD from 0-n returns what follows n, and
// a trimmed head is told apart from an empty tail by the first id kept.
package redislive

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/pipeline"
)

// Config bounds what a review keeps.
type Config struct {
	// KeyPrefix prefixes each review's stream key.
	KeyPrefix string
	// MaxLen bounds a review's stream (approximate trimming: Redis may
	// keep a few more).
	MaxLen int64
	// TTL is how long a review's events are kept after its last event.
	TTL time.Duration
	// ReadCount bounds the events one Read returns.
	ReadCount int64
}

// DefaultConfig keeps 10 minutes and 8192 events a review: a review of
// four stages streams a few thousand token events at most.
func DefaultConfig() Config {
	return Config{KeyPrefix: "chatguard:live:", MaxLen: 8192, TTL: 10 * time.Minute, ReadCount: 512}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.KeyPrefix == "" {
		errs = append(errs, errors.New("redislive: key prefix is empty"))
	}
	if c.MaxLen < 16 {
		errs = append(errs, fmt.Errorf("redislive: max len %d is below 16", c.MaxLen))
	}
	if c.TTL < time.Second {
		errs = append(errs, fmt.Errorf("redislive: ttl %s is below 1s", c.TTL))
	}
	if c.ReadCount < 1 {
		errs = append(errs, errors.New("redislive: read count must be positive"))
	}
	return errors.Join(errs...)
}

// Log is a pipeline.LiveLog over Redis Streams.
type Log struct {
	rdb    redis.UniversalClient
	tailer redis.UniversalClient // blocking reads; rdb unless WithTailClient
	cfg    Config
}

var _ pipeline.LiveLog = (*Log)(nil)

// New returns a Log; it makes no network call.
func New(rdb redis.UniversalClient, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Log{rdb: rdb, tailer: rdb, cfg: cfg}, nil
}

// WithTailClient returns a copy of l whose blocking reads (Read with a
// wait) go through tailer. A blocking XREAD holds a pooled connection for
// up to its wait, so many resumed clients tailing through the writers'
// pool starve Append of connections until its timeout drops events that
// those very clients wait for; a pool of their own keeps appends flowing.
func (l *Log) WithTailClient(tailer redis.UniversalClient) *Log {
	c := *l
	c.tailer = tailer
	return &c
}

func (l *Log) key(id string) string { return l.cfg.KeyPrefix + id }

// Append implements pipeline.LiveLog: one pipelined round trip of XADDs
// and an EXPIRE. It returns an error wrapping Redis's when any failed.
func (l *Log) Append(ctx context.Context, id string, evs []pipeline.LiveEvent) error {
	if len(evs) == 0 {
		return nil
	}
	key := l.key(id)
	p := l.rdb.Pipeline()
	for _, ev := range evs {
		p.XAdd(ctx, &redis.XAddArgs{
			Stream: key, MaxLen: l.cfg.MaxLen, Approx: true,
			ID:     "0-" + strconv.FormatUint(ev.Seq, 10),
			Values: []any{"t", string(ev.Type), "d", ev.Data},
		})
	}
	p.Expire(ctx, key, l.cfg.TTL)
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("redislive: append %s: %w", id, err)
	}
	return nil
}

// Read implements pipeline.LiveLog.
func (l *Log) Read(ctx context.Context, id string, after uint64, wait time.Duration) ([]pipeline.LiveEvent, error) {
	key := l.key(id)
	// The first entry kept tells a trimmed or expired stream from one
	// whose next event is not written yet.
	first, err := l.rdb.XRangeN(ctx, key, "-", "+", 1).Result()
	if err != nil {
		return nil, fmt.Errorf("redislive: read %s: %w", id, err)
	}
	if len(first) == 0 {
		return nil, fmt.Errorf("redislive: read %s: %w", id, pipeline.ErrLiveGone)
	}
	if seq, err := parseID(first[0].ID); err != nil || seq > after+1 {
		return nil, fmt.Errorf("redislive: read %s after %d: %w", id, after, pipeline.ErrLiveGone)
	}
	args := &redis.XReadArgs{Streams: []string{key, "0-" + strconv.FormatUint(after, 10)}, Count: l.cfg.ReadCount, Block: -1}
	if wait > 0 {
		args.Block = wait
	}
	rdb := l.rdb
	if wait > 0 {
		rdb = l.tailer
	}
	res, err := rdb.XRead(ctx, args).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("redislive: read %s: %w", id, err)
	}
	var out []pipeline.LiveEvent
	for _, s := range res {
		for _, m := range s.Messages {
			seq, err := parseID(m.ID)
			if err != nil {
				return nil, fmt.Errorf("redislive: read %s: %w", id, err)
			}
			t, _ := m.Values["t"].(string)
			d, _ := m.Values["d"].(string)
			out = append(out, pipeline.LiveEvent{Seq: seq, Type: pipeline.LiveEventType(t), Data: []byte(d)})
		}
	}
	return out, nil
}

func parseID(id string) (uint64, error) {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok || ms != "0" {
		return 0, fmt.Errorf("stream id %q is not 0-seq", id)
	}
	return strconv.ParseUint(seq, 10, 64)
}
