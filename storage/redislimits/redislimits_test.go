package redislimits

import (
	"testing"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline/capacity/capacitytest"
)

func TestConformance(t *testing.T) {
	capacitytest.Run(t, func(t *testing.T) capacitytest.Store {
		return New(stacktest.Redis(t), stacktest.Unique("fleet")+":")
	})
}
