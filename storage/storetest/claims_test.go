package storetest

import (
	"testing"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

func TestClaimsConformance(t *testing.T) {
	t.Parallel()
	RunReviewClaimsConformance(t, func(_ *testing.T, now func() time.Time) pipeline.ReviewClaims { return NewClaims(now) })
}
