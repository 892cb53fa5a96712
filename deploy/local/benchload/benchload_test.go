package benchload

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPercentileIsNearestRank(t *testing.T) {
	xs := []float64{50, 10, 40, 20, 30, 60, 70, 80, 90, 100}
	require.Equal(t, 100.0, Percentile(xs, 95), "95 %% of 10 values rounds up to the 10th")
	require.Equal(t, 90.0, Percentile(xs, 90))
	require.Equal(t, 50.0, Percentile(xs, 50))
	require.Equal(t, 10.0, Percentile(xs, 0), "p0 is the smallest")
	require.Equal(t, 100.0, Percentile(xs, 100))
	require.Equal(t, 7.0, Percentile([]float64{7}, 95))
	require.Equal(t, []float64{50, 10, 40, 20, 30, 60, 70, 80, 90, 100}, xs, "the input is not sorted in place")
	require.True(t, math.IsNaN(Percentile(nil, 95)))
	// 20 values: p95 is the 19th, not the maximum.
	var ys []float64
	for i := 1; i <= 20; i++ {
		ys = append(ys, float64(i))
	}
	require.Equal(t, 19.0, Percentile(ys, 95))
}

func TestRatioIsMissingWithoutABaseline(t *testing.T) {
	require.InDelta(t, 0.9, Ratio(9, 10), 1e-12)
	require.InDelta(t, 1.25, Ratio(250, 200), 1e-12)
	require.True(t, math.IsNaN(Ratio(1, 0)))
	require.True(t, math.IsNaN(Ratio(1, math.NaN())))
}
