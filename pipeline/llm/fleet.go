package llm

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/capacity"
)

// FleetConfig shares the pools' limits across every replica of the
// worker: the primary's calls in flight through a lease semaphore, the
// fallback's requests and tokens per minute through GCRA budgets. When the
// store fails, each pod falls back to its static share (the limits divided
// by Replicas) in process until the store answers again.
type FleetConfig struct {
	// Leases, when set with PrimaryLimit, bounds the primary's calls in
	// flight fleet-wide.
	Leases pipeline.LeaseSemaphore
	// Budget, when set with FallbackRPM or FallbackTPM, bounds the
	// fallback's requests and tokens per minute fleet-wide.
	Budget pipeline.RateBudget
	// Name names the shared semaphore and budgets: every pod calling the
	// same pools must use the same name. Empty means "chatguard". A
	// trailing colon is dropped, so a Redis key prefix as an operator
	// writes it ("chatguard:fleet:") names the same keys as without it.
	Name string
	// PrimaryLimit is L, the primary's calls in flight fleet-wide; 0 means
	// no fleet-wide limit.
	PrimaryLimit int
	// PrimaryReserved is R: batch calls may hold L − R leases, interactive
	// calls L, so R leases are kept for moderators across the fleet.
	PrimaryReserved int
	// PrimaryReservedRealtime is Rr: of L − R, the leases only realtime
	// (and interactive) calls may take; batch calls hold at most L − R −
	// Rr. 0, today's split: realtime shares batch's leases.
	PrimaryReservedRealtime int
	// PrimaryShadowIdle is the percentage of L that must stay free for a
	// shadow call to take a lease: shadow holds at most L − R − Rr −
	// ceil(L × this / 100) leases (at least one, so it still runs on an
	// idle fleet), so mirrored evaluation traffic only ever fills idle
	// capacity. 0 means DefaultShadowIdle.
	PrimaryShadowIdle int
	// LeaseTTL is how long a lease outlives a pod that stops renewing it;
	// Run renews held leases every third of it. 0 means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// LeaseWait bounds a batch caller's wait for a lease when the router
	// gives it no gate wait of its own (no fallback); it then asks again.
	// 0 means DefaultLeaseWait.
	LeaseWait time.Duration
	// FallbackRPM and FallbackTPM are the managed API's per-minute limits
	// for the whole fleet; 0 leaves one unlimited.
	FallbackRPM, FallbackTPM int
	// FallbackReservedInteractive and FallbackReservedRealtime are the
	// percentages of each fallback budget's burst reserved for interactive
	// calls, and for realtime (and interactive) calls: a realtime take
	// must leave the first, a batch take both (pipeline.Rate.Keep). A
	// higher class is thereby also served first from every refill. 0 and
	// 0, today's behaviour: every class spends the whole budget.
	FallbackReservedInteractive, FallbackReservedRealtime int
	// FallbackShadowIdle is the percentage of each fallback budget's
	// burst a shadow take must leave on top of the reserves: shadow spends
	// the managed API only while it is that idle. 0 means
	// DefaultShadowIdle.
	FallbackShadowIdle int
	// BudgetBurst is the burst the budgets allow, as the time that earns
	// it. 0 means DefaultBudgetBurst.
	BudgetBurst time.Duration
	// Replicas is how many pods share the limits when the store is down:
	// each then takes limit/Replicas (at least 1). 0 means 1.
	Replicas int
	// Timeout bounds one store call. 0 means DefaultFleetTimeout.
	Timeout time.Duration
	// Retry is how long a pod stays on its static share after a store
	// error before it asks the store again. 0 means DefaultFleetRetry.
	Retry time.Duration
}

// The fleet defaults.
const (
	DefaultLeaseTTL     = 15 * time.Second
	DefaultLeaseWait    = time.Second
	DefaultBudgetBurst  = time.Second
	DefaultFleetTimeout = 100 * time.Millisecond
	DefaultFleetRetry   = time.Second
	// DefaultShadowIdle is the percentage of a limit a shadow call leaves
	// free, on the primary's leases and the fallback's budgets alike.
	DefaultShadowIdle = 25
)

// failuresToDegrade consecutive store errors put a pod on its static
// share: one slow answer on a busy node is not an outage, and switching
// back and forth spends both the shared and the local budget.
const failuresToDegrade = 3

// leasePoll is how often a batch caller asks the store again for a lease
// while the fleet is full: a lease freed elsewhere is idle about half this.
const leasePoll = 2 * time.Millisecond

func (f FleetConfig) enabled() bool {
	return (f.Leases != nil && f.PrimaryLimit > 0) || (f.Budget != nil && (f.FallbackRPM > 0 || f.FallbackTPM > 0))
}

// Limited reports whether any limit is set, so whether the router needs
// a Leases and Budget store: a binary asks before it dials one.
func (f FleetConfig) Limited() bool {
	return f.PrimaryLimit > 0 || f.FallbackRPM > 0 || f.FallbackTPM > 0
}

func (f FleetConfig) withDefaults() FleetConfig {
	f.Name = strings.TrimSuffix(f.Name, ":")
	if f.Name == "" {
		f.Name = "chatguard"
	}
	if f.LeaseTTL == 0 {
		f.LeaseTTL = DefaultLeaseTTL
	}
	if f.LeaseWait == 0 {
		f.LeaseWait = DefaultLeaseWait
	}
	if f.BudgetBurst == 0 {
		f.BudgetBurst = DefaultBudgetBurst
	}
	if f.Replicas == 0 {
		f.Replicas = 1
	}
	if f.Timeout == 0 {
		f.Timeout = DefaultFleetTimeout
	}
	if f.Retry == 0 {
		f.Retry = DefaultFleetRetry
	}
	if f.PrimaryShadowIdle == 0 {
		f.PrimaryShadowIdle = DefaultShadowIdle
	}
	if f.FallbackShadowIdle == 0 {
		f.FallbackShadowIdle = DefaultShadowIdle
	}
	return f
}

func (f FleetConfig) validate() error {
	var errs []error
	if f.PrimaryLimit < 0 || f.PrimaryReserved < 0 || f.PrimaryReservedRealtime < 0 ||
		(f.PrimaryLimit > 0 && f.PrimaryReserved+f.PrimaryReservedRealtime >= f.PrimaryLimit) {
		errs = append(errs, fmt.Errorf("llm: fleet primary limit %d / reserved %d / reserved realtime %d: want 0 <= reserved + reserved realtime < limit",
			f.PrimaryLimit, f.PrimaryReserved, f.PrimaryReservedRealtime))
	}
	if f.FallbackRPM < 0 || f.FallbackTPM < 0 {
		errs = append(errs, errors.New("llm: fleet fallback rpm and tpm must not be negative"))
	}
	if f.FallbackReservedInteractive < 0 || f.FallbackReservedRealtime < 0 || f.FallbackReservedInteractive+f.FallbackReservedRealtime >= 100 {
		errs = append(errs, fmt.Errorf("llm: fleet fallback reserved interactive %d%% / realtime %d%%: want 0 <= each, sum < 100",
			f.FallbackReservedInteractive, f.FallbackReservedRealtime))
	}
	if f.PrimaryShadowIdle < 1 || f.PrimaryShadowIdle > 100 || f.FallbackShadowIdle < 1 || f.FallbackShadowIdle > 100 {
		errs = append(errs, fmt.Errorf("llm: fleet shadow idle %d%% (primary) / %d%% (fallback): want 1..100", f.PrimaryShadowIdle, f.FallbackShadowIdle))
	}
	if f.LeaseTTL < 10*time.Millisecond || f.LeaseWait < 0 || f.BudgetBurst <= 0 || f.Replicas < 1 || f.Timeout <= 0 || f.Retry <= 0 {
		errs = append(errs, errors.New("llm: fleet lease ttl (>= 10ms), lease wait, budget burst, replicas, timeout and retry must be positive"))
	}
	return errors.Join(errs...)
}

// fleet is the router's side of the shared limits.
type fleet struct {
	cfg   FleetConfig
	clk   clock.Clock     // the router's
	local *capacity.Local // the static shares while the store is down
	pod   string          // this process's lease id prefix
	seq   atomic.Uint64

	// storeDownUntil is when to ask the store again (unix ns; 0: up).
	storeDownUntil atomic.Int64
	failRun        atomic.Int32 // consecutive store errors
	// poll holds, per class, the one caller of the process that polls a
	// full fleet: per class, so a batch poller never delays a realtime one.
	poll       [classCount]chan struct{}
	budgetTurn chan struct{} // one fallback call per process asks the budget at a time
	// budgetUntil is, per class, until when (unix ns) the fallback's budget
	// refuses that class: a class refused at its reserve line waits, while
	// the classes above it still spend the reserve.
	budgetUntil [classCount]atomic.Int64

	mu   sync.Mutex
	held map[string]bool // lease id -> taken from the local share
	// waiters are, per class, the calls of this process waiting for a
	// lease, oldest first, each with room for one: a finished call hands
	// its lease to the first waiter its limit allows (handOnOrder) instead
	// of giving it back to the store.
	waiters [classCount][]chan fleetLease

	fleetHeld       atomic.Int64 // leases held fleet-wide at the last answer
	remainRequests  atomic.Int64
	remainTokens    atomic.Int64
	storeSeconds    *prometheus.HistogramVec
	budgetDenied    *prometheus.CounterVec
	storeErrors     prometheus.Counter
	leaseLost       prometheus.Counter
	leaseNamePrefix string
}

func newFleet(cfg FleetConfig, clk clock.Clock) *fleet {
	var b [6]byte
	_, _ = crand.Read(b[:])
	f := &fleet{
		cfg: cfg, clk: clk, local: capacity.NewLocal(clk), pod: hex.EncodeToString(b[:]),
		budgetTurn: make(chan struct{}, 1), held: make(map[string]bool),
		storeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatguard_llm_fleet_store_seconds",
			Help:    "Duration of one call to the fleet-limit store (Redis) by operation (acquire, release, renew, take).",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1},
		}, []string{"op"}),
		budgetDenied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatguard_llm_fleet_budget_denied_total", Help: "Fallback calls held back because the fleet's per-minute budget was spent, by unit (requests, tokens).",
		}, []string{"unit"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_llm_fleet_store_errors_total", Help: "Failed calls to the fleet-limit store; each puts this pod on its static share for a while.",
		}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chatguard_llm_fleet_leases_lost_total", Help: "Primary leases that expired before this pod renewed them.",
		}),
		leaseNamePrefix: cfg.Name + ":primary",
	}
	for i := range f.poll {
		f.poll[i] = make(chan struct{}, 1)
	}
	f.remainRequests.Store(-1)
	f.remainTokens.Store(-1)
	return f
}

// attachFleet sets up the shared limits when configured.
func (r *Router) attachFleet() {
	if !r.cfg.Fleet.enabled() {
		return
	}
	r.fleet = newFleet(r.cfg.Fleet, r.clk)
	if r.cfg.Fleet.Leases != nil && r.cfg.Fleet.PrimaryLimit > 0 {
		r.primary.leases = r.fleet
	}
}

// degraded reports whether the pod is on its static share now.
func (f *fleet) degraded() bool { return f.clk.Now().UnixNano() < f.storeDownUntil.Load() }

// storeFailed counts a store error, unless the caller's own context ended
// (that says nothing about the store), and after failuresToDegrade in a row
// puts the pod on its static share for Retry.
func (f *fleet) storeFailed(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	f.storeErrors.Inc()
	if f.failRun.Add(1) >= failuresToDegrade {
		f.failRun.Store(0)
		f.storeDownUntil.Store(f.clk.Now().Add(f.cfg.Retry).UnixNano())
	}
}

// storeOK ends a run of store errors.
func (f *fleet) storeOK() { f.failRun.Store(0) }

// share is a limit's static share per pod.
func (f *fleet) share(limit int) int { return max(1, limit/f.cfg.Replicas) }

// observe records one store call's duration.
func (f *fleet) observe(op string, start time.Time) {
	f.storeSeconds.WithLabelValues(op).Observe(f.clk.Since(start).Seconds())
}

// fleetLease is a held primary lease; the zero value holds nothing.
type fleetLease struct {
	f     *fleet
	id    string
	local bool
	// class is the class whose limit the lease was taken under: a waiting
	// call inherits it only when its own limit is at least that one.
	class pipeline.Class
	hops  int // how many times it was handed on in process
}

// maxHandoffs bounds how often a lease passes from a finished call to a
// waiting one in the same process before it goes back to the store: each
// hand-off saves the store two calls and the lease an idle gap, but a pod
// that kept its leases for ever would starve pods that KEDA adds.
const maxHandoffs = 4

// leaseLimit is the semaphore limit for class: L for interactive, L − R
// for realtime, L − R − Rr for batch and L − R − Rr − idle for shadow (at
// least one lease each).
func (f *fleet) leaseLimit(class pipeline.Class, local bool) int {
	l, r, rr := f.cfg.PrimaryLimit, f.cfg.PrimaryReserved, f.cfg.PrimaryReservedRealtime
	if local {
		l, r, rr = f.share(l), r/f.cfg.Replicas, rr/f.cfg.Replicas
	}
	switch class {
	case pipeline.ClassInteractive:
		return l
	case pipeline.ClassRealtime:
		return max(l-r, 1)
	case pipeline.ClassShadow:
		return max(l-r-rr-percentOf(l, f.cfg.PrimaryShadowIdle), 1)
	}
	return max(l-r-rr, 1)
}

// percentOf is pct % of n, rounded up: a reserve never rounds to nothing.
func percentOf(n, pct int) int { return (n*pct + 99) / 100 }

// classCount sizes the per-class arrays, indexed by pipeline.Class.
const classCount = 4

// handOnOrder is who inherits a finished call's lease in process: realtime
// waiters before batch ones. Interactive calls never wait, and shadow
// calls never inherit: a lease handed on skips the idle check shadow's
// limit makes at the store.
var handOnOrder = []pipeline.Class{pipeline.ClassRealtime, pipeline.ClassBatch}

// inherits reports whether a waiting call of class w may take over a
// lease taken under class c's limit without passing its own.
func (f *fleet) inherits(w, c pipeline.Class) bool {
	return c != pipeline.ClassInteractive && f.leaseLimit(w, false) >= f.leaseLimit(c, false)
}

// tryLease makes one acquire on the store, or on the static share while
// the store is down.
func (f *fleet) tryLease(ctx context.Context, class pipeline.Class) (fleetLease, bool, error) {
	id := f.pod + "-" + strconv.FormatUint(f.seq.Add(1), 36)
	if !f.degraded() {
		c, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
		start := f.clk.Now()
		ok, held, err := f.cfg.Leases.Acquire(c, f.leaseNamePrefix, id, f.leaseLimit(class, false), f.cfg.LeaseTTL)
		cancel()
		f.observe("acquire", start)
		if err == nil {
			f.storeOK()
			f.fleetHeld.Store(int64(held))
			if ok {
				f.hold(id, false)
			}
			return fleetLease{f: f, id: id, class: class}, ok, nil
		}
		if ctx.Err() != nil {
			return fleetLease{}, false, ctx.Err()
		}
		f.storeFailed(ctx)
		if !f.degraded() && waits(class) {
			return fleetLease{}, false, nil // a blip: a batch caller asks again
		}
	}
	ok, _, err := f.local.Acquire(ctx, f.leaseNamePrefix, id, f.leaseLimit(class, true), f.cfg.LeaseTTL)
	if ok {
		f.hold(id, true)
	}
	return fleetLease{f: f, id: id, local: true, class: class}, ok, err
}

func (f *fleet) hold(id string, local bool) {
	f.mu.Lock()
	f.held[id] = local
	f.mu.Unlock()
}

// acquireLease takes a primary lease. An interactive caller asks once; any
// other waits up to wait (LeaseWait when wait is 0), one caller per class
// and process polling the store at a time so that a full fleet costs the
// store one call per leasePoll per class and pod, not one per waiting job.
func (f *fleet) acquireLease(ctx context.Context, class pipeline.Class, wait time.Duration) (fleetLease, bool) {
	l, ok, err := f.tryLease(ctx, class)
	if ok || err != nil || !waits(class) {
		return l, ok
	}
	if wait <= 0 {
		wait = f.cfg.LeaseWait
	}
	var handoff chan fleetLease // nil, never ready, for a class that does not inherit
	if slices.Contains(handOnOrder, class) {
		handoff = f.wait(class)
		defer f.unwait(class, handoff)
	}
	t := f.clk.NewTimer(wait)
	defer t.Stop()
	poll := f.poll[class]
	select {
	case l := <-handoff:
		return l, true
	case poll <- struct{}{}:
		defer func() { <-poll }()
	case <-t.Chan():
		return fleetLease{}, false
	case <-ctx.Done():
		return fleetLease{}, false
	}
	tick := f.clk.NewTimer(0)
	defer tick.Stop()
	for {
		select {
		case l := <-handoff:
			return l, true
		case <-t.Chan():
			return fleetLease{}, false
		case <-ctx.Done():
			return fleetLease{}, false
		case <-tick.Chan():
		}
		if l, ok, err := f.tryLease(ctx, class); ok || err != nil {
			return l, ok
		}
		tick.Reset(leasePoll/2 + rand.N(leasePoll))
	}
}

// wait registers a call of class waiting for a lease and returns the
// channel a finished call hands its lease over on.
func (f *fleet) wait(class pipeline.Class) chan fleetLease {
	w := make(chan fleetLease, 1)
	f.mu.Lock()
	f.waiters[class] = append(f.waiters[class], w)
	f.mu.Unlock()
	return w
}

// unwait ends a wait. A lease handed over after the caller stopped waiting
// (it took one from the store, timed out or was cancelled) is released
// onward, so that none is lost: a release sends to w while holding f.mu,
// and w is no longer listed once unwait has held it.
func (f *fleet) unwait(class pipeline.Class, w chan fleetLease) {
	f.mu.Lock()
	f.waiters[class] = slices.DeleteFunc(f.waiters[class], func(c chan fleetLease) bool { return c == w })
	f.mu.Unlock()
	select {
	case l := <-w:
		l.release()
	default:
	}
}

// waiting is how many calls wait for a lease in this process.
func (f *fleet) waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ws := range f.waiters {
		n += len(ws)
	}
	return n
}

// handOn gives l to the first waiter handOnOrder and l's limit allow,
// reporting whether one took it. The caller holds f.mu.
func (f *fleet) handOn(l fleetLease) bool {
	if l.hops >= maxHandoffs {
		return false
	}
	for _, c := range handOnOrder {
		if len(f.waiters[c]) == 0 || !f.inherits(c, l.class) {
			continue
		}
		w := f.waiters[c][0]
		f.waiters[c] = f.waiters[c][1:]
		l.hops++
		w <- l // room for one, and only this release sends to w
		return true
	}
	return false
}

// release gives the lease back, bounded by the store timeout even when the
// call that held it was cancelled: a lease left behind costs the fleet a
// slot for a whole TTL.
func (l fleetLease) release() {
	if l.f == nil {
		return
	}
	f := l.f
	f.mu.Lock()
	if f.handOn(l) {
		f.mu.Unlock()
		return // still held, now by the waiting call
	}
	delete(f.held, l.id)
	f.mu.Unlock()
	if l.local {
		_ = f.local.Release(context.Background(), f.leaseNamePrefix, l.id)
		return
	}
	// A release may take longer than an acquire: nobody waits on it but
	// the caller's next job, and a lease left behind costs a whole TTL.
	ctx, cancel := context.WithTimeout(context.Background(), 4*f.cfg.Timeout)
	defer cancel()
	start := f.clk.Now()
	if err := f.cfg.Leases.Release(ctx, f.leaseNamePrefix, l.id); err != nil {
		// It expires within a TTL; a failed release alone does not put
		// the pod on its static share (acquires decide that).
		f.storeErrors.Inc()
	}
	f.observe("release", start)
}

// renewLoop renews this process's leases every third of their TTL until
// ctx ends.
func (f *fleet) renewLoop(ctx context.Context) {
	t := f.clk.NewTicker(f.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		f.renew(ctx)
	}
}

func (f *fleet) renew(ctx context.Context) {
	var remote, local []string
	f.mu.Lock()
	for id, isLocal := range f.held {
		if isLocal {
			local = append(local, id)
		} else {
			remote = append(remote, id)
		}
	}
	f.mu.Unlock()
	if len(local) > 0 {
		_, _ = f.local.Renew(ctx, f.leaseNamePrefix, local, f.cfg.LeaseTTL)
	}
	if len(remote) == 0 {
		return
	}
	c, cancel := context.WithTimeout(ctx, max(f.cfg.Timeout, f.cfg.LeaseTTL/6))
	defer cancel()
	start := f.clk.Now()
	n, err := f.cfg.Leases.Renew(c, f.leaseNamePrefix, remote, f.cfg.LeaseTTL)
	f.observe("renew", start)
	if err != nil {
		f.storeFailed(ctx)
		return
	}
	// Leases released while the renewal ran also count as missing here;
	// only a shortfall beyond the releases is a loss worth counting.
	f.mu.Lock()
	still := 0
	for _, id := range remote {
		if _, ok := f.held[id]; ok {
			still++
		}
	}
	f.mu.Unlock()
	if lost := still - n; lost > 0 {
		f.leaseLost.Add(float64(lost))
	}
}

// leasesHeld is how many primary leases this process holds.
func (f *fleet) leasesHeld() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.held)
}

// estimateTokens is a request's charge against a tokens-per-minute budget,
// counted as managed APIs count it before the call: the prompt (a token per
// three bytes, on the safe side for Hangul and English alike) and the
// answer's max_tokens.
func estimateTokens(req *Request, msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += 4 + len(m.Text)/3 + 85*len(m.ImageURLs)
	}
	return n + req.MaxTokens
}

// keepPercent is the share of each fallback budget's burst a take of
// class must leave: nothing for interactive, the interactive reserve for
// realtime, both reserves for batch, and both plus the idle share for
// shadow.
func (f *fleet) keepPercent(class pipeline.Class) int {
	ri, rr := f.cfg.FallbackReservedInteractive, f.cfg.FallbackReservedRealtime
	switch class {
	case pipeline.ClassInteractive:
		return 0
	case pipeline.ClassRealtime:
		return ri
	case pipeline.ClassShadow:
		return min(ri+rr+f.cfg.FallbackShadowIdle, 100)
	}
	return ri + rr
}

// classRate is a budget's rate for a take of n units by a class that must
// leave keep % of the burst. n is charged at most what can ever pass (the
// burst less the reserve), and the reserve is at most burst − 1, so that
// every class's call can pass on an idle budget.
func classRate(rate pipeline.Rate, keep, n int) (pipeline.Rate, int) {
	if keep > 0 {
		rate.Keep = min(percentOf(rate.Burst, keep), rate.Burst-1)
	}
	return rate, max(1, min(n, rate.Burst-rate.Keep))
}

// takeBudget charges one fallback call of class against the fleet's
// per-minute budgets. It reports false with how long until the budget
// allows it.
func (f *fleet) takeBudget(ctx context.Context, class pipeline.Class, tokens int) (bool, time.Duration) {
	type unit struct {
		name   string
		perMin int
		n      int
		remain *atomic.Int64
	}
	units := []unit{
		{"requests", f.cfg.FallbackRPM, 1, &f.remainRequests},
		{"tokens", f.cfg.FallbackTPM, tokens, &f.remainTokens},
	}
	for _, u := range units {
		if u.perMin <= 0 {
			continue
		}
		rate, n := classRate(pipeline.Rate{PerMinute: u.perMin, Burst: max(1, int(float64(u.perMin)*f.cfg.BudgetBurst.Seconds()/60))}, f.keepPercent(class), u.n)
		name := f.cfg.Name + ":fallback:" + u.name
		var res pipeline.RateResult
		var err error
		if !f.degraded() {
			c, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
			start := f.clk.Now()
			res, err = f.cfg.Budget.Take(c, name, rate, n)
			cancel()
			f.observe("take", start)
			if err != nil {
				f.storeFailed(ctx)
				if !f.degraded() {
					// A blip: hold the call back briefly rather than spend
					// a local budget the store does not know about.
					return false, 50 * time.Millisecond
				}
			} else {
				f.storeOK()
			}
		}
		if err != nil || f.degraded() {
			if ctx.Err() != nil {
				return false, 0
			}
			local, ln := classRate(pipeline.Rate{PerMinute: f.share(rate.PerMinute), Burst: f.share(rate.Burst)}, f.keepPercent(class), u.n)
			res, _ = f.local.Take(ctx, name, local, ln)
		}
		u.remain.Store(int64(res.Remaining))
		if !res.Allowed {
			f.budgetDenied.WithLabelValues(u.name).Inc()
			return false, max(res.RetryAfter, time.Millisecond)
		}
	}
	return true, 0
}

// fleetAdmit charges a fallback call against the fleet's budgets before it
// is made. When the budget is spent it puts the fallback in cooldown until
// the budget allows a call (every local caller then waits or goes
// elsewhere, as after a 429) and reports false; the caller gives the lease
// back and chooses again, without spending an attempt. A call refused at
// its class's reserve line blocks the fallback for its class and those
// below it only (budgetBlocked), so the classes above still reach it.
func (r *Router) fleetAdmit(ctx context.Context, l lease, req *Request, msgs []Message) bool {
	f := r.fleet
	if f == nil || l.p != r.fallback || f.cfg.Budget == nil || (f.cfg.FallbackRPM <= 0 && f.cfg.FallbackTPM <= 0) {
		return true
	}
	// One caller at a time: when the budget is spent, every caller of the
	// process would otherwise ask the store again the moment the cooldown
	// ends, and all but one be refused.
	select {
	case f.budgetTurn <- struct{}{}:
		defer func() { <-f.budgetTurn }()
	case <-ctx.Done():
		return false
	}
	if l.p.cooldown.active(r.now()) || f.budgetBlocked(req.Class, r.now()) {
		return false // refused to another caller while this one waited its turn
	}
	ok, wait := f.takeBudget(ctx, req.Class, estimateTokens(req, msgs))
	if ok {
		return true
	}
	if f.keepPercent(req.Class) == 0 {
		l.p.cooldown.extend(r.now().Add(wait))
		return false
	}
	until := r.now().Add(wait).UnixNano()
	for _, c := range pipeline.Classes {
		if f.keepPercent(c) >= f.keepPercent(req.Class) {
			extendTo(&f.budgetUntil[c], until)
		}
	}
	return false
}

// extendTo moves v forward to t unless it is already later.
func extendTo(v *atomic.Int64, t int64) {
	for {
		cur := v.Load()
		if cur >= t || v.CompareAndSwap(cur, t) {
			return
		}
	}
}

// budgetBlocked reports whether the fallback's budget still refuses class
// at now.
func (f *fleet) budgetBlocked(class pipeline.Class, now time.Time) bool {
	return f.budgetUntil[class].Load() > now.UnixNano()
}

// fallbackUnavailable is the fallback pool's unavailable, with the fleet
// budget's refusal of class counted as a cooldown.
func (r *Router) fallbackUnavailable(now time.Time, class pipeline.Class) (string, time.Time) {
	why, until := r.fallback.unavailable(now)
	if why == "" && r.fleet != nil && r.fleet.budgetBlocked(class, now) {
		return reasonCooldown, time.Unix(0, r.fleet.budgetUntil[class].Load())
	}
	return why, until
}

// takeFleetLease takes a primary lease for a call on p when the fleet
// bounds p; every other pool and an unbounded primary get the zero lease.
func (p *pool) takeFleetLease(ctx context.Context, class pipeline.Class, wait time.Duration) (fleetLease, bool) {
	if p.leases == nil {
		return fleetLease{}, true
	}
	return p.leases.acquireLease(ctx, class, wait)
}

// collectors are the fleet's metrics.
func (f *fleet) collectors() []prometheus.Collector {
	prim := prometheus.Labels{"pool": string(pipeline.PoolPrimary)}
	const remainHelp = "The fallback's fleet budget left at once at this pod's last take (-1: not taken yet)."
	return []prometheus.Collector{
		f.storeSeconds, f.budgetDenied, f.storeErrors, f.leaseLost,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chatguard_llm_fleet_degraded", Help: "1 while the fleet-limit store is unreachable and this pod runs on its static share.",
		}, func() float64 {
			if f.degraded() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chatguard_llm_fleet_limit", Help: "The primary's calls in flight allowed fleet-wide (L).", ConstLabels: prim,
		}, func() float64 { return float64(f.cfg.PrimaryLimit) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chatguard_llm_fleet_leases_held", Help: "Primary leases held fleet-wide at this pod's last store answer.", ConstLabels: prim,
		}, func() float64 { return float64(f.fleetHeld.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chatguard_llm_fleet_leases_local", Help: "Primary leases held by this process.", ConstLabels: prim,
		}, func() float64 { return float64(f.leasesHeld()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chatguard_llm_fleet_budget_remaining", Help: remainHelp,
			ConstLabels: prometheus.Labels{"pool": string(pipeline.PoolFallback), "unit": "requests"},
		}, func() float64 { return float64(f.remainRequests.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chatguard_llm_fleet_budget_remaining", Help: remainHelp,
			ConstLabels: prometheus.Labels{"pool": string(pipeline.PoolFallback), "unit": "tokens"},
		}, func() float64 { return float64(f.remainTokens.Load()) }),
	}
}
