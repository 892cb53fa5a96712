package reviewers

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/storage/storetest"
)

// devOptions are the defaults on a development stack: the dev pseudonym
// keys, which the defaults alone refuse.
func devOptions() Options {
	o := DefaultOptions()
	o.DevInsecureKeys = true
	return o
}

func TestOptionsValidateNamesEveryProblem(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, DefaultOptions().Validate(), "--quote-digest-key is empty", "no key, no start")
	d := devOptions()
	require.NoError(t, d.Validate())
	require.Empty(t, d.Images.Hosts, "no image host is trusted until configured")

	o := d
	o.QuoteDigestKey, o.Images.Hosts = "short", []string{"https://cdn.example.com"}
	err := o.Validate()
	require.Error(t, err)
	for _, want := range []string{"--quote-digest-key", "--image-*"} {
		require.ErrorContains(t, err, want)
	}
}

// The price and pseudonymisation flags Options declares land on the
// pools' own fields, so the router gets them without a copy.
func TestOptionsReachTheRouter(t *testing.T) {
	t.Parallel()
	o, pools := devOptions(), depflags.DefaultPools(1, 1)
	fs := cli.NewFlagSet("test", "")
	o.Flags(fs, &pools)
	env := map[string]string{"CHATGUARD_PRIMARY_PSEUDONYMIZE": "true"}
	require.NoError(t, fs.Parse([]string{"--fallback-price=prompt=2.5,completion=10", "--image-hosts= img.example.com , .cdn.example.com "},
		func(k string) string { return env[k] }))
	require.NoError(t, o.Validate())
	require.Equal(t, []string{"img.example.com", ".cdn.example.com"}, o.Images.Hosts)
	rc := pools.Router()
	require.True(t, rc.Primary.Pseudonymize)
	require.True(t, rc.Fallback.Pseudonymize, "on by default for the third-party pool")
	require.Equal(t, llm.Price{PromptPerMTok: 2.5, CompletionPerMTok: 10}, rc.Fallback.Price)
	require.Equal(t, llm.Price{}, rc.Primary.Price, "no flag: free")

	require.ErrorContains(t, fs.Parse([]string{"--primary-price=gpu_hour=x"}, func(string) string { return "" }), "--primary-price")
}

func TestNewRefusesWhatValidateRefuses(t *testing.T) {
	t.Parallel()
	o := devOptions()
	o.QuoteDigestKey = strings.Repeat("k", 8)
	pools := depflags.Pools{LLM: llm.Config{Primary: llm.PoolConfig{BaseURL: "http://p/v1", Model: "p"}}}
	_, err := New(Params{Component: "test", Pools: pools, Options: o})
	require.ErrorContains(t, err, "--quote-digest-key")
	pools.LLM.Fleet.PrimaryLimit = 4
	_, err = New(Params{Component: "test", Pools: pools, Options: devOptions()})
	require.ErrorContains(t, err, "--fleet-* limits need --redis-addr", "no Redis dialled for limits without an address")
}

// The account history is on by default and needs a verdict store; off
// (0), a binary without one builds; a bad setting names its flag.
func TestAccountHistoryNeedsAStoreWhenOn(t *testing.T) {
	t.Parallel()
	pools := depflags.DefaultPools(1, 1)
	pools.LLM.Primary.BaseURL, pools.LLM.Primary.Model = "http://p/v1", "p"
	_, err := New(Params{Component: "test", Pools: pools, Options: devOptions()})
	require.ErrorContains(t, err, "--account-history")

	o := devOptions()
	fs := cli.NewFlagSet("test", "")
	o.Flags(fs, &pools)
	require.NoError(t, fs.Parse([]string{"--account-history=0"}, func(string) string { return "" }))
	eng, err := New(Params{Component: "test", Pools: pools, Options: o})
	require.NoError(t, err)
	require.Zero(t, eng.Settings().AccountHistory)
	eng.Close()

	require.NoError(t, fs.Parse([]string{"--account-history=1m", "--account-history-timeout=0s"}, func(string) string { return "" }))
	err = o.Validate()
	require.ErrorContains(t, err, "--account-history*")
	require.ErrorContains(t, err, "below an hour")
	require.ErrorContains(t, err, "timeout")
}

// Until the store opens, a lookup fails (and is counted by the lookup);
// then it reads the store.
func TestHistoryIsReadFromTheStoreOnceOpen(t *testing.T) {
	t.Parallel()
	var open pipeline.AccountHistory
	src := lateHistory(func() pipeline.AccountHistory { return open })
	q := pipeline.HistoryQuery{Accounts: []pipeline.HistoryAccount{{SenderID: "s", Role: pipeline.RoleSeller}}}
	_, err := src.AccountHistory(t.Context(), q)
	require.ErrorContains(t, err, "not open yet")
	h := &storetest.History{}
	h.Add(storetest.HistoryRecord{Room: "r1", Sender: "s", Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam})
	open = h
	got, err := src.AccountHistory(t.Context(), q)
	require.NoError(t, err)
	require.Equal(t, []pipeline.HistoryCount{{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Category: pipeline.CategorySpam, Rooms: 1}}, got)
}

// A second engine given the first's lookup (the shadow candidate beside
// the live engine) reads account history through it and builds none of
// its own: it needs no store, and both engines answer from one cache.
func TestEngineSharesAnotherEnginesHistoryLookup(t *testing.T) {
	t.Parallel()
	pools := depflags.DefaultPools(1, 1)
	pools.LLM.Primary.BaseURL, pools.LLM.Primary.Model = "http://p/v1", "p"
	store := &storetest.History{}
	live, err := New(Params{Component: "live", Pools: pools, Options: devOptions(), History: func() pipeline.AccountHistory { return store }})
	require.NoError(t, err)
	defer live.Close()
	require.NotNil(t, live.HistoryLookup())

	shadow, err := New(Params{Component: "shadow", Pools: pools, Options: devOptions(), SharedHistory: live.HistoryLookup()})
	require.NoError(t, err, "no store of its own is needed")
	defer shadow.Close()
	require.Same(t, live.HistoryLookup(), shadow.HistoryLookup())

	off := devOptions()
	off.History.Window = 0
	none, err := New(Params{Component: "off", Pools: pools, Options: off, SharedHistory: live.HistoryLookup()})
	require.NoError(t, err)
	defer none.Close()
	require.Nil(t, none.HistoryLookup(), "with the history off, no lookup is used, shared or not")
}
