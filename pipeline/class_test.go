package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClassesRankInteractiveFirstShadowLast(t *testing.T) {
	t.Parallel()
	for i, c := range Classes {
		require.Equal(t, i, c.Rank(), "Classes lists the classes most urgent first")
	}
	require.Equal(t, []string{"interactive", "realtime", "batch", "shadow"},
		[]string{Classes[0].String(), Classes[1].String(), Classes[2].String(), Classes[3].String()})
	require.Equal(t, ClassBatch, Class(0), "the zero value is batch")
}

func TestClassTravelsInTheContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	require.Equal(t, ClassInteractive, ClassFrom(ctx, ClassInteractive), "no class: the default")
	require.Equal(t, ClassRealtime, ClassFrom(WithClass(ctx, ClassRealtime), ClassInteractive))
}

func TestEventSourceSetsTheClass(t *testing.T) {
	t.Parallel()
	base := `{"room_id":"r1","window_start":"2026-12-01T00:00:00Z","window_end":"2026-12-01T01:00:00Z","run_id":"rt-1","published_at":"2026-12-01T01:00:01Z","schema_version":1`
	for src, want := range map[string]Class{`,"source":"realtime"`: ClassRealtime, ``: ClassBatch, `,"source":"sweep"`: ClassBatch, `,"source":"future"`: ClassBatch, `,"source":{"dag":"x"}`: ClassBatch} {
		ev, err := DecodeReviewEvent([]byte(base + src + `}`))
		require.NoError(t, err, "an unknown source is read, not refused")
		require.Equal(t, want, ev.Class(), src)
	}
	ev, err := DecodeReviewEvent([]byte(base + `,"source":"` + strings.Repeat("x", 1000) + `"}`))
	require.NoError(t, err, "a long unknown source is read as none, not kept")
	require.Empty(t, ev.Source)
	b, err := ReviewEvent{RoomID: "r", WindowStart: time.Unix(0, 0), WindowEnd: time.Unix(60, 0), RunID: "x", PublishedAt: time.Unix(60, 0), SchemaVersion: 1}.Encode()
	require.NoError(t, err)
	require.NotContains(t, string(b), "source", "an event without a source is encoded as before")
}
