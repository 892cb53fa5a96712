package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEvalUsageErrorsAreListedTogether(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"eval", "--endpoint", "bad", "--sweep", "1,x", "--price", "nope=prompt=1", "--plot-format", "gif",
		"--max-recall-loss", "1,phishing_link", "--endpoint-note", "nope=dtype=fp8", "--reference", "zzz", "--power", "1.5", "--image-inline"},
		func(string) string { return "" }, &out, &errOut)
	require.Equal(t, 2, code)
	for _, want := range []string{"name=base_url,model", "--sweep", "--price nope", "--plot-format", "no cases",
		"--max-recall-loss", "--endpoint-note nope", `reference "zzz"`, "power 1.5", "--image-inline needs --image-hosts"} {
		require.Contains(t, errOut.String(), want)
	}
}

// TestEvalPlanSizesASet: the pilot (ψ 0.122, one window per room)
// needs Connor's 1,421 positives for 90 % power on a 3-point loss; three
// correlated windows per room (design effect 3) three times as many
// positives in as many rooms as before.
func TestEvalPlanSizesASet(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"eval", "plan", "--discordance", "0.122", "--loss", "3", "--margin", "1"},
		func(string) string { return "" }, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "| 90 % | 1421 positives in 1421 rooms |")
	out.Reset()
	code = run(context.Background(), []string{"eval", "plan", "--discordance", "0.122", "--design-effect", "3", "--positives-per-room", "3"},
		func(string) string { return "" }, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "| 90 % | 4263 positives in 1421 rooms |")
	errOut.Reset()
	code = run(context.Background(), []string{"eval", "plan", "--discordance", "1.5", "--design-effect", "0.5"}, func(string) string { return "" }, &out, &errOut)
	require.Equal(t, 2, code)
	require.Contains(t, errOut.String(), "--discordance")
	require.Contains(t, errOut.String(), "--design-effect")
}

// TestEvalWritesAReportWithTheKeyFromTheEnvironment runs `worker eval`
// against a simulator that requires a key, given only through
// CHATGUARD_EVAL_<NAME>_API_KEY, and checks the report names no key.
func TestEvalWritesAReportWithTheKeyFromTheEnvironment(t *testing.T) {
	t.Parallel()
	sim, url := simProc(t, "primary", "m", "sekret-key", `{"ttft":"1ms","itl":"0s"}`)
	dir := t.TempDir()
	out := filepath.Join(dir, "report")
	env := map[string]string{"CHATGUARD_EVAL_SIM_A_API_KEY": "sekret-key"}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"eval", "--endpoint", "sim-a=" + url + ",m", "--price", "sim-a=prompt=1,completion=2",
		"--injection-suite", "../../pipeline/review/testdata/injection_suite.jsonl", "--sweep", "4", "--out", out, "--plot-format", "png"},
		func(k string) string { return env[k] }, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "| sim-a | 52 |", "every injection pair reviewed")
	require.NotContains(t, string(md), "sekret-key")
	require.Positive(t, sim.Stats(t).ChatRequests("ok"))
	require.Equal(t, "worker eval --note '(the note above)' --out 'a b'", commandLine([]string{"--note", "x\ny", "--out", "a b"}))
}

func TestParseMargins(t *testing.T) {
	t.Parallel()
	m, err := parseMargins("1, phishing_link=0.5")
	require.NoError(t, err)
	require.InDelta(t, 0.01, m.Default, 1e-12)
	require.InDelta(t, 0.005, m.For("phishing_link"), 1e-12)
	require.InDelta(t, 0.01, m.For("spam"), 1e-12)
	for _, bad := range []string{"", "x", "phishing_link=0.5", "1,2", "-1", "100"} {
		_, err := parseMargins(bad)
		require.Error(t, err, bad)
	}
}
