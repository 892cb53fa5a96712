package demo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/policy"
)

func TestTheDemoPolicyTurnsOnlyWarnCounterpartAndEscalateOn(t *testing.T) {
	p, err := policy.Parse(demoPolicy)
	require.NoError(t, err, "the worker would refuse to start")
	on := map[pipeline.ActionKind]bool{}
	for _, r := range p.Rules {
		for _, a := range r.Actions {
			if a.Mode == pipeline.ModeOn {
				on[a.Action] = true
			}
		}
	}
	require.Equal(t, map[pipeline.ActionKind]bool{pipeline.ActionWarnCounterpart: true, pipeline.ActionEscalate: true}, on)
}

func TestTheProtectionTableSaysWhetherLatencyIsWithinFreshness(t *testing.T) {
	var lines []string
	pr := func(f string, a ...any) {
		lines = append(lines, strings.Join(strings.Fields(fmt.Sprintf(f, a...)), " "))
	}
	rep := &ProtectionReport{ScamRooms: 12, Protected: 11, Reversed: 1, Latency: Percentiles{N: 11, P50: 40 * time.Second, P95: 70 * time.Second}}
	rep.print(pr, 63*time.Second)
	out := strings.Join(lines, "\n")
	require.Contains(t, out, "scams announced (rooms the truth calls abusive) 12")
	require.Contains(t, out, "protected (a notice shown in the room) 11")
	require.Contains(t, out, "protection latency p95 1m10s against freshness p95 1m3s + 10 s: within")
	lines = nil
	rep.print(pr, 50*time.Second)
	require.Contains(t, strings.Join(lines, "\n"), ": over")
}
