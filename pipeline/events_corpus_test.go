package pipeline

//go:generate go test -run ^TestGenerateEventCorpus$ . -args -update

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/chatguard/chatguard/internal/golden"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata corpora from their generators")

// eventCase is one line of testdata/events.jsonl: a body received at Now.
type eventCase struct {
	ID        string    `json:"id"`
	Technique string    `json:"technique"`
	Now       time.Time `json:"now"`
	Body      string    `json:"body"`
	// Valid says whether the event must be admitted; Reason is a part of
	// the poison reason of an invalid one.
	Valid  bool   `json:"valid"`
	Reason string `json:"reason,omitempty"`
}

func genEventCorpus() []eventCase {
	r := rand.New(rand.NewPCG(13, 3))
	now := time.Date(2026, 11, 2, 20, 10, 0, 0, time.UTC)
	start := time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)
	base := func() map[string]any {
		return map[string]any{
			"room_id": fmt.Sprintf("room-%06d", r.IntN(1_000_000)), "window_start": start.Format(time.RFC3339),
			"window_end": start.Add(time.Hour).Format(time.RFC3339), "run_id": "batch-20261102T190000Z-20261102T200000Z",
			"published_at": start.Add(65 * time.Minute).Format(time.RFC3339), "schema_version": 1,
		}
	}
	var out []eventCase
	add := func(tech string, m map[string]any, valid bool, reason string) {
		b, _ := json.Marshal(m)
		out = append(out, eventCase{ID: fmt.Sprintf("e%03d", len(out)+1), Technique: tech, Now: now, Body: string(b), Valid: valid, Reason: reason})
	}
	addRaw := func(tech, body string, valid bool, reason string) {
		out = append(out, eventCase{ID: fmt.Sprintf("e%03d", len(out)+1), Technique: tech, Now: now, Body: body, Valid: valid, Reason: reason})
	}
	with := func(kv ...any) map[string]any {
		m := base()
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	at := func(d time.Duration) string { return start.Add(d).Format(time.RFC3339) }

	// A producer that adds fields must not dead-letter the queue.
	add("tolerant/baseline", base(), true, "")
	extras := []struct {
		name string
		v    any
	}{
		{"trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"}, {"priority", 3}, {"tags", []string{"a", "b"}},
		{"source", map[string]any{"dag": "chatguard_batch", "try": 2}}, {"producer_version", "2.4.1"}, {"retry", nil},
		{"window_tz", "Asia/Seoul"}, {"debug", true}, {"shard", 7}, {"room_type", "trade"},
	}
	for _, e := range extras {
		add("tolerant/unknown_field", with(e.name, e.v), true, "")
	}
	m := base()
	for i := range 20 {
		m[fmt.Sprintf("x_%d", i)] = strings.Repeat("v", 100)
	}
	add("tolerant/many_unknown_fields", m, true, "")
	addRaw("tolerant/case_variant_keys", strings.Replace(mustJSON(base()), `"room_id"`, `"Room_Id"`, 1), true, "")
	// Breaking changes are still refused.
	add("schema/version_2", with("schema_version", 2), false, "schema_version 2")
	add("schema/version_missing", with("schema_version", nil), false, "schema_version 0")
	add("schema/version_string", with("schema_version", "1"), false, "not a JSON review event")
	// The window is bounded.
	add("window/one_hour", base(), true, "")
	add("window/24h_exactly", with("window_start", at(-23*time.Hour), "window_end", at(time.Hour), "published_at", at(65*time.Minute)), true, "")
	add("window/25h", with("window_start", at(-24*time.Hour), "window_end", at(time.Hour)), false, "longer than 24h0m0s")
	add("window/7_days", with("window_start", at(-7*24*time.Hour+time.Hour), "window_end", at(time.Hour)), false, "longer than")
	add("window/ten_years", with("window_start", at(-10*365*24*time.Hour), "window_end", at(time.Hour)), false, "longer than")
	add("window/inverted", with("window_start", at(2*time.Hour), "window_end", at(time.Hour)), false, "not after")
	add("window/not_ended", with("window_start", at(time.Hour), "window_end", at(3*time.Hour), "published_at", at(70*time.Minute)), false, "has not ended")
	// Clock skew of published_at is bounded.
	add("skew/published_4m_ahead", with("published_at", now.Add(4*time.Minute).Format(time.RFC3339)), true, "")
	add("skew/published_1h_ahead", with("published_at", now.Add(time.Hour).Format(time.RFC3339)), false, "in the future")
	add("skew/published_10y_ahead", with("published_at", now.Add(10*365*24*time.Hour).Format(time.RFC3339)), false, "in the future")
	add("skew/published_long_ago", with("published_at", at(-30*24*time.Hour)), true, "")
	// run_id like the batch validates it.
	add("run_id/128_chars", with("run_id", "r"+strings.Repeat("x", 127)), true, "")
	add("run_id/129_chars", with("run_id", "r"+strings.Repeat("x", 128)), false, "run_id must be")
	add("run_id/4000_chars", with("run_id", strings.Repeat("x", 4000)), false, "run_id must be")
	add("run_id/slash", with("run_id", "run/1"), false, "run_id must be")
	add("run_id/space", with("run_id", "run 1"), false, "run_id must be")
	add("run_id/newline", with("run_id", "run-1\nlevel=error msg=forged"), false, "run_id must be")
	add("run_id/hangul", with("run_id", "배치-1"), false, "run_id must be")
	add("run_id/leading_dash", with("run_id", "-run"), false, "run_id must be")
	add("run_id/missing", with("run_id", nil), false, "run_id is missing")
	add("run_id/manual", with("run_id", "manual-2026.11.02:retry_1"), true, "")
	// Room ids stay bounded in bytes, whatever their script.
	add("room_id/hangul_43", with("room_id", strings.Repeat("방", 43)), false, "longer than 128")
	add("room_id/hangul_42", with("room_id", strings.Repeat("방", 42)), true, "")
	add("room_id/percent", with("room_id", "room%2F..%2Fadmin"), false, "reserved character")
	// Broken bodies.
	addRaw("body/truncated", mustJSON(base())[:60], false, "not a JSON review event")
	addRaw("body/invalid_utf8", strings.Replace(mustJSON(base()), "room-", "room-\xff\xfe", 1), true, "")
	addRaw("body/trailing", mustJSON(base())+" {}", false, "trailing data")
	addRaw("body/null", "null", false, "schema_version 0")
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestGenerateEventCorpus checks the corpus against its generator
// (-update rewrites it).
func TestGenerateEventCorpus(t *testing.T) {
	var b strings.Builder
	for _, c := range genEventCorpus() {
		j, err := json.Marshal(c)
		require.NoError(t, err)
		b.Write(j)
		b.WriteByte('\n')
	}
	golden.Check(t, "testdata/events.jsonl", []byte(b.String()), *update, "go test ./pipeline -run TestGenerateEventCorpus -args -update")
}

func loadEventCorpus(t *testing.T) []eventCase {
	t.Helper()
	f, err := os.Open("testdata/events.jsonl")
	require.NoError(t, err, "generate it with: go test ./pipeline -run TestGenerateEventCorpus -args -update")
	defer f.Close()
	var out []eventCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c eventCase
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		out = append(out, c)
	}
	return out
}

func TestEventCorpus(t *testing.T) {
	t.Parallel()
	cases := loadEventCorpus(t)
	require.GreaterOrEqual(t, len(cases), 40)
	for _, c := range cases {
		ev, err := DecodeReviewEvent([]byte(c.Body))
		if err == nil {
			err = DefaultEventLimits().Check(ev, c.Now)
		}
		if c.Valid {
			require.NoError(t, err, "%s (%s)", c.ID, c.Technique)
			continue
		}
		var inv *InvalidEventError
		require.True(t, errors.As(err, &inv), "%s (%s): want an *InvalidEventError, got %v", c.ID, c.Technique, err)
		require.Contains(t, inv.Reason, c.Reason, c.ID)
		require.True(t, utf8.ValidString(inv.Reason), c.ID)
		require.LessOrEqual(t, utf8.RuneCountInString(inv.Reason), 1000, c.ID)
		require.NotContains(t, inv.Reason, "\n", "%s: a reason is one log line", c.ID)
	}
}
