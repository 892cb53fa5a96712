package mysql_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/storage/storetest"
)

// TestStagesKeepTokenAccounting: cached tokens and cost per stage survive
// a save and a read (migration 00009), and a second save overwrites them.
func TestStagesKeepTokenAccounting(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	v := storetest.SampleVerdict("room-tokens")
	for i := range v.Stages {
		v.Stages[i].TokensCached = 100 * (i + 1)
		v.Stages[i].CostUSD = 0.001 * float64(i+1)
	}
	storetest.MustSave(t, ctx, s, v)
	got, err := s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Len(t, got.Stages, len(v.Stages))
	for i, st := range got.Stages {
		require.Equal(t, v.Stages[i].TokensCached, st.TokensCached, st.Stage)
		require.InDelta(t, v.Stages[i].CostUSD, st.CostUSD, 1e-12, st.Stage)
	}
	v.Stages[0].TokensCached, v.Stages[0].CostUSD = 7, 0.5
	storetest.MustSave(t, ctx, s, v)
	got, err = s.Get(ctx, v.Key)
	require.NoError(t, err)
	require.Equal(t, 7, got.Stages[0].TokensCached)
	require.InDelta(t, 0.5, got.Stages[0].CostUSD, 1e-12)
}
