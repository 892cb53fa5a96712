package depflags

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/storage/chatapi"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/redisstop"
)

func TestFlagsMapOntoTheAdapters(t *testing.T) {
	t.Parallel()
	var (
		m     = mysql.DefaultConfig()
		c     = chatapi.DefaultConfig()
		stops = redisstop.DefaultConfig()
		pools = DefaultPools(0, 0)
	)
	fs := cli.NewFlagSet("test", "")
	BindMySQL(fs, &m)
	BindChatHistory(fs, &c, "chat URL")
	BindStops(fs, &stops)
	pools.Flags(fs, "model", "calls to the %s pool")
	env := map[string]string{
		"CHATGUARD_MYSQL_DSN": "u@tcp(db:3306)/x", "CHATGUARD_PRIMARY_CONCURRENCY": "7", "CHATGUARD_STOP_CHANNEL": "stops",
	}
	require.NoError(t, fs.Parse([]string{
		"--mysql-max-open-conns=9", "--chat-api-url=http://chat", "--chat-timeout=3s", "--stop-key-prefix=p:",
		"--primary-base-url=http://p/v1", "--primary-model=pm", "--primary-api-key=pk", "--fallback-base-url=http://f/v1",
		"--fallback-model=fm", "--fallback-api-key=fk", "--fallback-concurrency=5", "--attempt-timeout=11s", "--llm-max-attempts=4",
		"--primary-priority",
	}, func(k string) string { return env[k] }))

	require.Equal(t, "u@tcp(db:3306)/x", m.DSN)
	require.Equal(t, 9, m.MaxOpenConns)
	require.Equal(t, "http://chat", c.BaseURL)
	require.Equal(t, 3*time.Second, c.Timeout)
	require.Positive(t, c.MaxAttempts, "the client's default attempts")
	require.Equal(t, "stops", stops.Channel)
	require.Equal(t, "p:", stops.KeyPrefix)
	require.Equal(t, redisstop.DefaultConfig().CheckTimeout, stops.CheckTimeout, "no flag: the adapter's default")
	r := pools.Router().WithDefaults()
	require.Equal(t, "http://p/v1", r.Primary.BaseURL)
	require.Equal(t, "pm", r.Primary.Model)
	require.Equal(t, "pk", r.Primary.APIKey)
	require.Equal(t, 7, r.Primary.MaxConcurrency)
	require.Equal(t, "http://f/v1", r.Fallback.BaseURL)
	require.Equal(t, "fm", r.Fallback.Model)
	require.Equal(t, "fk", r.Fallback.APIKey)
	require.Equal(t, 5, r.Fallback.MaxConcurrency)
	require.Equal(t, 11*time.Second, r.Primary.AttemptTimeout)
	require.Equal(t, 11*time.Second, r.Fallback.AttemptTimeout, "one --attempt-timeout bounds both pools")
	require.Equal(t, 4, r.MaxAttempts)
	require.True(t, r.Primary.ServerPriority)
	require.False(t, r.Fallback.ServerPriority, "off unless asked: a server without the priority policy refuses it")

	var help strings.Builder
	fs.Usage(&help)
	require.Contains(t, help.String(), "calls to the primary pool")
	require.Contains(t, help.String(), "calls to the fallback pool")
}

// The binders set the adapters' own configurations: what no flag sets
// keeps the adapter's default, and the adapter's Validate checks the rest.
func TestBindersSetTheAdaptersConfigurations(t *testing.T) {
	t.Parallel()
	db, chat := mysql.DefaultConfig(), chatapi.DefaultConfig()
	fs := cli.NewFlagSet("test", "")
	BindMySQL(fs, &db)
	BindChat(fs, &chat, "chat URL")
	env := map[string]string{"CHATGUARD_CHAT_MAX_ATTEMPTS": "7"}
	require.NoError(t, fs.Parse([]string{"--mysql-dsn", "u@tcp(h:3306)/d", "--mysql-max-open-conns=3", "--chat-api-url=http://chat", "--chat-timeout=2s"},
		func(k string) string { return env[k] }))
	require.Equal(t, "u@tcp(h:3306)/d", db.DSN)
	require.Equal(t, 3, db.MaxOpenConns)
	require.Equal(t, mysql.DefaultConfig().ConnMaxLifetime, db.ConnMaxLifetime)
	require.Equal(t, "http://chat", chat.BaseURL)
	require.Equal(t, 2*time.Second, chat.Timeout)
	require.Equal(t, 7, chat.MaxAttempts)
	require.NoError(t, db.Validate())
	require.NoError(t, chat.Validate())
}

// The stop signals' flags set redisstop.Config itself, and its Validate
// reports each mistake once, in one line.
func TestBindStopsValidatesOnceEach(t *testing.T) {
	t.Parallel()
	c := redisstop.DefaultConfig()
	fs := cli.NewFlagSet("test", "")
	BindStops(fs, &c)
	require.NoError(t, fs.Parse([]string{"--stop-check-timeout=2s", "--stop-channel=ch"}, func(string) string { return "" }))
	require.Equal(t, 2*time.Second, c.CheckTimeout)
	require.Equal(t, "ch", c.Channel)
	require.NoError(t, c.Validate())

	require.NoError(t, fs.Parse([]string{"--stop-check-timeout=0s", "--stop-key-prefix="}, func(string) string { return "" }))
	err := c.Validate()
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 2, err.Error())
	require.Contains(t, lines[0], "key prefix is empty")
	require.Contains(t, lines[1], "check timeout must be positive")
}

// The price, pseudonymisation and fleet flags set the router's own
// fields; --help prints their defaults as they always were.
func TestPoolExtrasBindTheRouter(t *testing.T) {
	t.Parallel()
	pools := DefaultPools(1, 1)
	fs := cli.NewFlagSet("test", "")
	pools.PriceFlags(fs)
	pools.PseudonymizeFlags(fs)
	pools.FleetFlags(fs)
	var help strings.Builder
	fs.Usage(&help)
	for _, want := range []string{"CHATGUARD_PRIMARY_PRICE", "chatguard:fleet:", "--fleet-replicas"} {
		require.Contains(t, help.String(), want)
	}
	env := map[string]string{"CHATGUARD_FLEET_FALLBACK_TPM": "90000"}
	require.NoError(t, fs.Parse([]string{"--primary-price=gpu_hour=4.5,shared_by=32", "--fallback-pseudonymize=false", "--fleet-primary-limit=16",
		"--fleet-primary-reserved=4", "--fleet-primary-reserved-realtime=6", "--fleet-key-prefix=cg:fleet:",
		"--fleet-fallback-reserved-interactive=10", "--fleet-fallback-reserved-realtime=30", "--fleet-fallback-shadow-idle=40"}, func(k string) string { return env[k] }))
	r := pools.Router()
	require.Equal(t, llm.Price{GPUHour: 4.5, SharedBy: 32}, r.Primary.Price)
	require.False(t, r.Fallback.Pseudonymize)
	require.Equal(t, llm.FleetConfig{PrimaryLimit: 16, PrimaryReserved: 4, PrimaryReservedRealtime: 6, PrimaryShadowIdle: llm.DefaultShadowIdle,
		FallbackTPM: 90000, FallbackReservedInteractive: 10, FallbackReservedRealtime: 30, FallbackShadowIdle: 40,
		Replicas: 1, Name: "cg:fleet:"}, r.Fleet)
	require.NoError(t, pools.ValidateFleet("redis:6379"))

	err := fs.Parse([]string{"--primary-price=gpu_hour=x", "--fallback-price=nope=1"}, func(string) string { return "" })
	require.ErrorContains(t, err, "--primary-price")
	require.ErrorContains(t, err, "--fallback-price")
}

// Each fleet mistake is reported once, naming its flags.
func TestValidateFleetReportsEachMistakeOnce(t *testing.T) {
	t.Parallel()
	pools := DefaultPools(1, 1)
	require.NoError(t, pools.ValidateFleet(""), "no limit needs no Redis")
	f := &pools.LLM.Fleet
	f.PrimaryLimit, f.PrimaryReserved, f.Replicas = 4, 4, 0
	err := pools.ValidateFleet("")
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 3, err.Error())
	require.Contains(t, lines[0], "--fleet-primary-reserved must be in")
	require.Contains(t, lines[1], "--fleet-replicas")
	require.Contains(t, lines[2], "--fleet-* limits need --redis-addr")

	f.PrimaryLimit, f.PrimaryReserved, f.PrimaryReservedRealtime, f.Replicas = 16, 4, 12, 1
	err = pools.ValidateFleet("redis:6379")
	require.ErrorContains(t, err, "--fleet-primary-reserved-realtime", "4 + 12 leaves batch nothing of 16")
	require.Len(t, strings.Split(err.Error(), "\n"), 1)

	f.PrimaryReservedRealtime, f.FallbackReservedInteractive, f.FallbackReservedRealtime, f.FallbackShadowIdle = 0, 40, 60, 0
	err = pools.ValidateFleet("redis:6379")
	require.ErrorContains(t, err, "--fleet-fallback-reserved-realtime", "40 % + 60 % leaves batch nothing")
	require.ErrorContains(t, err, "--fleet-fallback-shadow-idle")
	require.Len(t, strings.Split(err.Error(), "\n"), 2)
}
