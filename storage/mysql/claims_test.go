package mysql_test

import (
	"testing"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

func TestClaimsConformance(t *testing.T) {
	t.Parallel()
	storetest.RunReviewClaimsConformance(t, func(t *testing.T, now func() time.Time) pipeline.ReviewClaims {
		s := setup(t)
		return mysql.NewClaims(s.DB(), now)
	})
}
