package llm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxMetricsBody bounds a scraped /metrics page; vLLM's is tens of KiB.
const maxMetricsBody = 4 << 20

// scrapeWaiting reads the sum of vllm:num_requests_waiting over every
// series of the page at url (one per model or engine). It returns an
// error when the page cannot be read or holds no such series.
func scrapeWaiting(ctx context.Context, c *http.Client, url string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return parseWaiting(io.LimitReader(resp.Body, maxMetricsBody))
}

// parseWaiting sums the vllm:num_requests_waiting samples of a Prometheus
// text page. Only that one gauge is read, so a line scan is enough.
func parseWaiting(r io.Reader) (float64, error) {
	const name = "vllm:num_requests_waiting"
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sum, found := 0.0, false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no %s series", name)
	}
	return sum, nil
}

// scrapeLoop feeds the pool's waiting queue to its adaptive limit every
// ScrapeEvery until ctx ends. A failed scrape is counted and skipped: the
// TTFT signal still works without it.
func (p *pool) scrapeLoop(ctx context.Context, m *metrics) {
	cfg := p.cfg.Adaptive
	client := &http.Client{Timeout: max(cfg.ScrapeEvery, 100*time.Millisecond)}
	t := p.clk.NewTicker(cfg.ScrapeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		w, err := scrapeWaiting(ctx, client, cfg.MetricsURL)
		if err != nil {
			if ctx.Err() == nil {
				m.scrapeErrors.WithLabelValues(string(p.cfg.Name)).Inc()
			}
			continue
		}
		p.waiting.Store(int64(w))
		p.adaptive.observeWaiting(p.clk.Now(), w)
	}
}
