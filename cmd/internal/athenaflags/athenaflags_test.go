package athenaflags

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/storage/athena"
)

func TestFlagsMapOntoTheConfig(t *testing.T) {
	t.Parallel()
	c := athena.DefaultConfig()
	fs := cli.NewFlagSet("test", "")
	Bind(fs, &c, "where the rooms are")
	env := map[string]string{"CHATGUARD_ATHENA_WORKGROUP": "analysts"}
	require.NoError(t, fs.Parse([]string{"--athena-database=lake", "--athena-output-location=s3://r/q/",
		"--athena-timeout=3m", "--athena-poll-max=50ms"}, func(k string) string { return env[k] }))
	want := athena.DefaultConfig()
	want.Database, want.Workgroup, want.OutputLocation, want.Timeout, want.PollMax = "lake", "analysts", "s3://r/q/", 3*time.Minute, 50*time.Millisecond
	require.Equal(t, want, c)
	var help bytes.Buffer
	fs.Usage(&help)
	require.Contains(t, help.String(), "where the rooms are")
}

// TestResolveKeepsTheFirstPollWithinPollMax: a --athena-poll-max below
// the first poll's default lowers that too, instead of failing Validate.
func TestResolveKeepsTheFirstPollWithinPollMax(t *testing.T) {
	t.Parallel()
	c := athena.DefaultConfig()
	c.PollMax = c.PollMin / 4
	require.ErrorContains(t, c.Validate(), "poll interval")
	r := Resolve(c)
	require.NoError(t, r.Validate())
	require.Equal(t, c.PollMax, r.PollMin)
	require.Equal(t, athena.DefaultConfig().PollMin, Resolve(athena.DefaultConfig()).PollMin, "a poll max above it leaves it")
}
