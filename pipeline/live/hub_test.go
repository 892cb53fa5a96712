package live

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// memLog is an in-memory pipeline.LiveLog.
type memLog struct {
	mu  sync.Mutex
	evs map[string][]pipeline.LiveEvent
}

func (m *memLog) Append(_ context.Context, id string, evs []pipeline.LiveEvent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evs[id] = append(m.evs[id], evs...)
	return nil
}

func (m *memLog) Read(_ context.Context, id string, after uint64, _ time.Duration) ([]pipeline.LiveEvent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []pipeline.LiveEvent
	for _, ev := range m.evs[id] {
		if ev.Seq > after {
			out = append(out, ev)
		}
	}
	return out, nil
}

func TestStalledSubscriberIsDroppedOthersGetEverything(t *testing.T) {
	log := &memLog{evs: map[string][]pipeline.LiveEvent{}}
	cfg := DefaultConfig()
	cfg.SubscriberBuffer = 4
	h, err := NewHub(cfg, log, nil)
	require.NoError(t, err)
	st, err := h.Open("r1")
	require.NoError(t, err)
	stalled, ok := st.Subscribe(0)
	require.True(t, ok)
	reader, ok := st.Subscribe(0)
	require.True(t, ok)
	n := 0
	for range 100 {
		st.Emit(pipeline.LiveToken, []byte(`{}`))
		<-reader.Events() // a client that keeps up
		n++
	}
	st.Emit(pipeline.LiveVerdict, []byte(`{}`))
	select {
	case <-stalled.Dropped():
	default:
		t.Fatal("the stalled subscriber was not dropped")
	}
	for range reader.Events() {
		n++
	}
	require.Equal(t, 101, n)
	require.NoError(t, h.Wait(context.Background()))
	evs, _ := log.Read(context.Background(), "r1", 0, 0)
	require.Len(t, evs, 101, "every event reaches the log for resumes")
	require.Equal(t, pipeline.LiveVerdict, evs[100].Type)
}

func TestSubscribeAfterResumesFromTheTail(t *testing.T) {
	h, err := NewHub(DefaultConfig(), nil, nil)
	require.NoError(t, err)
	st, _ := h.Open("r2")
	for range 5 {
		st.Emit(pipeline.LiveToken, []byte(`{}`))
	}
	sub, ok := st.Subscribe(3)
	require.True(t, ok)
	st.Emit(pipeline.LiveStopped, []byte(`{}`))
	var seqs []uint64
	for ev := range sub.Events() {
		seqs = append(seqs, ev.Seq)
	}
	require.Equal(t, []uint64{4, 5, 6}, seqs)
	_, ok = st.Subscribe(0)
	require.False(t, ok, "a closed stream is read from the log")
}

func TestDrainRefusesNewStreams(t *testing.T) {
	h, err := NewHub(DefaultConfig(), nil, nil)
	require.NoError(t, err)
	h.Drain()
	<-h.Draining()
	_, err = h.Open("r3")
	require.ErrorIs(t, err, ErrDraining)
}
