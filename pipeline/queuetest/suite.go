package queuetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// Backend is one queue under test, with its dead-letter queue.
type Backend struct {
	Queue pipeline.Queue
	// DLQ is where Queue's redrive moves a message received MaxReceive
	// times.
	DLQ        pipeline.Queue
	MaxReceive int
	// Advance moves the backend's clock on (Fake.Advance); nil for a
	// service whose clock runs by itself.
	Advance func(time.Duration)
	// Clock is the clock the backend stamps sent messages with; nil is
	// the wall clock (a service's own).
	Clock clock.Clock
}

// NewBackend makes a fresh, empty queue and DLQ for one test, with the
// redrive policy's maxReceiveCount; it cleans them up when t ends.
type NewBackend func(t *testing.T, maxReceive int) Backend

// Run is the conformance suite of pipeline.Queue: every implementation
// (the SQS adapter against the local stack, Fake) must pass it, so that
// the engines' unit tests on Fake mean what they would on SQS. Subtests
// run in parallel, each on its own queue.
func Run(t *testing.T, newBackend NewBackend) {
	t.Run("SendAndReceiveKeepEverything", func(t *testing.T) { t.Parallel(); sendAndReceive(t, newBackend(t, 5)) })
	t.Run("ReceiveReturnsAtMostMax", func(t *testing.T) { t.Parallel(); receiveAtMostMax(t, newBackend(t, 5)) })
	t.Run("HandBackAndVisibilityTimeout", func(t *testing.T) { t.Parallel(); handBack(t, newBackend(t, 5)) })
	t.Run("PartialFailureNamesItsEntries", func(t *testing.T) { t.Parallel(); partialFailure(t, newBackend(t, 5)) })
	t.Run("DeleteIsForGood", func(t *testing.T) { t.Parallel(); deleteForGood(t, newBackend(t, 5)) })
	t.Run("SendRefusesInvalidEntriesAlone", func(t *testing.T) { t.Parallel(); sendInvalid(t, newBackend(t, 5)) })
	t.Run("RedriveAfterMaxReceives", func(t *testing.T) { t.Parallel(); redrive(t, newBackend(t, 2)) })
	t.Run("ReceiveValidatesMax", func(t *testing.T) { t.Parallel(); receiveValidates(t, newBackend(t, 5)) })
	t.Run("ReceiveHonoursContext", func(t *testing.T) { t.Parallel(); receiveHonoursContext(t, newBackend(t, 5)) })
}

const (
	// suiteDeadline bounds every wait of a subtest.
	suiteDeadline = 30 * time.Second
	// poll is the long poll of receives expected to find something.
	poll = time.Second
	// hidden is a visibility no subtest outlasts.
	hidden = time.Minute
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), suiteDeadline)
	t.Cleanup(cancel)
	return ctx
}

// receiveN receives until n messages came (checking every call's max).
func receiveN(t *testing.T, ctx context.Context, q pipeline.Receiver, n int, vis time.Duration) []pipeline.Message {
	t.Helper()
	var got []pipeline.Message
	var lastErr error
	for len(got) < n {
		require.NoError(t, ctx.Err(), "received %d of %d messages (last receive error: %v)", len(got), n, lastErr)
		msgs, err := q.Receive(ctx, pipeline.ReceiveRequest{Max: pipeline.MaxReceive, Wait: poll, Visibility: vis})
		if err != nil {
			// A receive is one attempt, which its caller's loop retries:
			// a connection the transport lost is no broken contract. One
			// that lasts ends at the suite's deadline, with its error.
			lastErr = err
			_ = clock.Sleep(ctx, clock.Real(), 100*time.Millisecond)
			continue
		}
		require.LessOrEqual(t, len(msgs), pipeline.MaxReceive)
		got = append(got, msgs...)
	}
	require.Len(t, got, n, "no more than sent")
	return got
}

// nothingVisible asserts that a receive finds nothing now.
func nothingVisible(t *testing.T, ctx context.Context, q pipeline.Receiver) {
	t.Helper()
	msgs, err := q.Receive(ctx, pipeline.ReceiveRequest{Max: pipeline.MaxReceive, Visibility: hidden})
	require.NoError(t, err)
	require.Empty(t, msgs)
}

func bodies(msgs []pipeline.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	slices.Sort(out)
	return out
}

func receipts(msgs []pipeline.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ReceiptHandle
	}
	return out
}

func sendAndReceive(t *testing.T, b Backend) {
	ctx := testCtx(t)
	const n = 25
	want := map[string]map[string]pipeline.Attribute{}
	var out []pipeline.OutMessage
	for i := range n {
		body := fmt.Sprintf(`{"n":%d,"text":"선입금 %d"}`, i, i)
		attrs := map[string]pipeline.Attribute{"run_id": pipeline.StringAttribute(fmt.Sprint("run-", i)), "n": pipeline.NumberAttribute(int64(i))}
		want[body] = attrs
		out = append(out, pipeline.OutMessage{Body: []byte(body), Attributes: attrs})
	}
	before := clock.Or(b.Clock).Now()
	require.NoError(t, b.Queue.Send(ctx, out), "more than ten messages in one call")
	msgs := receiveN(t, ctx, b.Queue, n, hidden)
	after := clock.Or(b.Clock).Now()
	ids := map[string]bool{}
	for _, m := range msgs {
		require.NotEmpty(t, m.ID)
		require.NotEmpty(t, m.ReceiptHandle)
		require.False(t, ids[m.ID], "message %s delivered twice", m.ID)
		ids[m.ID] = true
		attrs, ok := want[string(m.Body)]
		require.True(t, ok, "unexpected body %q", m.Body)
		require.Equal(t, attrs, m.Attributes)
		require.Equal(t, 1, m.ReceiveCount)
		require.WithinRange(t, m.SentAt, before.Add(-time.Minute), after.Add(time.Minute))
	}
	nothingVisible(t, ctx, b.Queue) // every message is in flight
}

func receiveAtMostMax(t *testing.T, b Backend) {
	ctx := testCtx(t)
	require.NoError(t, b.Queue.Send(ctx, []pipeline.OutMessage{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}, {Body: []byte("d")}, {Body: []byte("e")}}))
	var got []pipeline.Message
	for len(got) < 5 {
		require.NoError(t, ctx.Err())
		msgs, err := b.Queue.Receive(ctx, pipeline.ReceiveRequest{Max: 2, Wait: poll, Visibility: hidden})
		require.NoError(t, err)
		require.LessOrEqual(t, len(msgs), 2)
		got = append(got, msgs...)
	}
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, bodies(got))
}

func handBack(t *testing.T, b Backend) {
	ctx := testCtx(t)
	require.NoError(t, b.Queue.Send(ctx, []pipeline.OutMessage{{Body: []byte("x")}}))
	first := receiveN(t, ctx, b.Queue, 1, hidden)[0]

	// Visibility 0 hands it back at once, as a new delivery.
	require.NoError(t, b.Queue.ChangeVisibility(ctx, []string{first.ReceiptHandle}, 0))
	second := receiveN(t, ctx, b.Queue, 1, time.Second)[0]
	require.Equal(t, first.ID, second.ID)
	require.Equal(t, 2, second.ReceiveCount)
	require.NotEqual(t, first.ReceiptHandle, second.ReceiptHandle)
	require.Equal(t, first.SentAt, second.SentAt)

	// The first delivery's receipt no longer changes anything.
	err := b.Queue.ChangeVisibility(ctx, []string{first.ReceiptHandle}, hidden)
	require.Error(t, pipeline.EntryErrors(err, 1)[0], "a stale receipt")

	// The visibility timeout of one second runs out by itself.
	var third []pipeline.Message
	for len(third) == 0 {
		require.NoError(t, ctx.Err(), "the message did not come back after its visibility timeout")
		if b.Advance != nil {
			b.Advance(time.Second)
		}
		var err error
		third, err = b.Queue.Receive(ctx, pipeline.ReceiveRequest{Max: 1, Wait: poll, Visibility: hidden})
		require.NoError(t, err)
	}
	require.Equal(t, first.ID, third[0].ID)
	require.Equal(t, 3, third[0].ReceiveCount)
}

func partialFailure(t *testing.T, b Backend) {
	ctx := testCtx(t)
	require.NoError(t, b.Queue.Send(ctx, []pipeline.OutMessage{{Body: []byte("a")}, {Body: []byte("b")}}))
	msgs := receiveN(t, ctx, b.Queue, 2, hidden)
	err := b.Queue.ChangeVisibility(ctx, []string{msgs[0].ReceiptHandle, "not-a-receipt", msgs[1].ReceiptHandle}, 0)
	var be *pipeline.BatchError
	require.ErrorAs(t, err, &be)
	errs := pipeline.EntryErrors(err, 3)
	require.NoError(t, errs[0])
	var perm *pipeline.PermanentError
	require.ErrorAs(t, errs[1], &perm, "an entry the queue refuses for itself is permanent: no retry changes the answer")
	require.NoError(t, errs[2])
	// The good entries took effect: both messages are visible again.
	again := receiveN(t, ctx, b.Queue, 2, hidden)
	require.Equal(t, []string{"a", "b"}, bodies(again))
	for _, m := range again {
		require.Equal(t, 2, m.ReceiveCount)
	}
}

func deleteForGood(t *testing.T, b Backend) {
	ctx := testCtx(t)
	var out []pipeline.OutMessage
	for i := range 12 {
		out = append(out, pipeline.OutMessage{Body: fmt.Appendf(nil, "m%02d", i)})
	}
	require.NoError(t, b.Queue.Send(ctx, out))
	msgs := receiveN(t, ctx, b.Queue, 12, hidden)
	require.NoError(t, b.Queue.Delete(ctx, receipts(msgs)), "more than ten receipts in one call")
	// A deleted message's visibility cannot change, and it never returns.
	err := b.Queue.ChangeVisibility(ctx, receipts(msgs), 0)
	for i, e := range pipeline.EntryErrors(err, len(msgs)) {
		require.Error(t, e, "entry %d", i)
	}
	msgs, err = b.Queue.Receive(ctx, pipeline.ReceiveRequest{Max: pipeline.MaxReceive, Wait: poll, Visibility: hidden})
	require.NoError(t, err)
	require.Empty(t, msgs)
}

func sendInvalid(t *testing.T, b Backend) {
	ctx := testCtx(t)
	err := b.Queue.Send(ctx, []pipeline.OutMessage{{Body: []byte("ok-1")}, {Body: []byte("bad \x01 control")}, {Body: []byte("ok-2")}})
	var be *pipeline.BatchError
	require.ErrorAs(t, err, &be)
	errs := pipeline.EntryErrors(err, 3)
	require.NoError(t, errs[0])
	var perm *pipeline.PermanentError
	require.ErrorAs(t, errs[1], &perm, "an entry the queue refuses for itself is permanent: no retry changes the answer")
	require.NoError(t, errs[2])
	require.Equal(t, []string{"ok-1", "ok-2"}, bodies(receiveN(t, ctx, b.Queue, 2, hidden)))
}

func redrive(t *testing.T, b Backend) {
	ctx := testCtx(t)
	require.NoError(t, b.Queue.Send(ctx, []pipeline.OutMessage{{Body: []byte("poison"), Attributes: map[string]pipeline.Attribute{"k": pipeline.StringAttribute("v")}}}))
	var id string
	for i := range b.MaxReceive {
		m := receiveN(t, ctx, b.Queue, 1, hidden)[0]
		require.Equal(t, i+1, m.ReceiveCount)
		id = m.ID
		require.NoError(t, b.Queue.ChangeVisibility(ctx, []string{m.ReceiptHandle}, 0))
	}
	// The next receive finds it over its limit and moves it.
	var dead []pipeline.Message
	for len(dead) == 0 {
		require.NoError(t, ctx.Err(), "the message never reached the DLQ")
		msgs, err := b.Queue.Receive(ctx, pipeline.ReceiveRequest{Max: pipeline.MaxReceive, Wait: 200 * time.Millisecond, Visibility: hidden})
		require.NoError(t, err)
		require.Empty(t, msgs, "delivered beyond maxReceiveCount")
		dead, err = b.DLQ.Receive(ctx, pipeline.ReceiveRequest{Max: pipeline.MaxReceive, Wait: 200 * time.Millisecond, Visibility: hidden})
		require.NoError(t, err)
	}
	require.Len(t, dead, 1)
	require.Equal(t, "poison", string(dead[0].Body))
	require.Equal(t, map[string]pipeline.Attribute{"k": pipeline.StringAttribute("v")}, dead[0].Attributes)
	require.NotEmpty(t, id)
}

func receiveValidates(t *testing.T, b Backend) {
	ctx := testCtx(t)
	for _, n := range []int{0, pipeline.MaxReceive + 1} {
		_, err := b.Queue.Receive(ctx, pipeline.ReceiveRequest{Max: n, Visibility: hidden})
		require.Error(t, err, "max %d", n)
	}
}

func receiveHonoursContext(t *testing.T, b Backend) {
	ctx, cancel := context.WithCancelCause(testCtx(t))
	stop := errors.New("shutting down")
	// Real time on purpose: a service's long poll is under way on another
	// machine, and only a cancel during it shows that it honours ctx.
	clock.Real().AfterFunc(100*time.Millisecond, func() { cancel(stop) })
	msgs, err := b.Queue.Receive(ctx, pipeline.ReceiveRequest{Max: 1, Wait: 5 * time.Second, Visibility: hidden})
	require.Empty(t, msgs)
	require.ErrorIs(t, err, stop, "the poll ends with ctx's cause")
}
