package spantest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/chatguard/chatguard/internal/spantest"
)

// tracer is taken before any provider is set, as a package's tracer is:
// it follows the first global provider only.
var tracer = otel.Tracer("spantest_test")

// TestEachRecorderSeesItsOwnTestsSpans: a second recorder, with another
// sampler, sees the spans ended while it records and no earlier one; the
// first sees none after its test ended.
func TestEachRecorderSeesItsOwnTestsSpans(t *testing.T) {
	var first interface {
		Ended() []sdktrace.ReadOnlySpan
	}
	t.Run("always", func(t *testing.T) {
		rec := spantest.Recorder(t, sdktrace.AlwaysSample())
		_, s := tracer.Start(context.Background(), "one")
		s.End()
		require.Len(t, rec.Ended(), 1)
		first = rec
	})
	t.Run("never", func(t *testing.T) {
		rec := spantest.Recorder(t, sdktrace.NeverSample())
		_, s := tracer.Start(context.Background(), "unsampled")
		s.End()
		require.Empty(t, rec.Ended(), "this test's sampler says no")
	})
	t.Run("always again", func(t *testing.T) {
		rec := spantest.Recorder(t, sdktrace.AlwaysSample())
		_, s := tracer.Start(context.Background(), "two")
		s.End()
		require.Len(t, rec.Ended(), 1)
		require.Equal(t, "two", rec.Ended()[0].Name())
	})
	require.Len(t, first.Ended(), 1, "the first recorder stopped with its test")
	_, s := tracer.Start(context.Background(), "between tests")
	require.False(t, s.SpanContext().IsSampled(), "nothing is sampled between tests")
	s.End()
}
