package lifecycle_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/lifecycle"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
)

// journal records what the services did, in order.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, s)
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.lines)
}

// service runs until its context is cancelled and journals each phase.
func service(j *journal, name string, started chan<- string) lifecycle.Service {
	return lifecycle.Service{
		Name:  name,
		Start: func(context.Context) error { j.add("start " + name); return nil },
		Run: func(ctx context.Context) error {
			started <- name
			<-ctx.Done()
			j.add("drain " + name)
			return nil
		},
		Stop: func(context.Context) error { j.add("stop " + name); return nil },
	}
}

func within(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStartsInOrderStopsInReverse(t *testing.T) {
	var j journal
	started := make(chan string, 3)
	g := lifecycle.New(nil, nil)
	g.Add(service(&j, "a", started), service(&j, "b", started), service(&j, "c", started))
	ctx, cancel := context.WithCancel(within(t))
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	for range 3 {
		<-started
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("a clean stop returned %v", err)
	}
	want := []string{"start a", "start b", "start c", "drain c", "stop c", "drain b", "stop b", "drain a", "stop a"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
}

func TestTheFirstFailureStopsTheRestAndIsReturned(t *testing.T) {
	var j journal
	started := make(chan string, 2)
	boom := errors.New("queue gone")
	failing := lifecycle.Service{Name: "loop", Run: func(ctx context.Context) error {
		<-started
		<-started
		return boom
	}}
	g := lifecycle.New(nil, nil)
	g.Add(service(&j, "a", started), failing, service(&j, "c", started))
	err := g.Run(within(t))
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "loop: queue gone") {
		t.Fatalf("got %v, want the loop's failure first", err)
	}
	if strings.Count(err.Error(), "queue gone") != 1 {
		t.Fatalf("the failure was reported more than once: %v", err)
	}
	want := []string{"start a", "start c", "drain c", "stop c", "drain a", "stop a"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
}

func TestAStartFailureStopsWhatStarted(t *testing.T) {
	var j journal
	started := make(chan string, 2)
	bad := lifecycle.Service{Name: "schema", Start: func(context.Context) error { return errors.New("not migrated") }}
	g := lifecycle.New(nil, nil)
	g.Add(service(&j, "admin", started), bad, service(&j, "never", started))
	err := g.Run(within(t))
	if err == nil || err.Error() != "schema: not migrated" {
		t.Fatalf("got %v", err)
	}
	if got := j.get(); !slices.Equal(got, []string{"start admin", "drain admin", "stop admin"}) {
		t.Fatalf("got %v", got)
	}
}

func TestAOneShotServiceEndsTheGroupCleanly(t *testing.T) {
	var j journal
	started := make(chan string, 1)
	g := lifecycle.New(nil, nil)
	g.Add(service(&j, "metrics", started), lifecycle.Service{Name: "batch", Run: func(context.Context) error {
		<-started
		return nil
	}})
	if err := g.Run(within(t)); err != nil {
		t.Fatalf("got %v", err)
	}
	if got := j.get(); !slices.Equal(got, []string{"start metrics", "drain metrics", "stop metrics"}) {
		t.Fatalf("got %v", got)
	}
}

func TestDrainDeadlineCancelsTheHardContext(t *testing.T) {
	c := clock.NewFake(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	running := make(chan struct{})
	softDone := make(chan error, 1)
	var hardErr error
	g := lifecycle.New(nil, c)
	g.Add(lifecycle.Service{Name: "loop", Drain: 30 * time.Second, Run: func(ctx context.Context) error {
		hard := drain.Hard(ctx)
		close(running)
		<-ctx.Done()
		softDone <- hard.Err()
		<-hard.Done() // a job that will not finish on its own
		hardErr = context.Cause(hard)
		return nil
	}})
	ctx, cancel := context.WithCancel(within(t))
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	<-running
	cancel()
	if err := <-softDone; err != nil {
		t.Fatalf("work cancelled together with taking work: %v", err)
	}
	if err := c.BlockUntilContext(within(t), 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(29 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("stopped before the drain deadline: %v", err)
	default:
	}
	c.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("got %v", err)
	}
	if hardErr == nil || !strings.Contains(hardErr.Error(), "drain deadline of 30s passed") {
		t.Fatalf("hard context's cause %v", hardErr)
	}
}

// A service that does not return within its grace after the drain
// deadline is reported: the package's Grace by default, its own when it
// sets one (a service that settles its cancelled work with bounded calls).
func TestAServiceThatWillNotStopIsReported(t *testing.T) {
	for _, tc := range []struct {
		grace, waits time.Duration
		want         string
	}{
		{0, lifecycle.Grace, "stuck: still running 5s"},
		{3 * lifecycle.Grace, 3 * lifecycle.Grace, "stuck: still running 15s"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			c := clock.NewFake(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
			release := make(chan struct{})
			defer close(release)
			g := lifecycle.New(nil, c)
			g.Add(lifecycle.Service{Name: "stuck", Drain: time.Second, Grace: tc.grace, Run: func(ctx context.Context) error {
				<-release
				return nil
			}})
			ctx, cancel := context.WithCancel(within(t))
			done := make(chan error, 1)
			go func() { done <- g.Run(ctx) }()
			cancel()
			if err := c.BlockUntilContext(within(t), 1); err != nil {
				t.Fatal(err)
			}
			c.Advance(time.Second)
			if err := c.BlockUntilContext(within(t), 1); err != nil {
				t.Fatal(err)
			}
			c.Advance(tc.waits - time.Nanosecond)
			select {
			case err := <-done:
				t.Fatalf("given up on before its grace: %v", err)
			default:
			}
			c.Advance(time.Nanosecond)
			err := <-done
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// A service learns why the group stops: its context's cause is
// ErrStopping wrapping the cause of the group's own ctx (a signal).
func TestStopCauseCarriesTheSignal(t *testing.T) {
	ctx, cancel := context.WithCancelCause(within(t))
	signal := errors.New("received terminated")
	causes := make(chan error, 1)
	running := make(chan struct{})
	g := lifecycle.New(nil, nil)
	g.Add(lifecycle.Service{Name: "one-shot", Run: func(ctx context.Context) error {
		close(running)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}})
	ran := make(chan error, 1)
	go func() { ran <- g.Run(ctx) }()
	<-running
	cancel(signal)
	require.NoError(t, <-ran, "the stop's own cause is no failure")
	cause := <-causes
	require.ErrorIs(t, cause, lifecycle.ErrStopping)
	require.ErrorIs(t, cause, signal)
	require.ErrorContains(t, cause, "received terminated")
}

func TestNamedFindsAServiceByName(t *testing.T) {
	svcs := []lifecycle.Service{{Name: "admin"}, {Name: "job loop", Drain: time.Minute}}
	s, ok := lifecycle.Named(svcs, "job loop")
	require.True(t, ok)
	require.Equal(t, time.Minute, s.Drain)
	_, ok = lifecycle.Named(svcs, "consumer")
	require.False(t, ok)
}
