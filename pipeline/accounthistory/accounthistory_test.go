package accounthistory_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/accounthistory"
	"github.com/chatguard/chatguard/storage/storetest"
)

var t0 = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

// counting is an AccountHistory that counts its queries and can fail or
// hang until its context ends.
type counting struct {
	inner   pipeline.AccountHistory
	queries atomic.Int32
	fail    error
	hang    bool
	last    atomic.Pointer[pipeline.HistoryQuery]
}

func (c *counting) AccountHistory(ctx context.Context, q pipeline.HistoryQuery) ([]pipeline.HistoryCount, error) {
	c.queries.Add(1)
	c.last.Store(&q)
	if c.hang {
		<-ctx.Done()
		return nil, fmt.Errorf("hung: %w", ctx.Err())
	}
	if c.fail != nil {
		return nil, c.fail
	}
	return c.inner.AccountHistory(ctx, q)
}

func seller(id string) pipeline.HistoryAccount {
	return pipeline.HistoryAccount{SenderID: id, Role: pipeline.RoleSeller}
}

func buyer(id string) pipeline.HistoryAccount {
	return pipeline.HistoryAccount{SenderID: id, Role: pipeline.RoleBuyer}
}

func newLookup(t *testing.T, cfg accounthistory.Config, src pipeline.AccountHistory) (*accounthistory.Lookup, *clock.Fake, *prometheus.Registry) {
	t.Helper()
	clk, reg := clock.NewFake(t0), prometheus.NewRegistry()
	l, err := accounthistory.New(cfg, src, clk, reg)
	require.NoError(t, err)
	return l, clk, reg
}

func lookups(t *testing.T, reg *prometheus.Registry, outcome string) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "chatguard_review_account_history_lookups_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == outcome {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	return -1
}

// TestLookupAsksOncePerRoomWithinTheTTL: the same room and participants
// (in any order) are answered from the cache until the TTL, the query
// leaves the room out and reaches back the window, and another room asks
// again.
func TestLookupAsksOncePerRoomWithinTheTTL(t *testing.T) {
	t.Parallel()
	h := &storetest.History{}
	h.Add(storetest.HistoryRecord{Room: "r-old", Sender: "s1", Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam, DecidedAt: t0.Add(-time.Hour)})
	src := &counting{inner: h}
	l, clk, reg := newLookup(t, accounthistory.DefaultConfig(), src)
	ctx := context.Background()
	want := []pipeline.HistoryCount{{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam, Rooms: 1}}

	got := l.Lookup(ctx, "r-now", []pipeline.HistoryAccount{seller("s1"), buyer("b1")})
	require.Equal(t, pipeline.HistorySeen{Status: pipeline.HistoryOK, Days: 30, Lines: want}, got)
	q := src.last.Load()
	require.Equal(t, "r-now", q.ExcludeRoom)
	require.Equal(t, t0.Add(-30*24*time.Hour), q.Since)

	got.Lines[0].Rooms = 99 // a caller's change must not reach the cache
	again := l.Lookup(ctx, "r-now", []pipeline.HistoryAccount{buyer("b1"), seller("s1")})
	require.Equal(t, want, again.Lines)
	require.EqualValues(t, 1, src.queries.Load())
	require.Equal(t, 1, lookups(t, reg, "hit"))
	require.Equal(t, 1, lookups(t, reg, "miss"))

	l.Lookup(ctx, "r-other", []pipeline.HistoryAccount{seller("s1"), buyer("b1")})
	require.EqualValues(t, 2, src.queries.Load(), "another room is another question")

	clk.Advance(accounthistory.DefaultTTL)
	l.Lookup(ctx, "r-now", []pipeline.HistoryAccount{seller("s1"), buyer("b1")})
	require.EqualValues(t, 3, src.queries.Load(), "an answer as old as the TTL is asked again")
}

// TestLookupGivesUpAfterTheTimeout: a query that does not answer in time
// is given up, the review gets no history with the status timeout, and
// nothing is cached.
func TestLookupGivesUpAfterTheTimeout(t *testing.T) {
	t.Parallel()
	src := &counting{hang: true}
	l, clk, reg := newLookup(t, accounthistory.DefaultConfig(), src)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan pipeline.HistorySeen, 1)
	go func() { done <- l.Lookup(ctx, "r", []pipeline.HistoryAccount{seller("s1")}) }()
	require.NoError(t, clk.BlockUntilContext(ctx, 1), "the query's deadline timer")
	clk.Advance(accounthistory.DefaultTimeout)
	var got pipeline.HistorySeen
	select {
	case got = <-done:
	case <-ctx.Done():
		t.Fatal("the lookup did not give up")
	}
	require.Equal(t, pipeline.HistoryTimeout, got.Status)
	require.Empty(t, got.Lines)
	require.Equal(t, 1, lookups(t, reg, "timeout"))
	require.Equal(t, 1, testutil.CollectAndCount(reg, "chatguard_review_account_history_query_seconds"))
}

// TestLookupFailuresAreCountedAndAskedAgain: a failed query and a review
// cancelled during its query both give no history with the status error;
// neither is cached.
func TestLookupFailuresAreCountedAndAskedAgain(t *testing.T) {
	t.Parallel()
	src := &counting{fail: errors.New("mysql: account history: connection refused")}
	l, _, reg := newLookup(t, accounthistory.DefaultConfig(), src)
	for range 2 {
		got := l.Lookup(context.Background(), "r", []pipeline.HistoryAccount{seller("s1")})
		require.Equal(t, pipeline.HistoryError, got.Status)
		require.Empty(t, got.Lines)
	}
	require.EqualValues(t, 2, src.queries.Load())
	require.Equal(t, 2, lookups(t, reg, "error"))

	hung := &counting{hang: true}
	l, _, reg = newLookup(t, accounthistory.DefaultConfig(), hung)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, pipeline.HistoryError, l.Lookup(ctx, "r", []pipeline.HistoryAccount{seller("s1")}).Status, "the review's end is not the lookup's timeout")
	require.Equal(t, 0, lookups(t, reg, "timeout"))
}

// TestCacheIsBounded: past MaxEntries the least recently used answer is
// evicted (counted), and asked again when next wanted.
func TestCacheIsBounded(t *testing.T) {
	t.Parallel()
	src := &counting{inner: &storetest.History{}}
	cfg := accounthistory.DefaultConfig()
	cfg.MaxEntries = 2
	l, _, reg := newLookup(t, cfg, src)
	ctx := context.Background()
	for _, room := range []string{"r1", "r2", "r1", "r3"} { // r2 is the least recently used when r3 comes
		l.Lookup(ctx, room, []pipeline.HistoryAccount{seller("s1")})
	}
	require.EqualValues(t, 3, src.queries.Load())
	require.Equal(t, 1, testutil.CollectAndCount(reg, "chatguard_review_account_history_evictions_total"))
	l.Lookup(ctx, "r1", []pipeline.HistoryAccount{seller("s1")})
	require.EqualValues(t, 3, src.queries.Load(), "r1 stayed")
	l.Lookup(ctx, "r2", []pipeline.HistoryAccount{seller("s1")})
	require.EqualValues(t, 4, src.queries.Load(), "r2 was evicted")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		switch mf.GetName() {
		case "chatguard_review_account_history_evictions_total":
			require.EqualValues(t, 2, mf.GetMetric()[0].GetCounter().GetValue())
		case "chatguard_review_account_history_cache_entries":
			require.EqualValues(t, 2, mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
}

// TestLookupAsksAboutABoundedNumberOfAccounts: participants beyond
// MaxHistoryAccounts are left out of the query and counted on the answer;
// a room with no participant asks nothing.
func TestLookupAsksAboutABoundedNumberOfAccounts(t *testing.T) {
	t.Parallel()
	src := &counting{inner: &storetest.History{}}
	l, _, reg := newLookup(t, accounthistory.DefaultConfig(), src)
	var many []pipeline.HistoryAccount
	for i := range pipeline.MaxHistoryAccounts + 3 {
		many = append(many, buyer(fmt.Sprint("b", i)))
	}
	got := l.Lookup(context.Background(), "r", many)
	require.Equal(t, pipeline.HistoryOK, got.Status)
	require.Equal(t, 3, got.AccountsLeftOut)
	require.Len(t, src.last.Load().Accounts, pipeline.MaxHistoryAccounts)

	none := l.Lookup(context.Background(), "r", nil)
	require.Equal(t, pipeline.HistoryOK, none.Status)
	require.EqualValues(t, 1, src.queries.Load())
	require.Equal(t, 1, lookups(t, reg, "none"))
}

func TestConfigValidateNamesEveryProblem(t *testing.T) {
	t.Parallel()
	require.NoError(t, accounthistory.DefaultConfig().Validate())
	off := accounthistory.DefaultConfig()
	off.Window = 0
	require.NoError(t, off.Validate())
	require.False(t, off.Enabled())
	err := accounthistory.Config{Window: time.Minute, TTL: -1, Timeout: 0, MaxEntries: 0}.Validate()
	for _, want := range []string{"window", "ttl", "timeout", "cache size"} {
		require.ErrorContains(t, err, want)
	}
	_, err = accounthistory.New(accounthistory.DefaultConfig(), nil, nil, nil)
	require.ErrorContains(t, err, "no source")
}
