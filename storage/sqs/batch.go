package sqs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// untilFull is the linger of a batcher whose partial batch waits until it
// is full or the batcher closes (a stream with no flush age).
const untilFull time.Duration = -1

// waiter collects the results of entries handed to a batcher: either into
// errs, closing done after the last one, or by calling each per entry.
type waiter struct {
	errs []error
	left atomic.Int64
	done chan struct{}
	each func(error)
}

func (w *waiter) finish(i int, err error) {
	if w.each != nil {
		w.each(err)
		return
	}
	w.errs[i] = err
	if w.left.Add(-1) == 0 {
		close(w.done)
	}
}

type item[E any] struct {
	e E
	w *waiter
	i int
}

// batcher is the one batching engine: a collector goroutine gathers
// entries handed over by any number of callers into batches of up to size
// entries (and maxBytes, when set), and sends each with settle in a
// goroutine of its own, at most slots at once. A partial batch waits for
// more entries up to linger: 0 sends it as soon as nothing more is ready,
// untilFull until it is full or the batcher closes.
type batcher[E any] struct {
	clk      clock.Clock // times the linger
	size     int
	linger   time.Duration
	maxBytes int
	bytes    func(E) int
	settle   func(ctx context.Context, batch []E) []error

	// base is the context of every call; close cancels it when its own
	// context ends first.
	base  context.Context
	abort context.CancelCauseFunc
	in    chan []item[E]
	slots chan struct{}
	done  chan struct{}

	mu     sync.RWMutex
	closed bool
}

func newBatcher[E any](clk clock.Clock, size, concurrency int, linger time.Duration, maxBytes int, bytes func(E) int, settle func(context.Context, []E) []error) *batcher[E] {
	base, abort := context.WithCancelCause(context.Background())
	b := &batcher[E]{
		clk: clk, size: size, linger: linger, maxBytes: maxBytes, bytes: bytes, settle: settle,
		base: base, abort: abort,
		in:    make(chan []item[E], concurrency),
		slots: make(chan struct{}, concurrency),
		done:  make(chan struct{}),
	}
	go b.collect()
	return b
}

// put hands items to the collector, blocking while it is busy (every
// call slot taken): that is the backpressure on producers. It fails when
// ctx ends first or the batcher is closed; then no item was taken.
func (b *batcher[E]) put(ctx context.Context, items []item[E]) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	select {
	case b.in <- items:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// close sends what is collected and waits for every call. When ctx ends
// first, the calls still to come fail at once and those in flight are
// cancelled, with ctx's cause; close returns ctx's error once all of them
// have returned.
func (b *batcher[E]) close(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { b.abort(context.Cause(ctx)) })
	defer stop()
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.in)
	}
	b.mu.Unlock()
	<-b.done
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

func (b *batcher[E]) collect() {
	var flushes sync.WaitGroup
	defer close(b.done)
	defer flushes.Wait()
	var (
		batch []item[E]
		bytes int
		timer clock.Timer
		tc    <-chan time.Time
	)
	dispatch := func() {
		if len(batch) == 0 {
			return
		}
		if timer != nil {
			timer.Stop()
			tc = nil
		}
		work := batch
		batch, bytes = nil, 0
		b.slots <- struct{}{}
		flushes.Go(func() {
			defer func() { <-b.slots }()
			b.flush(work)
		})
	}
	add := func(it item[E]) {
		n := 0
		if b.bytes != nil {
			n = b.bytes(it.e)
		}
		if len(batch) > 0 && b.maxBytes > 0 && bytes+n > b.maxBytes {
			dispatch()
		}
		batch = append(batch, it)
		bytes += n
		switch {
		case len(batch) == b.size:
			dispatch()
		case len(batch) == 1 && b.linger > 0:
			timer = b.clk.NewTimer(b.linger)
			tc = timer.Chan()
		}
	}
	for {
		if len(batch) > 0 && b.linger == 0 {
			select {
			case g, ok := <-b.in:
				if !ok {
					dispatch()
					return
				}
				for _, it := range g {
					add(it)
				}
			default:
				dispatch()
			}
			continue
		}
		select {
		case g, ok := <-b.in:
			if !ok {
				dispatch()
				return
			}
			for _, it := range g {
				add(it)
			}
		case <-tc:
			tc = nil
			dispatch()
		}
	}
}

func (b *batcher[E]) flush(work []item[E]) {
	entries := make([]E, len(work))
	for i, it := range work {
		entries[i] = it.e
	}
	errs := b.settle(b.base, entries)
	for i, it := range work {
		it.w.finish(it.i, errs[i])
	}
}

// runAll hands entries to b as one group and waits for their results. It
// returns nil when every entry succeeded and a *pipeline.BatchError
// otherwise; when ctx ends first it returns ctx's cause, and the entries
// already handed over are still sent.
func runAll[E any](ctx context.Context, b *batcher[E], entries []E) error {
	if len(entries) == 0 {
		return nil
	}
	w := &waiter{errs: make([]error, len(entries)), done: make(chan struct{})}
	w.left.Store(int64(len(entries)))
	items := make([]item[E], len(entries))
	for i, e := range entries {
		items[i] = item[E]{e: e, w: w, i: i}
	}
	if err := b.put(ctx, items); err != nil {
		return err
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return batchError(w.errs)
}

// batchError is nil when every entry succeeded and a *pipeline.BatchError
// otherwise.
func batchError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return &pipeline.BatchError{Errs: errs}
		}
	}
	return nil
}
