package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
	"github.com/chatguard/chatguard/pipeline/review"
	"github.com/chatguard/chatguard/storage/imagecdn"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// recorder is a reverse proxy in front of a model simulator that keeps
// every request body that reached it and every answer it returned: what
// left the worker for a model server, byte for byte.
type recorder struct {
	URL   string // base URL ending in /v1
	mu    sync.Mutex
	reqs  [][]byte
	resps [][]byte
}

func recordModel(t testing.TB, sim *standin.LLM) *recorder {
	t.Helper()
	target, err := url.Parse(strings.TrimSuffix(sim.BaseURL, "/v1"))
	require.NoError(t, err)
	rec := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if strings.HasSuffix(resp.Request.URL.Path, "/chat/completions") {
			rec.mu.Lock()
			rec.resps = append(rec.resps, b)
			rec.mu.Unlock()
		}
		return err
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			rec.mu.Lock()
			rec.reqs = append(rec.reqs, b)
			rec.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.URL = srv.URL + "/v1"
	return rec
}

func (rc *recorder) requests() [][]byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([][]byte(nil), rc.reqs...)
}

// answers are the streamed answers' contents, concatenated per response.
func (rc *recorder) answers() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for _, b := range rc.resps {
		var sb strings.Builder
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var chunk struct {
				Choices []struct {
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if json.Unmarshal([]byte(data), &chunk) == nil {
				for _, c := range chunk.Choices {
					sb.WriteString(c.Delta.Content)
				}
			}
		}
		out = append(out, sb.String())
	}
	return out
}

type memSink struct {
	mu  sync.Mutex
	evs []pipeline.LakeEvent
}

func (s *memSink) Publish(ev pipeline.LakeEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, ev)
	return true
}

func simRouter(t testing.TB, primary, fallback string, pseudonymize bool) *llm.Router {
	t.Helper()
	cfg := llm.Config{
		Primary:     llm.PoolConfig{BaseURL: primary, Model: "sim-p", MaxConcurrency: 16, AttemptTimeout: 30 * time.Second},
		MaxAttempts: 4,
	}
	if fallback != "" {
		cfg.Fallback = llm.PoolConfig{BaseURL: fallback, Model: "sim-f", MaxConcurrency: 16, AttemptTimeout: 30 * time.Second, Pseudonymize: pseudonymize}
	}
	r, err := llm.New(cfg, prometheus.NewRegistry())
	require.NoError(t, err)
	return r
}

func chatOf(room string, lines ...string) []pipeline.ChatMessage {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var out []pipeline.ChatMessage
	for i, l := range lines {
		m := pipeline.ChatMessage{MessageID: fmt.Sprintf("m%03d", i+1), SenderID: "u1", SenderRole: pipeline.RoleSeller, SentAt: t0.Add(time.Duration(i) * time.Minute), Kind: pipeline.KindText, Text: l}
		if u, ok := strings.CutPrefix(l, "image:"); ok {
			m.Kind, m.Text, m.ImageURL = pipeline.KindImage, "", u
		}
		out = append(out, m)
	}
	return out
}

func reviewEvent(room string) pipeline.ReviewEvent {
	ws := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	return pipeline.ReviewEvent{RoomID: room, WindowStart: ws, WindowEnd: ws.Add(time.Hour), RunID: "run-privacy", PublishedAt: ws.Add(time.Hour), SchemaVersion: pipeline.ReviewSchemaVersion}
}

// TestInternalImageNeverReachesAModel: image URLs that point inside the
// network (cloud metadata, private and loopback addresses, file://, a
// look-alike host) never appear in any request the model server receives;
// the allowed CDN image does, and the rejected ones are recorded on the
// verdict and counted.
func TestInternalImageNeverReachesAModel(t *testing.T) {
	t.Parallel()
	sim := standin.StartLLM(t, standin.LLMOptions{Name: "primary", Model: "sim-p", Config: `{"ttft":"1ms","itl":"0s","jitter":0}`})
	rec := recordModel(t, sim)
	gate, err := imagecdn.New(imagecdn.Config{Hosts: []string{"img.example-market.test"}})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	rev, err := review.New(review.Config{Class: pipeline.ClassBatch, Images: gate}, simRouter(t, rec.URL, "", false), nil, reg, nil)
	require.NoError(t, err)
	bad := []string{"http://169.254.169.254/latest/meta-data/iam/security-credentials/", "https://10.0.0.12/admin.png",
		"file:///etc/passwd", "https://img.example-market.test.attacker.xyz/a.jpg", "https://127.0.0.1:8080/x.png"}
	lines := []string{"입금 확인 캡처 보내드릴게요 010-2345-6789 로 연락주세요", "image:https://img.example-market.test/rooms/r1/m2-receipt.jpg"}
	for _, u := range bad {
		lines = append(lines, "image:"+u)
	}
	v, err := rev.Review(context.Background(), reviewEvent("room-img"), chatOf("room-img", lines...), 1)
	require.NoError(t, err)
	require.Equal(t, pipeline.StatusDone, v.Status)

	reqs := rec.requests()
	require.NotEmpty(t, reqs)
	sawAllowed := false
	for _, b := range reqs {
		for _, u := range bad {
			require.NotContains(t, string(b), u, "an internal image URL reached the model server")
		}
		for _, frag := range []string{"169.254.169.254", "10.0.0.12", "file://", "attacker.xyz", "127.0.0.1:8080"} {
			require.NotContains(t, string(b), frag)
		}
		sawAllowed = sawAllowed || strings.Contains(string(b), "img.example-market.test/rooms/r1/m2-receipt.jpg")
	}
	require.True(t, sawAllowed, "the CDN image reached the vision stage")

	last := v.Stages[len(v.Stages)-1]
	var out struct {
		Rejected []review.RejectedImage `json:"rejected_images"`
	}
	require.NoError(t, json.Unmarshal(last.Output, &out), string(last.Output))
	// file:// never gets that far: chatprep drops an image message whose
	// URL is not http(s) as noise. The other four are rejected by the gate.
	require.Len(t, out.Rejected, len(bad)-1, "every rejected image is recorded on the verdict")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "chatguard_review_images_rejected_total" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, float64(len(bad)-1), total)
}

type signalCase struct {
	ID, Technique, Text, Secret string
}

func readSignalCorpus(t testing.TB) []signalCase {
	t.Helper()
	f, err := os.Open("../../pipeline/chatprep/testdata/signals.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var out []signalCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var c signalCase
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		if c.Secret != "" {
			out = append(out, c)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// squash keeps letters and digits, lower case: how a secret is compared,
// whatever separators it was written or stored with.
func squash(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == chatprep.DataMarker {
			continue // the transcript's datamarking, not part of the text
		}
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// leaks counts the texts holding any of the secrets.
func leaks(texts []string, secrets []string) int {
	n := 0
	for _, s := range texts {
		sq := squash(s)
		for _, sec := range secrets {
			if strings.Contains(sq, sec) {
				n++
				break
			}
		}
	}
	return n
}

// decodedRequests returns the message texts of recorded requests (JSON
// escapes undone), one string per request.
func decodedRequests(t testing.TB, reqs [][]byte) []string {
	t.Helper()
	var out []string
	for _, b := range reqs {
		var body struct {
			Messages []struct {
				Content      string `json:"content"`
				MultiContent []struct {
					Text string `json:"text"`
				} `json:"-"`
			} `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(b, &body))
		var sb strings.Builder
		for _, m := range body.Messages {
			sb.WriteString(m.Content)
			sb.WriteByte('\n')
		}
		out = append(out, sb.String())
	}
	return out
}

// TestPIIScanAfterCorpusRun reviews every case of the contact-detail
// corpus with the primary down, so every stage goes to the third-party
// fallback, stores the verdicts in MySQL and the inference logs as lake
// Parquet, then scans the MySQL rows, the lake rows and the fallback
// requests for each case's contact detail: none may hold one. With
// pseudonymization off, the same scan of the fallback requests and of the
// raw answers (what stage rows held before masking) gives the "before".
func TestPIIScanAfterCorpusRun(t *testing.T) {
	t.Parallel()
	cases := readSignalCorpus(t)
	require.GreaterOrEqual(t, len(cases), 100)
	secrets := make([]string, 0, len(cases))
	for _, c := range cases {
		secrets = append(secrets, squash(c.Secret))
	}
	down := standin.StartLLM(t, standin.LLMOptions{Name: "primary", Model: "sim-p", Config: `{"ttft":"1ms","itl":"0s","jitter":0,"faults":{"503":1}}`})
	fbSim := standin.StartLLM(t, standin.LLMOptions{Name: "fallback", Model: "sim-f", Config: `{"ttft":"1ms","itl":"0s","jitter":0}`})

	type result struct {
		fallbackReqs, fallbackLeaks, answers, answerLeaks, rows, rowLeaks, lakeRows, lakeLeaks int
	}
	runCorpus := func(pseudonymize bool) result {
		rec := recordModel(t, fbSim)
		sink := &memSink{}
		keys, err := pseudonym.New([]byte(strings.Repeat("k", 32)))
		require.NoError(t, err)
		rev, err := review.New(review.Config{Class: pipeline.ClassBatch, Keys: keys}, simRouter(t, down.BaseURL, rec.URL, pseudonymize), sink, nil, nil)
		require.NoError(t, err)
		db, _ := stacktest.MySQL(t)
		_, err = migrations.Up(context.Background(), db)
		require.NoError(t, err)
		store := mysql.New(db)
		var g errgroup.Group
		g.SetLimit(8)
		for _, c := range cases {
			g.Go(func() error {
				room := "pii-" + c.ID
				v, err := rev.Review(context.Background(), reviewEvent(room), chatOf(room, "안녕하세요 물건 아직 있나요?", c.Text), 1)
				if err != nil {
					return fmt.Errorf("%s: %w", c.ID, err)
				}
				v.FinishedAt = time.Now().UTC()
				_, err = store.Save(context.Background(), v)
				return err
			})
		}
		require.NoError(t, g.Wait())

		var res result
		texts := decodedRequests(t, rec.requests())
		res.fallbackReqs, res.fallbackLeaks = len(texts), leaks(texts, secrets)
		ans := rec.answers()
		res.answers, res.answerLeaks = len(ans), leaks(ans, secrets)
		rows := dumpRows(t, db, "verdicts", "verdict_stages")
		res.rows, res.rowLeaks = len(rows), leaks(rows, secrets)
		lake := lakeRows(t, sink)
		res.lakeRows, res.lakeLeaks = len(lake), leaks(lake, secrets)
		return res
	}
	before, after := runCorpus(false), runCorpus(true)
	per := func(n, of int) float64 { return float64(n) * 1000 / float64(max(of, 1)) }
	t.Logf("PII (a corpus case's contact detail) found, %d cases, every stage on the fallback:", len(cases))
	t.Logf("| where | scanned | before (per 1,000) | after (per 1,000) |")
	t.Logf("| --- | --- | --- | --- |")
	t.Logf("| fallback requests (pseudonymize off / on) | %d / %d | %.0f | %.0f |", before.fallbackReqs, after.fallbackReqs, per(before.fallbackLeaks, before.fallbackReqs), per(after.fallbackLeaks, after.fallbackReqs))
	t.Logf("| model answers as received (unmasked) vs MySQL rows | %d / %d | %.0f | %.0f |", before.answers, after.rows, per(before.answerLeaks, before.answers), per(after.rowLeaks, after.rows))
	t.Logf("| lake rows (inference_log Parquet) | %d | - | %.0f |", after.lakeRows, per(after.lakeLeaks, after.lakeRows))
	require.Positive(t, before.fallbackLeaks, "the scan finds the details when nothing hides them")
	require.Zero(t, after.fallbackLeaks, "no contact detail reaches the third party")
	require.Zero(t, after.rowLeaks, "no contact detail in MySQL")
	require.Zero(t, after.lakeLeaks, "no contact detail in the lake")
	require.Zero(t, before.rowLeaks)
	require.Positive(t, after.rows)
	require.Positive(t, after.lakeRows)
}

// dumpRows returns every row of the tables as one string of its columns.
func dumpRows(t testing.TB, db *sql.DB, tables ...string) []string {
	t.Helper()
	var out []string
	for _, tbl := range tables {
		rows, err := db.Query("SELECT * FROM " + tbl)
		require.NoError(t, err)
		cols, err := rows.Columns()
		require.NoError(t, err)
		for rows.Next() {
			vals := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			var sb strings.Builder
			for _, v := range vals {
				sb.Write(v)
				sb.WriteByte('\t')
			}
			out = append(out, sb.String())
		}
		require.NoError(t, rows.Err())
		rows.Close()
	}
	return out
}

// lakeRows encodes the inference logs as the consumer writes them (the
// lake's Parquet) and reads the rows back.
func lakeRows(t testing.TB, sink *memSink) []string {
	t.Helper()
	sink.mu.Lock()
	recs := make([]pipeline.LakeRecord, 0, len(sink.evs))
	for _, ev := range sink.evs {
		recs = append(recs, pipeline.LakeRecord{LakeEvent: ev, ReceivedAt: ev.OccurredAt})
	}
	sink.mu.Unlock()
	var buf bytes.Buffer
	require.NoError(t, s3lake.EncodeParquet(&buf, pipeline.EventInferenceLog, recs))
	rows, err := s3lake.ReadRows[s3lake.InferenceLogRow](buf.Bytes())
	require.NoError(t, err)
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	return out
}
