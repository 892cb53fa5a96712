package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/bearer"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
)

// BenchmarkOperatorStop measures POST /v1/stop over loopback with bearer
// authentication (ten configured tokens, all compared), JSON decoding,
// validation, a publish (in memory: Redis is not what is measured) and
// the audit row: in memory, and in MySQL (the local stack's MariaDB) as
// deployed. It prints p50/p99 per request:
//
//	go test ./cmd/worker -run '^$' -bench BenchmarkOperatorStop -benchtime 2000x
func BenchmarkOperatorStop(b *testing.B) {
	dir := b.TempDir()
	for i := range 10 {
		require.NoError(b, os.WriteFile(fmt.Sprintf("%s/caller-%02d", dir, i), []byte(fmt.Sprintf("%s-%02d", strings.Repeat("t", 40), i)), 0o600))
	}
	tokens, err := bearer.LoadDir(dir)
	require.NoError(b, err)
	token := strings.Repeat("t", 40) + "-09" // the last compared, though all are

	var rows [][4]string
	run := func(name string, audit pipeline.StopAudit) {
		b.Run(name, func(b *testing.B) {
			api := newOperatorAPI(tokens, &memPublisher{}, audit, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
			s, err := listen("operator", "127.0.0.1:0", api.handler(), nil)
			require.NoError(b, err)
			serving(b, s)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			url := "http://" + s.Addr() + "/v1/stop"
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(fmt.Sprintf(`{"room_id":"room-%d","ttl":"10m","reason":"bench"}`, i)))
				req.Header.Set("Authorization", "Bearer "+token)
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(start))
				if resp.StatusCode != http.StatusAccepted {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
			b.ReportMetric(float64(q(0.99).Microseconds()), "p99-µs")
			// The last run (the full b.N) replaces the 1-request probe run.
			rows = slices.DeleteFunc(rows, func(r [4]string) bool { return r[0] == name })
			rows = append(rows, [4]string{name, fmt.Sprint(len(lat)), q(0.50).Round(time.Microsecond).String(), q(0.99).Round(time.Microsecond).String()})
		})
	}
	run("audit=memory", &memAudit{})
	db, _ := stacktest.MySQL(b)
	_, err = migrations.Up(context.Background(), db)
	require.NoError(b, err)
	run("audit=mysql", mysql.New(db))
	fmt.Println("| POST /v1/stop, loopback, bearer auth | requests | p50 | p99 |")
	fmt.Println("| --- | --- | --- | --- |")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s |\n", r[0], r[1], r[2], r[3])
	}
}
