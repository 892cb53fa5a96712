package chatprep

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

func TestTrimmerKeepsNewestAndSignalBearing(t *testing.T) {
	t.Parallel()
	tr := NewTrimmer(4000, 0)
	tr.Add(msg("old-phone", 0, pipeline.RoleSeller, pipeline.KindText, "급하면 010-1234-5678 로 전화주세요"))
	for i := range 200 {
		tr.Add(msg(fmt.Sprintf("f%03d", i), i+1, pipeline.RoleBuyer, pipeline.KindText, strings.Repeat("ㅋ", 20)))
	}
	tr.Add(msg("img", 300, pipeline.RoleSeller, pipeline.KindImage, "https://img.test/a.jpg"))
	out := tr.Messages()
	notice := out[len(out)-1]
	require.Equal(t, pipeline.TrimNoticeID, notice.MessageID)
	got := ids(out[:len(out)-1])
	require.Contains(t, got, "old-phone", "a message with a signal outlives newer ones without")
	require.Contains(t, got, "img")
	require.Contains(t, got, "f199", "the newest stay")
	require.NotContains(t, got, "f000", "the oldest go first")
	trim := tr.Trim()
	require.Equal(t, 202-len(got), trim.Dropped)
	require.Equal(t, trim.Dropped, trim.DroppedText)
	require.False(t, trim.Unread)

	w := Prepare(out, Config{})
	require.Equal(t, trim.Dropped, w.Trim.Dropped)
	require.False(t, w.HasMessage(pipeline.TrimNoticeID))
	require.Equal(t, []kv{{SignalPhone, "*********78"}}, kvs(w.Signals))
}

func TestTrimmerRecordsSignalsOfWhatItDrops(t *testing.T) {
	t.Parallel()
	tr := NewTrimmer(1500, 0)
	for i := range 40 {
		tr.Add(msg(fmt.Sprintf("p%02d", i), i, pipeline.RoleSeller, pipeline.KindText, fmt.Sprintf("번호 010-1234-%04d 로 연락", i)))
	}
	trim := tr.Trim()
	require.Positive(t, trim.Dropped)
	require.Equal(t, trim.Dropped, trim.SignalCounts["phone"], "every dropped phone number is counted")
	require.Len(t, trim.Signals, trim.Dropped)
	w := Prepare(tr.Messages(), Config{})
	cut := 0
	for _, s := range w.Signals {
		require.Equal(t, SignalPhone, s.Kind)
		require.NotContains(t, s.Value, "1234", "values stay masked")
		if s.Cut {
			cut++
		}
	}
	require.Equal(t, 40, len(w.Signals), "the window lists all forty")
	require.Equal(t, trim.Dropped, cut)
}

func TestTrimmerCutsAGiantMessageAndKeepsItsSignals(t *testing.T) {
	t.Parallel()
	tr := NewTrimmer(1<<20, 1000)
	text := strings.Repeat("가나다라 ", 2_000) + " 010-9876-5432 " + strings.Repeat("마바사 ", 2_000) + " 끝"
	tr.Add(msg("giant", 0, pipeline.RoleSeller, pipeline.KindText, text))
	out := tr.Messages()
	require.Len(t, out, 2)
	require.Less(t, len(out[0].Text), 4000)
	require.Contains(t, out[0].Text, "characters cut")
	trim := tr.Trim()
	require.Equal(t, 1, trim.CutMessages)
	require.Equal(t, []pipeline.TrimSignal{{Kind: "phone", MessageID: "giant", Value: "*********32"}}, trim.Signals)
	w := Prepare(out, Config{})
	require.Equal(t, []kv{{SignalPhone, "*********32"}}, kvs(w.Signals))
	require.True(t, w.Signals[0].Cut)
}

func TestParseTrimNoticeIsTolerant(t *testing.T) {
	t.Parallel()
	bad := pipeline.ChatMessage{MessageID: pipeline.TrimNoticeID, SenderRole: pipeline.RoleSystem, Kind: pipeline.KindSystem, Text: "not json"}
	w := Prepare([]pipeline.ChatMessage{bad, msg("m1", 1, pipeline.RoleBuyer, pipeline.KindText, "안녕하세요")}, Config{})
	require.True(t, w.Trim.Any(), "a notice that does not parse still says something is missing")
	require.Len(t, w.Messages, 1)
	// A user message cannot pose as the notice.
	fake := msg(pipeline.TrimNoticeID, 2, pipeline.RoleBuyer, pipeline.KindText, `{"dropped":5}`)
	w = Prepare([]pipeline.ChatMessage{fake}, Config{})
	require.False(t, w.Trim.Any())
}
