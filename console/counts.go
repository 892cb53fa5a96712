package console

import (
	"context"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/chatguard/chatguard/moderation"
)

// The queue header's counts read the whole open queue (hundreds of
// milliseconds at 200k verdicts, docs/performance.md). Every moderator's
// queue page asks for them, so each console process keeps the last answer
// for queueCountsTTL and lets one request at a time compute it: a team of
// fifty refreshing their queues costs one count per process per TTL, not
// fifty. A decision shows in the counts within the TTL.

// queueCountsTTL is how long a process reuses the counts it read.
const queueCountsTTL = 15 * time.Second

// queueCountsTimeout bounds the count itself; it runs detached from the
// request that started it, since other requests may wait on it.
const queueCountsTimeout = 10 * time.Second

// countsCache is the process's cached queue counts. The zero value is
// empty and ready.
type countsCache struct {
	mu     sync.Mutex
	at     time.Time // when val was read; zero: never
	val    moderation.QueueCounts
	flight singleflight.Group
}

// get returns the counts read at most queueCountsTTL before now, reading
// them through load when they are older, one load at a time. A waiting
// caller returns with ctx's error when ctx ends first.
func (c *countsCache) get(ctx context.Context, now time.Time, load func(ctx context.Context) (moderation.QueueCounts, error)) (moderation.QueueCounts, error) {
	c.mu.Lock()
	if !c.at.IsZero() && now.Sub(c.at) < queueCountsTTL {
		v := c.val
		c.mu.Unlock()
		return v, nil
	}
	c.mu.Unlock()
	ch := c.flight.DoChan("counts", func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queueCountsTimeout)
		defer cancel()
		v, err := load(lctx)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.at, c.val = now, v
		c.mu.Unlock()
		return v, nil
	})
	select {
	case <-ctx.Done():
		return moderation.QueueCounts{}, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return moderation.QueueCounts{}, r.Err
		}
		return r.Val.(moderation.QueueCounts), nil
	}
}

// queueCounts is the queue header's counts, loaded by the page after it
// is drawn (so the rows never wait for them) and cached per process
// (countsCache). They help; without them the page still works.
func (s *server) queueCounts(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now()
	counts, err := s.counts.get(r.Context(), now, func(ctx context.Context) (moderation.QueueCounts, error) {
		return s.store.CountQueue(ctx, now)
	})
	if err != nil {
		s.log.Warn("console: queue counts", "err", err)
		s.render(w, "queue_counts", http.StatusOK, map[string]any{"Error": "counts unavailable"})
		return
	}
	s.render(w, "queue_counts", http.StatusOK, map[string]any{"Counts": counts})
}
