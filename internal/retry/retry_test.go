package retry

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"time"
)

func TestCeilingDoublesAndCapsWithoutOverflow(t *testing.T) {
	p := Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 7: 5 * time.Second, 1 << 20: 5 * time.Second} {
		if got := p.Ceiling(n); got != want {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, want)
		}
	}
	huge := Policy{Initial: time.Duration(math.MaxInt64 / 3), Max: time.Duration(math.MaxInt64)}
	if got := huge.Ceiling(10); got <= 0 {
		t.Errorf("Ceiling overflowed to %v", got)
	}
}

func TestDelayStaysWithinFullJitterBounds(t *testing.T) {
	p := Policy{Initial: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	seenLow, seenHigh := false, false
	for range 2000 {
		d := p.Delay(3)
		if d < 0 || d > 40*time.Millisecond {
			t.Fatalf("Delay(3) = %v outside [0, 40ms]", d)
		}
		seenLow = seenLow || d < 10*time.Millisecond
		seenHigh = seenHigh || d > 30*time.Millisecond
	}
	if !seenLow || !seenHigh {
		t.Errorf("2000 delays did not spread over the range (low %v, high %v)", seenLow, seenHigh)
	}
}

func TestValidateJoinsEveryProblem(t *testing.T) {
	err := Policy{Initial: -1, Max: -2, Attempts: -1}.Validate()
	if err == nil {
		t.Fatal("want an error")
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 3 {
		t.Errorf("want 3 problems, got %d: %v", n, err)
	}
	if err := (Policy{Initial: 1, Max: 1}).Validate(); err != nil {
		t.Errorf("valid policy refused: %v", err)
	}
}

// fakeSleep records waits without waiting.
type fakeSleep struct{ waits []time.Duration }

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.waits = append(f.waits, d)
	return context.Cause(ctx)
}

func TestDoRetriesUntilSuccess(t *testing.T) {
	var fs fakeSleep
	calls := 0
	err := Do(context.Background(), Policy{Initial: time.Second, Max: time.Second}, Options{Sleep: fs.sleep}, func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("transient")
		}
		return nil
	})
	if err != nil || calls != 3 || len(fs.waits) != 2 {
		t.Fatalf("err %v, calls %d, waits %v", err, calls, fs.waits)
	}
}

func TestDoStopsOnPermanentAndAttempts(t *testing.T) {
	var fs fakeSleep
	boom := errors.New("boom")
	calls := 0
	err := Do(context.Background(), Policy{Initial: time.Second, Max: time.Second, Attempts: 5}, Options{Sleep: fs.sleep}, func(context.Context) error {
		calls++
		return Permanent(boom)
	})
	if err != boom || calls != 1 {
		t.Fatalf("permanent: err %v calls %d", err, calls)
	}
	calls = 0
	err = Do(context.Background(), Policy{Initial: time.Second, Max: time.Second, Attempts: 4}, Options{Sleep: fs.sleep}, func(context.Context) error {
		calls++
		return boom
	})
	if !errors.Is(err, boom) || calls != 4 {
		t.Fatalf("attempts: err %v calls %d", err, calls)
	}
	calls = 0
	err = Do(context.Background(), Policy{Initial: time.Second, Max: time.Second}, Options{Sleep: fs.sleep, Retryable: func(error) bool { return false }}, func(context.Context) error {
		calls++
		return boom
	})
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("not retryable: err %v calls %d", err, calls)
	}
}

func TestDoHonoursAfterAndContext(t *testing.T) {
	var fs fakeSleep
	calls := 0
	_ = Do(context.Background(), Policy{Initial: time.Millisecond, Max: time.Millisecond, Attempts: 2}, Options{Sleep: fs.sleep}, func(context.Context) error {
		calls++
		return After(errors.New("429"), 7*time.Second)
	})
	if len(fs.waits) != 1 || fs.waits[0] != 7*time.Second {
		t.Fatalf("want one 7s wait, got %v", fs.waits)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("shutting down")
	calls = 0
	err := Do(ctx, Policy{Initial: time.Hour, Max: time.Hour}, Options{}, func(context.Context) error {
		calls++
		cancel(stop)
		return errors.New("transient")
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("want the cancel cause after one call, got %v after %d", err, calls)
	}
}

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled ctx = %v", err)
	}
	if err := Sleep(context.Background(), time.Microsecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ceil := time.Minute
	cases := []struct {
		h    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"abc", 0, false},
		{"-5", 0, false},
		{"NaN", 0, false},
		{"3", 3 * time.Second, true},
		{" 1.5 ", 1500 * time.Millisecond, true},
		{"0", 0, true},
		{"99999999999999999999", ceil, true},
		{"1e300", ceil, true},
		{now.Add(20 * time.Second).Format(http.TimeFormat), 20 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{now.Add(100 * 365 * 24 * time.Hour).Format(http.TimeFormat), ceil, true},
	}
	for _, c := range cases {
		got, ok := ParseRetryAfter(c.h, now, ceil)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", c.h, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "1.5", "Wed, 21 Oct 2015 07:28:00 GMT", "9e99", "-1"} {
		f.Add(s)
	}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, h string) {
		d, ok := ParseRetryAfter(h, now, time.Minute)
		if d < 0 || d > time.Minute || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", h, d, ok)
		}
	})
}
