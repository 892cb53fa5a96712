package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/chatguard/chatguard/deploy/local/chaos"
	"github.com/chatguard/chatguard/deploy/local/chatreplay"
)

// RealtimeFaults are the faults a real-time run can inject (Config.Fault):
// the real-time rows of the fault suite (make chaos-realtime).
var RealtimeFaults = []string{"kill", "redis", "flush", "dup", "flood", "skew"}

// faultRun is one injected fault's schedule and state, advanced by the
// watch on every tick.
type faultRun struct {
	name  string
	proxy *chaos.Proxy // the trigger's Redis link (redis)
	// kills are the moments the trigger is SIGKILLed and restarted (kill).
	kills []time.Time
	// down and up bound the Redis outage (redis).
	down, up time.Time
	killed   int
	wasDown  bool
	// flush is the flush fault's state and its sweep (flush).
	flush *flushRun
}

// shapePlan applies the producer faults to the plan.
func (f *faultRun) shapePlan(plan []chatreplay.Arrival, start time.Time, replay time.Duration) []chatreplay.Arrival {
	switch f.name {
	case "dup":
		return chatreplay.Duplicate(plan, 2, 10*time.Second, 28)
	case "flood":
		return chatreplay.Flood(plan, "flood-room", 10000, start.Add(replay/3), time.Minute)
	case "skew":
		return chatreplay.Skew(plan, 10, 10*time.Minute)
	case "kill":
		for i := 1; i <= 5; i++ {
			f.kills = append(f.kills, start.Add(replay*time.Duration(i)/6))
		}
	case "redis":
		f.down = start.Add(replay / 3)
		f.up = f.down.Add(time.Minute)
	case "flush":
		f.flush = &flushRun{at: start.Add(replay / 2)}
	}
	return plan
}

func (f *faultRun) note() string {
	switch f.name {
	case "dup":
		return "every chat event delivered 3 times, copies up to 10 s later (reordered)"
	case "flood":
		return "one room flooded with 10,000 messages in a minute"
	case "skew":
		return "every 10th room's producer clock 10 min ahead (messages and events)"
	case "kill":
		return fmt.Sprintf("trigger SIGKILLed and restarted %d times during the replay", f.killed)
	case "redis":
		return "the trigger's Redis link down 60 s mid-replay"
	case "flush":
		return f.flush.note()
	}
	return ""
}

// tick injects what is due at now.
func (r *runner) faultTick(ctx context.Context, rt *realtimeRun, now time.Time) error {
	f := rt.fault
	if f == nil {
		return nil
	}
	if f.killed < len(f.kills) && !now.Before(f.kills[f.killed]) {
		f.killed++
		return r.restartTrigger(rt)
	}
	if f.proxy != nil && !f.down.IsZero() {
		if !f.wasDown && !now.Before(f.down) && now.Before(f.up) {
			f.proxy.SetDown(true)
			f.wasDown = true
			r.step("fault: the trigger's Redis is down for 60 s")
		}
		if f.wasDown && !now.Before(f.up) {
			f.proxy.SetDown(false)
			f.down = time.Time{}
			r.step("fault: the trigger's Redis is back")
		}
	}
	return nil
}

// restartTrigger SIGKILLs the trigger and starts a new one with the same
// settings, as a crash-looping pod would be restarted.
func (r *runner) restartTrigger(rt *realtimeRun) error {
	old := rt.trigger
	_ = syscall.Kill(old.PID, syscall.SIGKILL)
	select {
	case <-old.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("trigger (pid %d) did not die on SIGKILL", old.PID)
	}
	r.procs = slices.DeleteFunc(r.procs, func(p *proc) bool { return p == old })
	r.step("fault: trigger (pid %d) SIGKILLed (%d of %d)", old.PID, rt.fault.killed, len(rt.fault.kills))
	return r.startTrigger(rt)
}

// Holds says whether a fault row passed: every message covered (for the
// flush row, after the sweep) and nothing dead-lettered (a replay
// publishes no poison).
func (rt *RealtimeReport) Holds() bool { return rt.Uncovered == 0 && rt.DeadLettered == 0 }

// PrintFaultRows prints the real-time fault rows as a table and reports
// whether every row holds.
func PrintFaultRows(w io.Writer, rows []*RealtimeReport) bool {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\tmessages sent\tcovered\tcovered twice\textra model calls\tfreshness p95\tdead-lettered\tholds\t")
	all := len(rows) > 0
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%v\t\n", r.FaultNote, r.Messages, r.Messages-r.Uncovered, r.CoveredTwice,
			r.ExtraCalls, r.Freshness.P95, r.DeadLettered, r.Holds())
		all = all && r.Holds()
	}
	tw.Flush()
	return all
}
