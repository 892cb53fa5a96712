package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestHelpListsEveryFlagWithItsVariable(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"--help"}, envOf(nil), &out, &errOut))
	for _, f := range []string{"feedback-queue-url", "lake-bucket", "lake-prefix", "errors-prefix", "s3-path-style", "s3-part-size",
		"admin-addr", "flush-bytes", "flush-rows", "flush-age", "max-buffered-bytes", "max-buffered-events", "visibility-timeout",
		"wait-time", "receive-concurrency", "flush-concurrency", "drain-timeout", "write-retry-base", "write-retry-max",
		"log-level", "debug-pause-after-write"} {
		require.Contains(t, out.String(), "--"+f+" ")
		require.Contains(t, out.String(), "CHATGUARD_"+strings.ToUpper(strings.ReplaceAll(f, "-", "_")))
	}
	require.Contains(t, out.String(), "default :9091")
	require.Contains(t, out.String(), "default events/")
}

func TestBadUsageExits2NamingTheSetting(t *testing.T) {
	t.Parallel()
	required := map[string]string{"CHATGUARD_FEEDBACK_QUEUE_URL": "http://q", "CHATGUARD_LAKE_BUCKET": "lake"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range required {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"bad duration", []string{"--flush-age", "soon"}, required, []string{`--flush-age="soon"`}},
		{"bad env int", nil, with(map[string]string{"CHATGUARD_FLUSH_ROWS": "many"}), []string{"CHATGUARD_FLUSH_ROWS"}},
		{"unknown flag", []string{"--flush-everything"}, required, []string{"--flush-everything: unknown flag"}},
		{"missing required", nil, nil, []string{"feedback queue url is required", "--lake-bucket is required"}},
		{"every range problem at once", []string{"--flush-rows=0", "--visibility-timeout=1500ms", "--wait-time=30s", "--log-level=loud", "--admin-addr=nope"}, required,
			[]string{"flush-rows must be positive", "visibility-timeout", "wait-time 30s", "--log-level", "--admin-addr"}},
		{"overlapping prefixes", []string{"--errors-prefix", "events/"}, required, []string{"must not overlap"}},
		{"positional", []string{"extra"}, required, []string{"unexpected arguments"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			require.Equal(t, 2, run(context.Background(), tc.args, envOf(tc.env), &out, &errOut))
			for _, w := range tc.want {
				require.Contains(t, errOut.String(), w)
			}
		})
	}
}

func TestFlagsWinOverEnvironment(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	fs := cfg.flags()
	require.NoError(t, fs.Parse([]string{"--flush-age=5s"}, envOf(map[string]string{
		"CHATGUARD_FLUSH_AGE": "9s", "CHATGUARD_FLUSH_ROWS": "77", "CHATGUARD_S3_PATH_STYLE": "true", "CHATGUARD_MAX_BUFFERED_BYTES": "1073741824",
	})))
	require.Equal(t, 5*time.Second, cfg.FlushAge)
	require.Equal(t, 77, cfg.FlushRows)
	require.True(t, cfg.S3PathStyle)
	require.Equal(t, int64(1<<30), cfg.MaxBufferedBytes)
	require.Equal(t, 77, cfg.Config.FlushRows, "the flag is the engine's own field")
	require.Equal(t, "events/", cfg.LakePrefix)
}

// One mistake is one line: a wait beyond SQS's 20 s is the engine's to
// report, and nothing else reports it again.
func TestOneMistakeOneLine(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	env := map[string]string{"CHATGUARD_FEEDBACK_QUEUE_URL": "http://q", "CHATGUARD_LAKE_BUCKET": "b"}
	require.Equal(t, 2, run(context.Background(), []string{"--wait-time=30s"}, envOf(env), &out, &errOut))
	require.Equal(t, 1, strings.Count(errOut.String(), "\n  - "), errOut.String())
	require.Contains(t, errOut.String(), "wait-time 30s")
}

// --feedback-queue-url binds the queue's own sqs.Config: its Validate
// reports a missing URL once, naming the queue.
func TestFeedbackQueueIsTheQueuesConfig(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	require.NoError(t, cfg.flags().Parse([]string{"--feedback-queue-url=http://sqs/feedback"}, envOf(nil)))
	require.Equal(t, "http://sqs/feedback", cfg.Queue.URL)
	require.Equal(t, "feedback", cfg.Queue.Name)

	var out, errOut bytes.Buffer
	require.Equal(t, 2, run(context.Background(), []string{"--feedback-queue-url= "}, envOf(map[string]string{"CHATGUARD_LAKE_BUCKET": "b"}), &out, &errOut))
	require.Equal(t, 1, strings.Count(errOut.String(), "\n  - "), errOut.String())
	require.Contains(t, errOut.String(), "feedback queue url is required")
}
