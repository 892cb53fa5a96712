// Package clock is the one clock of every production package: the time of
// day, timers, tickers, sleeps and context deadlines that honour a context,
// all from one value that tests replace with a Fake they move by hand.
//
// It is github.com/jonboulle/clockwork under names of our own plus the two
// things clockwork lacks: a sleep that a cancelled context cuts short, and
// a nil Clock that means the real one, so a zero-value config works.
// Network timeouts inside clients, drivers and SDKs (http.Client.Timeout,
// the MySQL driver's readTimeout, the AWS SDK's retryer) stay on real time:
// they bound a wait on another machine, not our own logic. So do the
// context deadlines that bound one call to another machine: an LLM
// attempt's AttemptTimeout, the fleet store's and the tokenizer's call
// timeouts (pipeline/llm), the SQS adapter's CallTimeout (SQS's long-poll
// WaitTime is the server's wait, not ours), the chat client's Timeout, and
// the stop subscriber's bounded Redis receive. The fake queue's poll cap
// and its wait for a hidden message (pipeline/queuetest) are on real time
// on purpose too: a poll of an empty fake stays short on a clock that
// never moves, and a test sharing its clock with the fake counts only the
// waiters of the code under test.
package clock

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
)

// Clock tells the time and makes timers and tickers.
type Clock = clockwork.Clock

// Timer is a Clock's timer; read it from Chan.
type Timer = clockwork.Timer

// Ticker is a Clock's ticker; read it from Chan.
type Ticker = clockwork.Ticker

// Fake is a Clock that moves only when Advance is called. BlockUntilContext
// waits until n timers, tickers or sleeps wait on it: a test's way to know
// the code under test reached its wait without sleeping itself.
type Fake = clockwork.FakeClock

var wall = clockwork.NewRealClock()

// Real returns the wall clock.
func Real() Clock { return wall }

// Or returns c, or the wall clock when c is nil: a config's zero value
// runs on real time.
func Or(c Clock) Clock {
	if c == nil {
		return wall
	}
	return c
}

// NewFake returns a Fake reading at.
func NewFake(at time.Time) *Fake { return clockwork.NewFakeClockAt(at) }

// Sleep waits d on c. It returns ctx's error (its cause when it has one)
// as soon as ctx is done, and nil after d; a d of zero or less returns at
// once with ctx's state.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return cause(ctx)
	}
	t := Or(c).NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return cause(ctx)
	case <-t.Chan():
		return nil
	}
}

// WithTimeout is context.WithTimeout on c: the context is done d after
// c's now, as c counts time.
func WithTimeout(ctx context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	c = Or(c)
	return WithDeadline(ctx, c, c.Now().Add(d))
}

// WithDeadline is context.WithDeadline on c. On the wall clock it is
// context.WithDeadline itself. On another clock the context reports at as
// its deadline, is done once c reaches at (Err then is
// context.DeadlineExceeded, like the standard library's), and follows its
// parent's cancellation as any derived context does.
func WithDeadline(ctx context.Context, c Clock, at time.Time) (context.Context, context.CancelFunc) {
	c = Or(c)
	if c == wall {
		return context.WithDeadline(ctx, at)
	}
	if pd, ok := ctx.Deadline(); ok && pd.Before(at) {
		at = pd
	}
	inner, cancel := context.WithCancelCause(ctx)
	d := at.Sub(c.Now())
	if d <= 0 {
		cancel(context.DeadlineExceeded)
		return deadlineCtx{inner, at}, func() { cancel(context.Canceled) }
	}
	t := c.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return deadlineCtx{inner, at}, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// deadlineCtx is a cancellable context that reports a deadline kept by a
// clock other than the wall clock.
type deadlineCtx struct {
	context.Context
	at time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.at, true }

// Err says DeadlineExceeded when the clock ended the context, as a
// standard deadline context would, rather than the Canceled the cancel
// function underneath reports.
func (c deadlineCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

func cause(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}
