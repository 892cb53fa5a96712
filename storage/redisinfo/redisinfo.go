// Package redisinfo exports what a Redis says about its own memory,
// evictions and rejected writes (INFO memory, stats and errorstats), read
// when Prometheus scrapes, summed over the masters of a Redis Cluster. The
// binaries export it for the Redis they use, labelled by role ("state": the
// trigger's room state, which must never evict; "shared": stop signals,
// fleet limits, live streams, campaign counts), so the alerts work on
// ElastiCache, whose CONFIG is closed but whose INFO answers.
package redisinfo

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/internal/clock"
)

// Info is what one INFO reading says, summed over masters.
type Info struct {
	// UsedMemory and MaxMemory are in bytes; MaxMemory is 0 when a node
	// has no limit (then the sum is 0: no ratio can be computed).
	UsedMemory, MaxMemory float64
	// Evicted counts keys evicted since the nodes started.
	Evicted float64
	// RejectedWrites counts commands refused with OOM (a full memory
	// under noeviction) since the nodes started.
	RejectedWrites float64
}

// Parse reads INFO's text into an Info (one node).
func Parse(text string) Info {
	var in Info
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_memory":
			in.UsedMemory, _ = strconv.ParseFloat(v, 64)
		case "maxmemory":
			in.MaxMemory, _ = strconv.ParseFloat(v, 64)
		case "evicted_keys":
			in.Evicted, _ = strconv.ParseFloat(v, 64)
		case "errorstat_OOM":
			// count=N
			for _, f := range strings.Split(v, ",") {
				if n, ok := strings.CutPrefix(f, "count="); ok {
					in.RejectedWrites, _ = strconv.ParseFloat(n, 64)
				}
			}
		}
	}
	return in
}

// Read reads INFO memory, stats and errorstats from the node, or from
// every master of a cluster, and sums them. A cluster with a master
// without a limit reports MaxMemory 0. It honours ctx.
func Read(ctx context.Context, rdb redis.UniversalClient) (Info, error) {
	one := func(ctx context.Context, c *redis.Client) (Info, error) {
		s, err := c.Info(ctx, "memory", "stats", "errorstats").Result()
		if err != nil {
			return Info{}, fmt.Errorf("redisinfo: %w", err)
		}
		return Parse(s), nil
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		c, ok := rdb.(*redis.Client)
		if !ok {
			return Info{}, fmt.Errorf("redisinfo: a %T is neither a node nor a cluster client", rdb)
		}
		return one(ctx, c)
	}
	var (
		mu        sync.Mutex
		sum       Info
		unlimited bool
	)
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		in, err := one(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		sum.UsedMemory += in.UsedMemory
		sum.MaxMemory += in.MaxMemory
		sum.Evicted += in.Evicted
		sum.RejectedWrites += in.RejectedWrites
		unlimited = unlimited || in.MaxMemory == 0
		return nil
	})
	if unlimited {
		sum.MaxMemory = 0
	}
	return sum, err
}

// Collector reads Info at most once per second, whatever the number of
// metrics and scrapes, each reading bounded by its timeout.
type Collector struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	clk     clock.Clock

	mu   sync.Mutex
	at   time.Time
	last Info
	up   bool
}

// Register exports the Redis rdb as role on reg: chatguard_redis_up,
// chatguard_redis_memory_used_bytes, chatguard_redis_memory_max_bytes,
// chatguard_redis_evicted_keys_total and
// chatguard_redis_rejected_writes_total. Each scrape reads INFO once,
// within timeout; a failed reading reports up 0 and the last values. clk
// nil is the wall clock.
func Register(reg prometheus.Registerer, rdb redis.UniversalClient, role string, timeout time.Duration, clk clock.Clock) error {
	c := &Collector{rdb: rdb, timeout: timeout, clk: clock.Or(clk)}
	labels := prometheus.Labels{"role": role}
	for _, m := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chatguard_redis_up", ConstLabels: labels,
			Help: "1 when the Redis of this role answered INFO at the last scrape."}, func() float64 {
			if _, up := c.read(); up {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chatguard_redis_memory_used_bytes", ConstLabels: labels,
			Help: "Memory the Redis of this role uses (INFO used_memory, summed over a cluster's masters)."}, func() float64 { in, _ := c.read(); return in.UsedMemory }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chatguard_redis_memory_max_bytes", ConstLabels: labels,
			Help: "maxmemory of the Redis of this role (summed over a cluster's masters); 0: no limit."}, func() float64 { in, _ := c.read(); return in.MaxMemory }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "chatguard_redis_evicted_keys_total", ConstLabels: labels,
			Help: "Keys the Redis of this role evicted since its nodes started (INFO evicted_keys)."}, func() float64 { in, _ := c.read(); return in.Evicted }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "chatguard_redis_rejected_writes_total", ConstLabels: labels,
			Help: "Commands the Redis of this role refused for a full memory (INFO errorstat_OOM)."}, func() float64 { in, _ := c.read(); return in.RejectedWrites }),
	} {
		if err := reg.Register(m); err != nil {
			return fmt.Errorf("redisinfo: %w", err)
		}
	}
	return nil
}

func (c *Collector) read() (Info, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clk.Now()
	if !c.at.IsZero() && now.Sub(c.at) < time.Second {
		return c.last, c.up
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	in, err := Read(ctx, c.rdb)
	c.at, c.up = now, err == nil
	if err == nil {
		c.last = in
	}
	return c.last, c.up
}
