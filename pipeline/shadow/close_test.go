package shadow_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/shadow"
)

// holdingClock is a fake clock whose next Now, once armed, says so on in
// and waits for out: it holds an Offer in the middle of its admission.
type holdingClock struct {
	*clock.Fake
	armed   atomic.Bool
	in, out chan struct{}
}

func (c *holdingClock) Now() time.Time {
	if c.armed.CompareAndSwap(true, false) {
		c.in <- struct{}{}
		<-c.out
	}
	return c.Fake.Now()
}

// waitOn waits for ch with a bound.
func waitOn(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not happen within 30s", what)
	}
}

// TestAnOfferThatCloseOvertakesStartsNothing: an Offer that has begun
// admitting a review when Close runs either gets its review waited for by
// Close or starts none; it never starts one after Close has returned.
func TestAnOfferThatCloseOvertakesStartsNothing(t *testing.T) {
	t.Parallel()
	hc := &holdingClock{Fake: clock.NewFake(t0), in: make(chan struct{}), out: make(chan struct{})}
	cand := &candidate{mode: "ok", entered: make(chan struct{}, 4)}
	events := make(sink, 4)
	r, err := shadow.New(shadow.Config{Rate: 1, Concurrency: 2, Timeout: time.Minute, Candidate: "managed-large"}, cand, events, hc)
	require.NoError(t, err)
	k := sampledKeys(1, 1)[0]

	hc.armed.Store(true)
	offered := make(chan struct{})
	go func() { defer close(offered); r.Offer(live(k), pipeline.ReviewEvent{RoomID: k.RoomID}, nil) }()
	waitOn(t, hc.in, "the offer reading the clock")
	require.NoError(t, r.Close(context.Background()))
	close(hc.out)
	waitOn(t, offered, "the offer returning")
	// A review started after Close returned would be waited for here.
	require.NoError(t, r.Close(context.Background()))
	require.Empty(t, cand.entered, "a review started after Close returned")
	require.Empty(t, events)
}

// countingCandidate answers at once, counting the reviews that started
// after Close had returned.
type countingCandidate struct {
	closed, late atomic.Int64
}

func (c *countingCandidate) PipelineVersion() string { return "pv-candidate" }

func (c *countingCandidate) Review(context.Context, pipeline.ReviewEvent, []pipeline.ChatMessage, int) (pipeline.Verdict, error) {
	if c.closed.Load() != 0 {
		c.late.Add(1)
	}
	return pipeline.Verdict{Status: pipeline.StatusDone, Label: pipeline.LabelClean}, nil
}

type discard struct{}

func (discard) Publish(pipeline.LakeEvent) bool { return true }

// TestOfferAndCloseConcurrently runs offers against Close many times
// (under -race, a WaitGroup Add racing its Wait is a report): no review
// starts after Close has returned, and Close returns once.
func TestOfferAndCloseConcurrently(t *testing.T) {
	t.Parallel()
	keys := sampledKeys(8, 1)
	for round := range 200 {
		cand := &countingCandidate{}
		r, err := shadow.New(shadow.Config{Rate: 1, Concurrency: 4, Timeout: time.Minute, Candidate: "managed-large"}, cand, discard{}, clock.NewFake(t0))
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, k := range keys {
			wg.Go(func() {
				<-start
				r.Offer(live(k), pipeline.ReviewEvent{RoomID: k.RoomID}, nil)
			})
		}
		close(start)
		require.NoError(t, r.Close(context.Background()), "round %d", round)
		cand.closed.Store(1)
		wg.Wait()
		require.NoError(t, r.Close(context.Background()))
		require.Zero(t, cand.late.Load(), fmt.Sprintf("round %d: a review started after Close returned", round))
	}
}
