// Package accounthistory gives a review the account history of its room's
// participants (earlier verdicts about them, pipeline.AccountHistory) at a
// bounded cost: at most one query per review, answered from a per-process
// cache while an answer is younger than its TTL, and given up after a
// timeout, when the review goes on without history (counted).
package accounthistory

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// Defaults (DefaultConfig).
const (
	DefaultWindow     = 30 * 24 * time.Hour
	DefaultTTL        = 5 * time.Minute
	DefaultTimeout    = 200 * time.Millisecond
	DefaultMaxEntries = 20000
	// maxWindow bounds the lookback: verdict_subjects is indexed by time,
	// but a year of history is no longer about the account as it is now.
	maxWindow = 366 * 24 * time.Hour
	maxTTL    = time.Hour
)

// Config bounds the lookup.
type Config struct {
	// Window is how far back the history reaches; zero turns the account
	// history off (no query, no block in the prompt).
	Window time.Duration
	// TTL is how long an answer is reused for the same room and
	// participants; zero asks every time.
	TTL time.Duration
	// Timeout bounds the query; past it the review goes on without
	// history.
	Timeout time.Duration
	// MaxEntries bounds the cache; the least recently used answer goes
	// first.
	MaxEntries int
}

// DefaultConfig returns the defaults: 30 days, answers reused for five
// minutes, a 200 ms timeout.
func DefaultConfig() Config {
	return Config{Window: DefaultWindow, TTL: DefaultTTL, Timeout: DefaultTimeout, MaxEntries: DefaultMaxEntries}
}

// Enabled reports whether reviews look up account history.
func (c Config) Enabled() bool { return c.Window > 0 }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Window < 0 || c.Window > maxWindow {
		errs = append(errs, fmt.Errorf("account history window %s is outside 0 (off)..%s", c.Window, maxWindow))
	}
	if c.Window > 0 && c.Window < time.Hour {
		errs = append(errs, fmt.Errorf("account history window %s is below an hour", c.Window))
	}
	if c.TTL < 0 || c.TTL > maxTTL {
		errs = append(errs, fmt.Errorf("account history ttl %s is outside 0..%s", c.TTL, maxTTL))
	}
	if c.Timeout <= 0 || c.Timeout > 10*time.Second {
		errs = append(errs, fmt.Errorf("account history timeout %s is outside (0, 10s]", c.Timeout))
	}
	if c.MaxEntries < 1 || c.MaxEntries > 1_000_000 {
		errs = append(errs, fmt.Errorf("account history cache size %d is outside 1..1000000", c.MaxEntries))
	}
	return errors.Join(errs...)
}

// Lookup is the account-history lookup of one process, shared by every
// review. It is safe for concurrent use.
type Lookup struct {
	cfg   Config
	src   pipeline.AccountHistory
	clock clock.Clock
	m     *metrics

	mu    sync.Mutex
	items map[string]*list.Element
	order list.List // front = most recently used; values are *entry
}

type entry struct {
	key     string
	lines   []pipeline.HistoryCount
	expires time.Time
}

// New builds a lookup over src on c (nil: the wall clock); reg may be nil.
// It fails on a config Validate refuses, on a nil src, or when the metrics
// cannot be registered.
func New(cfg Config, src pipeline.AccountHistory, c clock.Clock, reg prometheus.Registerer) (*Lookup, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, errors.New("account history: no source")
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Lookup{cfg: cfg, src: src, clock: clock.Or(c), m: m, items: map[string]*list.Element{}}, nil
}

// Lookup returns the account history of a room's participants: from the
// cache, or from one query bounded by the timeout. It never fails: a query
// that times out or fails (ctx's own end included) gives a HistorySeen
// with that status and no lines, and the review goes on without them.
// Participants beyond pipeline.MaxHistoryAccounts (those with the fewest
// messages) are left out and counted.
func (l *Lookup) Lookup(ctx context.Context, room string, accounts []pipeline.HistoryAccount) pipeline.HistorySeen {
	seen := pipeline.HistorySeen{Status: pipeline.HistoryOK, Days: int(l.cfg.Window / (24 * time.Hour)), Lines: []pipeline.HistoryCount{}}
	if len(accounts) > pipeline.MaxHistoryAccounts {
		seen.AccountsLeftOut = len(accounts) - pipeline.MaxHistoryAccounts
		accounts = accounts[:pipeline.MaxHistoryAccounts]
	}
	if len(accounts) == 0 {
		l.m.lookups.WithLabelValues("none").Inc()
		return seen
	}
	key := cacheKey(room, accounts)
	now := l.clock.Now()
	if lines, ok := l.get(key, now); ok {
		l.m.lookups.WithLabelValues("hit").Inc()
		seen.Lines = lines
		return seen
	}
	qctx, cancel := clock.WithTimeout(ctx, l.clock, l.cfg.Timeout)
	defer cancel()
	lines, err := l.src.AccountHistory(qctx, pipeline.HistoryQuery{Accounts: accounts, ExcludeRoom: room, Since: now.Add(-l.cfg.Window)})
	l.m.seconds.Observe(l.clock.Since(now).Seconds())
	switch {
	case err != nil && ctx.Err() == nil && qctx.Err() != nil:
		l.m.lookups.WithLabelValues("timeout").Inc()
		seen.Status = pipeline.HistoryTimeout
		return seen
	case err != nil:
		l.m.lookups.WithLabelValues("error").Inc()
		seen.Status = pipeline.HistoryError
		return seen
	}
	l.m.lookups.WithLabelValues("miss").Inc()
	lines = slices.Clone(lines[:min(len(lines), pipeline.MaxHistoryLines)])
	if lines == nil {
		lines = []pipeline.HistoryCount{}
	}
	l.put(key, lines, now)
	seen.Lines = slices.Clone(lines)
	return seen
}

// cacheKey names a room and its participants (in any order).
func cacheKey(room string, accounts []pipeline.HistoryAccount) string {
	as := slices.Clone(accounts)
	slices.SortFunc(as, func(a, b pipeline.HistoryAccount) int {
		return cmp.Or(cmp.Compare(a.SenderID, b.SenderID), cmp.Compare(a.Role, b.Role))
	})
	var b strings.Builder
	b.WriteString(room)
	for _, a := range as {
		b.WriteByte(0)
		b.WriteString(string(a.Role))
		b.WriteByte(1)
		b.WriteString(a.SenderID)
	}
	return b.String()
}

func (l *Lookup) get(key string, now time.Time) ([]pipeline.HistoryCount, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.items[key]
	if !ok {
		return nil, false
	}
	e := el.Value.(*entry)
	if !now.Before(e.expires) {
		l.order.Remove(el)
		delete(l.items, key)
		return nil, false
	}
	l.order.MoveToFront(el)
	return slices.Clone(e.lines), true
}

func (l *Lookup) put(key string, lines []pipeline.HistoryCount, now time.Time) {
	if l.cfg.TTL <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.items[key]; ok {
		e := el.Value.(*entry)
		e.lines, e.expires = lines, now.Add(l.cfg.TTL)
		l.order.MoveToFront(el)
		return
	}
	l.items[key] = l.order.PushFront(&entry{key: key, lines: lines, expires: now.Add(l.cfg.TTL)})
	for l.order.Len() > l.cfg.MaxEntries {
		last := l.order.Back()
		l.order.Remove(last)
		delete(l.items, last.Value.(*entry).key)
		l.m.evictions.Inc()
	}
	l.m.entries.Set(float64(l.order.Len()))
}
