// Package retry is chatguard's one backoff policy: capped exponential backoff
// with full jitter, a context-honouring wait, a bounded retry loop, and the
// one parser of HTTP Retry-After headers. Every component that waits before
// trying again uses it, so there is one place to read, tune and test how the
// system backs off.
//
// Full jitter (a uniformly random wait in [0, ceiling]) is used everywhere
// because the callers are many pods retrying against one shared dependency:
// it spreads their retries out instead of letting them arrive in waves.
package retry

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
)

// Policy is a capped exponential backoff with full jitter. The zero value is
// not useful; fill Initial and Max (Validate says what is wrong).
type Policy struct {
	// Initial is the ceiling of the first wait.
	Initial time.Duration
	// Max caps every wait's ceiling.
	Max time.Duration
	// Attempts bounds the calls Do makes (the first included); 0 means
	// until the context ends.
	Attempts int
}

// Validate reports a policy that cannot back off.
func (p Policy) Validate() error {
	var errs []error
	if p.Initial <= 0 {
		errs = append(errs, errors.New("retry: initial backoff must be positive"))
	}
	if p.Max < p.Initial {
		errs = append(errs, errors.New("retry: max backoff must be at least the initial backoff"))
	}
	if p.Attempts < 0 {
		errs = append(errs, errors.New("retry: attempts must not be negative"))
	}
	return errors.Join(errs...)
}

// Ceiling is the largest wait before retry n (n ≥ 1): min(Max, Initial·2^(n−1)).
// It never overflows, whatever n is.
func (p Policy) Ceiling(n int) time.Duration {
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		if d > math.MaxInt64/2 {
			return p.Max
		}
		d *= 2
	}
	return min(d, p.Max)
}

// Delay is the full-jitter wait before retry n (n ≥ 1): uniform in
// [0, Ceiling(n)].
func (p Policy) Delay(n int) time.Duration {
	c := p.Ceiling(n)
	if c <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(c) + 1))
}

// Sleep waits d or until ctx ends, whichever is first. It returns nil when
// d elapsed and ctx's cause otherwise, so a caller can return it as is.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// SleepFunc waits like Sleep. Components take one so that tests can replace
// real waiting with a fake clock.
type SleepFunc func(ctx context.Context, d time.Duration) error

// permanent marks an error that Do must not retry.
type permanent struct{ err error }

func (e *permanent) Error() string { return e.err.Error() }
func (e *permanent) Unwrap() error { return e.err }

// Permanent wraps err so that Do returns it at once (unwrapped); nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err: err}
}

// afterError asks Do to wait at least d before the next attempt.
type afterError struct {
	err error
	d   time.Duration
}

func (e *afterError) Error() string { return e.err.Error() }
func (e *afterError) Unwrap() error { return e.err }

// After wraps err so that Do waits at least d (a server's Retry-After) before
// the next attempt instead of less; nil stays nil.
func After(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &afterError{err: err, d: d}
}

// Options tune one Do call. The zero value is ready to use.
type Options struct {
	// Clock is what Do waits on between attempts; nil is the wall clock.
	Clock clock.Clock
	// Sleep, when set, replaces the wait on Clock.
	Sleep SleepFunc
	// Retryable, when set, decides whether an error is worth another
	// attempt; nil retries every error not marked Permanent.
	Retryable func(error) bool
	// OnRetry, when set, is called before each wait with the failed
	// attempt's number (1 for the first call), its error and the wait.
	OnRetry func(attempt int, err error, wait time.Duration)
}

// Do calls op until it succeeds, returns a Permanent error, returns an error
// Retryable rejects, the policy's attempts run out, or ctx ends. Between
// attempts it waits Delay(n), or longer when the error carries After. It
// returns op's last error (unwrapped from Permanent), or ctx's cause when
// ctx ended during a wait, joined with the last error.
func Do(ctx context.Context, p Policy, opt Options, op func(ctx context.Context) error) error {
	sleep := opt.Sleep
	if sleep == nil {
		sleep = func(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, opt.Clock, d) }
	}
	for n := 1; ; n++ {
		err := op(ctx)
		if err == nil {
			return nil
		}
		var perm *permanent
		if errors.As(err, &perm) {
			return perm.err
		}
		if opt.Retryable != nil && !opt.Retryable(err) {
			return err
		}
		if p.Attempts > 0 && n >= p.Attempts {
			return err
		}
		if cerr := context.Cause(ctx); cerr != nil {
			return errors.Join(cerr, err)
		}
		wait := p.Delay(n)
		var after *afterError
		if errors.As(err, &after) && after.d > wait {
			// The server knows better than our backoff; the caller
			// already clamped its value (ParseRetryAfter).
			wait = after.d
		}
		if opt.OnRetry != nil {
			opt.OnRetry(n, err, wait)
		}
		if serr := sleep(ctx, wait); serr != nil {
			return errors.Join(serr, err)
		}
	}
}

// ParseRetryAfter reads an HTTP Retry-After value: delta-seconds ("120", a
// fraction is accepted) or an HTTP-date, relative to now. The result is
// clamped to [0, ceiling]; ok is false when the header is empty or unusable,
// so the caller keeps its own backoff. A huge value never overflows: it
// clamps to ceiling.
func ParseRetryAfter(h string, now time.Time, ceiling time.Duration) (d time.Duration, ok bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(h, 64); err == nil {
		if math.IsNaN(s) || s < 0 {
			return 0, false
		}
		if s >= ceiling.Seconds() {
			return ceiling, true
		}
		return time.Duration(s * float64(time.Second)), true
	}
	t, err := http.ParseTime(h)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now)
	return min(max(d, 0), ceiling), true
}
