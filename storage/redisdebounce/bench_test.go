package redisdebounce

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/chatguard/chatguard/internal/stacktest"
	"syscall"
	"testing"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// cpuNow is this process's user+system CPU time.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAbsorb is the trigger's absorb path for one SQS batch of ten
// chat events: decode each body, record all ten in one pipelined round
// trip to the real Redis. It reports chat events per CPU-second of this
// process (the trigger's side; Redis's own CPU is apart) and the Redis
// memory per room holding state afterwards:
//
//	go test -run '^$' -bench Absorb -benchtime 20000x ./storage/redisdebounce/
func BenchmarkAbsorb(b *testing.B) {
	for _, rooms := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("rooms=%d", rooms), func(b *testing.B) {
			s, _, rdb := setup(b, stacktest.RedisNode(b), func(c *Config) { c.Shards = DefaultShards })
			bodies := make([][]byte, 10*b.N)
			for i := range bodies {
				body, err := json.Marshal(chat(fmt.Sprintf("room-%d", i%rooms), fmt.Sprintf("m-%d", i), t0))
				if err != nil {
					b.Fatal(err)
				}
				bodies[i] = body
			}
			ctx := context.Background()
			evs := make([]pipeline.ChatEvent, 10)
			b.ResetTimer()
			cpu0 := cpuNow(b)
			for i := range b.N {
				for j := range evs {
					ev, err := pipeline.DecodeChatEvent(bodies[10*i+j])
					if err != nil {
						b.Fatal(err)
					}
					evs[j] = ev
				}
				if _, err := s.Record(ctx, evs); err != nil {
					b.Fatal(err)
				}
			}
			cpu := cpuNow(b) - cpu0
			b.StopTimer()
			b.ReportMetric(float64(10*b.N)/cpu.Seconds(), "events/cpu-s")
			var bytes int64
			held := min(rooms, 10*b.N)
			for r := range min(held, 200) {
				room := fmt.Sprintf("room-%d", r)
				for _, k := range []string{s.RoomKey(room), s.SeenKey(room)} {
					n, _ := rdb.MemoryUsage(ctx, k).Result()
					bytes += n
				}
			}
			b.ReportMetric(float64(bytes)/float64(min(held, 200)), "bytes/room")
		})
	}
}
