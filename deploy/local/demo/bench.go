package demo

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchFigures are make bench-realtime's cost figures.
type BenchFigures struct {
	// TriggerCPU is the trigger's user+system CPU time over the run.
	TriggerCPU time.Duration
	// EventsPerCPUSecond is chat events absorbed per trigger CPU-second.
	EventsPerCPUSecond float64
	// RedisCallsPerEvent is the trigger's Redis round trips (one script or
	// command each, chatguard_trigger_redis_seconds_count) per chat event.
	RedisCallsPerEvent float64
	// BytesPerPendingRoom is the largest sampled Redis memory of the run's
	// keys (MEMORY USAGE) divided by the rooms holding state then;
	// PeakRooms the most rooms holding state at once.
	BytesPerPendingRoom float64
	PeakRooms           int
	// Reviews and tokens (prompt+completion) per active room-hour, real
	// time; CachedShare is the share of prompt tokens served from the
	// prefix cache.
	ReviewsPerRoomHour, TokensPerRoomHour, CachedShare float64
}

// freeAddr returns a local address no listener holds at this moment.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// cpuTime reads a process's user+system time from /proc (Linux; clock
// ticks of 1/100 s, the kernel's USER_HZ on every Linux we run).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// metricSum sums the samples of one metric family on a /metrics page.
func metricSum(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return sumFamily(resp.Body, name)
}

func sumFamily(r io.Reader, name string) (float64, error) {
	sum := 0.0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics: %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// redisFootprint is the memory of the keys under prefix and how many
// rooms (":r:" hashes) hold state.
func redisFootprint(ctx context.Context, c *redis.Client, prefix string) (bytes int64, rooms int, err error) {
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, 0, err
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.MemoryUsage(ctx, k)
		if strings.Contains(k, ":r:") {
			rooms++
		}
	}
	if len(keys) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return 0, 0, err
		}
	}
	for _, cmd := range cmds {
		bytes += cmd.Val()
	}
	return bytes, rooms, nil
}

// tokenTotals reads the done verdicts' reviews and tokens.
func tokenTotals(ctx context.Context, db *sql.DB) (reviews int, in, out, cached int64, err error) {
	err = db.QueryRowContext(ctx, `SELECT COUNT(DISTINCT v.id), COALESCE(SUM(s.tokens_in),0), COALESCE(SUM(s.tokens_out),0), COALESCE(SUM(s.tokens_cached),0)
		FROM verdicts v LEFT JOIN verdict_stages s ON s.verdict_id = v.id WHERE v.status = 'done'`).Scan(&reviews, &in, &out, &cached)
	if err != nil {
		err = fmt.Errorf("mysql: token totals: %w", err)
	}
	return reviews, in, out, cached, err
}
