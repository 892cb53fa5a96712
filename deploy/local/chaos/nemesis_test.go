package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// faultKind is one thing the nemesis breaks.
type faultKind string

const (
	cutMySQL   faultKind = "MySQL cut"
	cutRedis   faultKind = "Redis cut"
	cutChat    faultKind = "chat API cut"
	cutPrimary faultKind = "primary pool 500s"
	cutPools   faultKind = "both pools 500s"
	cutSQS     faultKind = "SQS cut"
	killWorker faultKind = "SIGKILL worker"
)

// cuts are the dependency faults, in the order the schedule draws from.
var cuts = []faultKind{cutMySQL, cutRedis, cutChat, cutPrimary, cutPools, cutSQS}

// fault is one entry of a nemesis schedule: Kind applied At (from the
// soak's start) and healed For later (a kill: the worker restarted For
// after it died).
type fault struct {
	At, For time.Duration
	Kind    faultKind
}

func (f fault) String() string {
	return fmt.Sprintf("%7s  %-18s for %s", fmtOffset(f.At), f.Kind, f.For.Round(time.Second))
}

func fmtOffset(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%02d:%02d", int(d/time.Minute), int(d%time.Minute/time.Second))
}

// nemesisSpec bounds a schedule: faults start no earlier than From and are
// healed by Until; each cut lasts MinDown..MaxDown; quiet gaps between
// faults last MinGap..MaxGap; Pair is the chance a cut has a second one
// (another kind) beginning with it, Kill the chance an entry is a SIGKILL
// (its worker restarted after MinRestart..MaxRestart).
type nemesisSpec struct {
	From, Until            time.Duration
	MinDown, MaxDown       time.Duration
	MinGap, MaxGap         time.Duration
	MinRestart, MaxRestart time.Duration
	Pair, Kill             float64
}

// schedule draws a nemesis schedule from seed: the same seed and spec give
// the same schedule. At most two faults are active at once, and two cuts
// at once are always of different kinds.
func schedule(seed uint64, s nemesisSpec) []fault {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)).Round(time.Second)
	}
	var out []fault
	at := s.From
	for {
		at += between(s.MinGap, s.MaxGap)
		if rng.Float64() < s.Kill {
			f := fault{At: at, For: between(s.MinRestart, s.MaxRestart), Kind: killWorker}
			if at+f.For > s.Until {
				return out
			}
			out = append(out, f)
			at += f.For
			continue
		}
		f := fault{At: at, For: between(s.MinDown, s.MaxDown), Kind: cuts[rng.IntN(len(cuts))]}
		if at+f.For > s.Until {
			return out
		}
		out = append(out, f)
		end := at + f.For
		if rng.Float64() < s.Pair {
			others := slices.DeleteFunc(slices.Clone(cuts), func(k faultKind) bool { return k == f.Kind })
			g := fault{At: at, For: between(s.MinDown, s.MaxDown), Kind: others[rng.IntN(len(others))]}
			if at+g.For <= s.Until {
				out = append(out, g)
				end = max(end, at+g.For)
			}
		}
		at = end
	}
}

// printSchedule is the schedule as the report prints it.
func printSchedule(seed uint64, fs []fault) string {
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis schedule, seed %d (%d faults):\n", seed, len(fs))
	for _, f := range fs {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	return b.String()
}

// fullSpec is make soak's nemesis over a run of d: faults from the first
// minute until the last fifth of the run, which is left to heal in.
func fullSpec(d time.Duration) nemesisSpec {
	return nemesisSpec{From: time.Minute, Until: d * 4 / 5, MinDown: 5 * time.Second, MaxDown: 60 * time.Second,
		MinGap: 15 * time.Second, MaxGap: 60 * time.Second, MinRestart: 2 * time.Second, MaxRestart: 10 * time.Second, Pair: 0.25, Kill: 0.3}
}

// shortSpec is make test's: the same kinds in a minute, shorter.
func shortSpec(d time.Duration) nemesisSpec {
	return nemesisSpec{From: 4 * time.Second, Until: d * 4 / 5, MinDown: 3 * time.Second, MaxDown: 5 * time.Second,
		MinGap: 1 * time.Second, MaxGap: 3 * time.Second, MinRestart: 1 * time.Second, MaxRestart: 2 * time.Second, Pair: 0.6, Kill: 0.2}
}

func TestNemesisSchedule(t *testing.T) {
	spec := fullSpec(30 * time.Minute)
	a := schedule(7, spec)
	require.Equal(t, a, schedule(7, spec), "a seed gives one schedule")
	require.NotEqual(t, a, schedule(8, spec), "another seed another")
	kinds := map[faultKind]bool{}
	pairs := 0
	for seed := range uint64(20) {
		fs := schedule(seed, spec)
		for i, f := range fs {
			kinds[f.Kind] = true
			require.GreaterOrEqual(t, f.At, spec.From)
			require.LessOrEqual(t, f.At+f.For, spec.Until, "healed before the run's last fifth")
			if f.Kind == killWorker {
				require.True(t, f.For >= spec.MinRestart && f.For <= spec.MaxRestart)
			} else {
				require.True(t, f.For >= spec.MinDown && f.For <= spec.MaxDown, "%s", f)
			}
			active := 0
			for _, g := range fs[:i] {
				if g.At+g.For > f.At {
					active++
					require.NotEqual(t, g.Kind, f.Kind, "two cuts at once are of two kinds")
				}
			}
			require.LessOrEqual(t, active, 1, "at most two faults at once")
			pairs += active
		}
	}
	require.Len(t, kinds, len(cuts)+1, "every kind of fault is drawn")
	short := map[faultKind]bool{}
	for _, f := range schedule(shortSeed, shortSpec(shortLoad)) {
		short[f.Kind] = true
	}
	require.Len(t, short, len(cuts)+1, "the short form's seed draws every kind of fault")
	require.Positive(t, pairs, "cuts sometimes come two at once")
}
