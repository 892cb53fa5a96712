// Package lifecycle runs a binary's services as one group: started in the
// order they were added, stopped in reverse, each stop bounded, and the
// first failure cancelling the rest and returned. Every binary's Main.Run
// is its constructors plus one Group, so no binary orders its shutdown by
// hand and no background error is dropped.
//
// Stopping a service has two phases, expressed here once. First the
// context passed to Run is cancelled: the service stops taking work (stops
// polling, stops accepting connections) and drains what it holds. Work
// that must end even when the drain does not runs under drain.Hard(ctx)
// (internal/drain), which the group cancels when the service's Drain
// deadline passes: the group is the one timer of every service's drain.
// A service that has still not returned its Grace after that is reported
// and left.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/drain"
)

// DefaultDrain is a service's drain deadline when it sets none.
const DefaultDrain = 5 * time.Second

// Grace is how long a service may take to return after its hard context
// was cancelled before the group reports it and moves on, when the
// service sets no Grace of its own.
const Grace = 5 * time.Second

// Service is one part of a binary with a lifetime of its own.
type Service struct {
	// Name appears in errors and logs: "admin", "job loop".
	Name string
	// Start, when set, runs before the next service starts (listen,
	// connect, check the schema). An error stops what already started and
	// is returned.
	Start func(ctx context.Context) error
	// Run, when set, runs until its ctx is cancelled, then drains and
	// returns nil. A Run that returns before the group stops ends the
	// group: with its error, or cleanly when nil (a one-shot binary's work
	// is done).
	Run func(ctx context.Context) error
	// Stop, when set, runs once every service started after this one has
	// stopped and this one's Run has returned: closing clients, flushing
	// buffers. Its ctx carries the Drain deadline.
	Stop func(ctx context.Context) error
	// Drain bounds Run's return and Stop after the stop begins
	// (DefaultDrain when zero). When it passes, drain.Hard(ctx) of Run's
	// ctx is cancelled.
	Drain time.Duration
	// Grace bounds Run's return after its hard context was cancelled
	// (the package's Grace when zero): a service that settles its
	// cancelled work with bounded calls (handing messages back) sets it
	// above their bound.
	Grace time.Duration
}

// Group runs services. The zero value is not usable; call New.
type Group struct {
	log      *slog.Logger
	clock    clock.Clock
	services []Service
}

// New returns an empty group that logs stops to log (nil: discarded) and
// keeps deadlines on c (nil: the wall clock).
func New(log *slog.Logger, c clock.Clock) *Group {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Group{log: log, clock: clock.Or(c)}
}

// Add appends a service; services start in the order they were added.
func (g *Group) Add(s ...Service) { g.services = append(g.services, s...) }

// Named returns the service called name in svcs and true, or false when
// there is none: a binary's test runs one part of the binary's list on
// its own, as the binary wires it.
func Named(svcs []Service, name string) (Service, bool) {
	for _, s := range svcs {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}

// running is a started service.
type running struct {
	svc      Service
	stop     context.CancelCauseFunc
	hardStop context.CancelCauseFunc
	done     chan struct{} // closed when Run returned
	err      error         // Run's result, set before done closes
	reported bool          // err already returned by wait
}

// ErrStopping is the cause of a service's context when the group stops:
// errors.Is(context.Cause(ctx), ErrStopping) holds, and when the group
// stops because its own ctx ended, the cause also wraps that ctx's cause
// (a one-shot service can record "received terminated").
var ErrStopping = errors.New("stopping")

// stopCause is ErrStopping carrying why the group stops.
type stopCause struct{ why error }

func (s stopCause) Error() string {
	if s.why == nil {
		return ErrStopping.Error()
	}
	return ErrStopping.Error() + ": " + s.why.Error()
}

func (s stopCause) Is(target error) bool { return target == ErrStopping }
func (s stopCause) Unwrap() error        { return s.why }

// Run starts every service in order and blocks until ctx is done or a
// service's Run returns, then stops the started services in reverse. It
// returns nil after a clean stop, else every failure joined, the first
// (the one that ended the group) first. A cancelled ctx is a clean stop.
func (g *Group) Run(ctx context.Context) error {
	ended := make(chan int, len(g.services))
	var started []*running
	var first error
	for i, s := range g.services {
		if s.Start != nil {
			if err := s.Start(ctx); err != nil {
				first = fmt.Errorf("%s: %w", s.Name, err)
				break
			}
		}
		r := g.launch(ctx, i, s, ended)
		started = append(started, r)
	}
	if first == nil {
		first = g.wait(ctx, started, ended)
	}
	errs := []error{first}
	for i := len(started) - 1; i >= 0; i-- {
		errs = append(errs, g.stop(ctx, started[i]))
	}
	return errors.Join(errs...)
}

// launch starts s's Run, if any, under its own pair of contexts.
func (g *Group) launch(ctx context.Context, i int, s Service, ended chan<- int) *running {
	// Both contexts outlive ctx: the group, not ctx's cancellation, decides
	// when and in which order each service stops.
	hard, hardStop := context.WithCancelCause(context.WithoutCancel(ctx))
	soft, stop := context.WithCancelCause(drain.WithHard(hard, hard))
	r := &running{svc: s, stop: stop, hardStop: hardStop, done: make(chan struct{})}
	if s.Run == nil {
		close(r.done)
		return r
	}
	go func() {
		r.err = s.Run(soft)
		close(r.done)
		ended <- i // buffered for every service: never blocks
	}()
	return r
}

// wait blocks until ctx is done or a service's Run returns; it returns
// that service's error.
func (g *Group) wait(ctx context.Context, started []*running, ended <-chan int) error {
	select {
	case <-ctx.Done():
		return nil
	case i := <-ended:
		r := started[i]
		<-r.done
		if r.err != nil {
			r.reported = true
			return fmt.Errorf("%s: %w", r.svc.Name, r.err)
		}
		g.log.Info("service finished; stopping the rest", "service", r.svc.Name)
		return nil
	}
}

// stop ends one service: cancel its context, wait for Run within the
// drain deadline, cancel its hard context, wait its grace more, then Stop.
func (g *Group) stop(ctx context.Context, r *running) error {
	drain := r.svc.Drain
	if drain <= 0 {
		drain = DefaultDrain
	}
	r.stop(stopCause{why: context.Cause(ctx)})
	var errs []error
	if err := g.await(r, drain); err != nil {
		errs = append(errs, err)
	}
	if r.svc.Stop != nil {
		sctx, cancel := clock.WithTimeout(context.WithoutCancel(ctx), g.clock, drain)
		if err := r.svc.Stop(sctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: stop: %w", r.svc.Name, err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

// await waits for r's Run to return: drain first, then the service's
// grace after the hard context is cancelled. The Run error is returned unless it is the
// stop's own cancellation.
func (g *Group) await(r *running, drain time.Duration) error {
	defer r.hardStop(ErrStopping)
	t := g.clock.NewTimer(drain)
	defer t.Stop()
	select {
	case <-r.done:
		return g.runErr(r)
	case <-t.Chan():
	}
	g.log.Warn("service did not drain in time; cancelling its work", "service", r.svc.Name, "drain", drain)
	r.hardStop(fmt.Errorf("%s: drain deadline of %v passed", r.svc.Name, drain))
	grace := r.svc.Grace
	if grace <= 0 {
		grace = Grace
	}
	t.Reset(grace)
	select {
	case <-r.done:
		return g.runErr(r)
	case <-t.Chan():
		return fmt.Errorf("%s: still running %v after its work was cancelled", r.svc.Name, grace)
	}
}

// runErr is r's Run error for the stop's report: none when wait already
// returned it or when it is the stop's own cancellation.
func (g *Group) runErr(r *running) error {
	err := r.err
	if r.reported || err == nil || errors.Is(err, ErrStopping) || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("%s: %w", r.svc.Name, err)
}
