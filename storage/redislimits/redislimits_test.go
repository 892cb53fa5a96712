package redislimits

import (
	"testing"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline/capacity/capacitytest"
)

func TestConformance(t *testing.T) {
	stacktest.EachRedis(t, func(t *testing.T, r stacktest.RedisTarget) {
		capacitytest.Run(t, func(t *testing.T) (capacitytest.Store, clock.Clock) {
			// Redis keeps its own time: the suite waits on the wall clock.
			return New(r.Client(t, nil), stacktest.Unique("fleet")+":"), clock.Real()
		})
	})
}
