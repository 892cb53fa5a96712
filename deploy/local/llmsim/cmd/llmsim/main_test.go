package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunServesUntilCanceled(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CHATGUARD_LLMSIM_NAME": "fallback", "CHATGUARD_LLMSIM_TTFT": "1ms"}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--models", "a,b", "--itl=0s"}, func(k string) string { return env[k] }, pw, &stderr)
		pw.Close()
	}()
	url, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	url = strings.TrimSpace(url)
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:") && strings.HasSuffix(url, "/v1"), url)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimSuffix(url, "/v1")+"/admin/config", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(body), `"name":"fallback"`)
	require.Contains(t, string(body), `"models":["a","b"]`)
	require.Contains(t, string(body), `"ttft":"1ms"`)
	require.Contains(t, string(body), `"itl":"0s"`)

	cancel()
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop")
	}
	require.Contains(t, stderr.String(), `"msg":"llmsim listening"`)
}

func TestRunUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		out  string
	}{
		{"help", []string{"--help"}, nil, 0, "CHATGUARD_LLMSIM_TTFT"},
		{"bad flag value", []string{"--ttft", "soon"}, nil, 2, "invalid value"},
		{"bad env value", nil, map[string]string{"CHATGUARD_LLMSIM_MAX_RUNNING": "x"}, 2, "CHATGUARD_LLMSIM_MAX_RUNNING"},
		{"invalid config, all problems", []string{"--jitter", "3", "--max-running", "0"}, nil, 2, "max_running"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			code := run(t.Context(), tc.args, func(k string) string { return tc.env[k] }, &out, &out)
			require.Equal(t, tc.code, code, out.String())
			require.Contains(t, out.String(), tc.out)
		})
	}
}
