package storetest

import (
	"testing"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

func TestClaimsConformance(t *testing.T) {
	t.Parallel()
	RunReviewClaimsConformance(t, func(_ *testing.T, c clock.Clock) pipeline.ReviewClaims { return NewClaims(c) })
}
