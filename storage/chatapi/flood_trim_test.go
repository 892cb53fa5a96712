package chatapi

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

// TestFloodedHistoryIsTrimmedNotRefused checks what the rates test only
// counts: memory stays within the bound, the newest and the
// signal-bearing messages stay, and the trim notice sums up the rest.
func TestFloodedHistoryIsTrimmedNotRefused(t *testing.T) {
	t.Parallel()
	for _, c := range loadFloodCorpus(t) {
		t.Run(c.Technique, func(t *testing.T) {
			t.Parallel()
			cl := floodServer(t, c)
			msgs, err := cl.History(context.Background(), "flood", floodT0, floodT0.Add(time.Hour))
			require.NoError(t, err, "a flood is never a reason to skip a review")
			var kept int64
			ids := map[string]bool{}
			for _, m := range msgs {
				if m.MessageID != pipeline.TrimNoticeID {
					kept += int64(len(m.Text) + len(m.ImageURL))
					ids[m.MessageID] = true
				}
			}
			require.LessOrEqual(t, kept, int64(floodKeep), "kept messages stay within the memory bound")
			last := msgs[len(msgs)-1]
			if c.Pad > 0 {
				// A huge unknown field is skipped; the messages fit.
				require.NotEqual(t, pipeline.TrimNoticeID, last.MessageID)
				require.Len(t, msgs, c.Messages+len(c.Needles))
				return
			}
			require.Equal(t, pipeline.TrimNoticeID, last.MessageID, "every other flood case is over the bound")
			for _, nd := range c.Needles {
				switch nd.At {
				case "newest", "middle", "oldest":
					require.True(t, ids["needle-"+nd.At], "the signal-bearing message %s stays", nd.At)
				}
			}
			w := chatprep.Prepare(msgs, chatprep.Config{})
			require.True(t, w.Trim.Any())
			require.False(t, w.HasMessage(pipeline.TrimNoticeID), "the notice is no chat message")
			if c.Technique == "beyond_read_bound" {
				require.True(t, w.Trim.Unread)
			}
			if c.Messages > 1000 {
				require.Positive(t, w.Trim.Dropped)
				switch c.Kind {
				case "image":
					require.Equal(t, w.Trim.Dropped, w.Trim.DroppedImages)
				case "system":
					require.Equal(t, w.Trim.Dropped, w.Trim.DroppedSystem)
				default:
					require.Equal(t, w.Trim.Dropped, w.Trim.DroppedText)
				}
			}
		})
	}
}

func BenchmarkFloodedHistory(b *testing.B) {
	c := loadFloodCorpus(b)[0]
	cl := floodServer(b, c)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cl.History(context.Background(), "flood", floodT0, floodT0.Add(time.Hour)); err != nil {
			b.Fatal(err)
		}
	}
}
