package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

func TestClaimsConformance(t *testing.T) {
	t.Parallel()
	storetest.RunReviewClaimsConformance(t, func(t *testing.T, c clock.Clock) pipeline.ReviewClaims {
		s := setup(t)
		return mysql.NewClaims(s.DB(), c)
	})
}

func TestSaveReleasingDropsOnlyTheOwnersClaim(t *testing.T) {
	t.Parallel()
	s := setup(t)
	claims := mysql.NewClaims(s.DB(), nil)
	ctx := context.Background()

	v := storetest.SampleVerdict("room-save-releasing")
	got, err := claims.Claim(ctx, v.Key, "pod-a/1", time.Minute)
	require.NoError(t, err)
	require.True(t, got.Held)
	committed, err := s.SaveReleasing(ctx, v, "pod-a/1")
	require.NoError(t, err)
	require.True(t, committed)
	stored, err := s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Equal(t, v.Status, stored.Status)
	require.Len(t, stored.Stages, len(v.Stages))
	got, err = claims.Claim(ctx, v.Key, "pod-b/1", time.Minute)
	require.NoError(t, err)
	require.True(t, got.Held, "the save released pod-a's claim")

	// Another owner's claim stays: pod-a's took over or expired long ago.
	committed, err = s.SaveReleasing(ctx, v, "pod-a/1")
	require.NoError(t, err)
	require.True(t, committed)
	got, err = claims.Claim(ctx, v.Key, "pod-c/1", time.Minute)
	require.NoError(t, err)
	require.False(t, got.Held)
	require.Equal(t, "pod-b/1", got.Owner)

	// A rejected verdict changes neither the verdict nor the claim.
	bad := v
	bad.Status = "maybe"
	committed, err = s.SaveReleasing(ctx, bad, "pod-b/1")
	require.Error(t, err)
	require.False(t, committed)
	got, err = claims.Claim(ctx, v.Key, "pod-c/1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "pod-b/1", got.Owner)

	// A late failure over the done verdict commits nothing, and still
	// drops its owner's claim.
	late := pipeline.Verdict{Key: v.Key, RunID: "run-late", Status: pipeline.StatusFailed, Error: "late", Attempts: 5, PublishedAt: v.PublishedAt}
	committed, err = s.SaveReleasing(ctx, late, "pod-b/1")
	require.NoError(t, err)
	require.False(t, committed, "the done-guard kept the verdict")
	stored, err = s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, stored.Status)
	got, err = claims.Claim(ctx, v.Key, "pod-c/1", time.Minute)
	require.NoError(t, err)
	require.True(t, got.Held, "the save released pod-b's claim")
}
