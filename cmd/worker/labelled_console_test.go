package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsathena "github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/console"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval"
	"github.com/chatguard/chatguard/pipeline/live"
	"github.com/chatguard/chatguard/storage/chatapi"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/storetest"
)

// publishManifest, when set, is where TestLabelledSetFromConsoleDecisions
// copies the manifest it built (make eval-labelled-sample:
// docs/eval/labelled-sample/manifest.json).
var publishManifest = flag.String("publish-manifest", "", "copy the labelled set's manifest built from console decisions to this file")

// capturedFeedback is the feedback queue as the test sees it: every body
// the console sent.
type capturedFeedback struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (c *capturedFeedback) Send(_ context.Context, msgs []pipeline.OutMessage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.bodies = append(c.bodies, m.Body)
	}
	return nil
}

// noReviews is the console's reviewer in a test that starts none.
type noReviews struct{}

func (noReviews) PipelineVersion() string { return "pv-console" }
func (noReviews) Review(context.Context, pipeline.ReviewEvent, []pipeline.ChatMessage, int) (pipeline.Verdict, error) {
	return pipeline.Verdict{}, fmt.Errorf("no reviews in this test")
}

// labelledRoom is a sample room as the test reviews and decides it.
type labelledRoom struct {
	truth   standin.Truth
	verdict pipeline.Verdict
	id      uint64
}

// pipelineSays is the verdict the test saves for a room: its truth, but
// every fourth clean room flagged (a hard negative once decided clean) and
// every third flagged room called clean (a missed positive, if the audit
// samples it).
func pipelineSays(i int, r standin.Truth) (pipeline.Label, pipeline.Category, int) {
	switch {
	case r.Label == pipeline.LabelClean && i%4 == 0:
		return pipeline.LabelAbusive, pipeline.CategorySpam, 3
	case r.Label != pipeline.LabelClean && i%3 == 0:
		return pipeline.LabelClean, pipeline.CategoryClean, 0
	case r.Label == pipeline.LabelClean:
		return r.Label, r.Category, 0
	}
	return r.Label, r.Category, 4
}

// TestLabelledSetFromConsoleDecisions is the labelled set's whole path:
// a sample lake's rooms reviewed into MariaDB, a moderator deciding every
// flagged item and every audit item through the console's HTTP pages (and
// two clean verdicts outside the audit), the decisions' moderator_feedback
// events and the verdicts' events written into the lake as the consumer
// writes them, and worker eval build-set over the lake through the Athena
// and chat API stand-ins. The manifest's counts per stratum must be what
// the moderator decided: the clean stratum is the audit items, kept clean
// or overturned (missed positives).
func TestLabelledSetFromConsoleDecisions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	lakeDir, truthDir := standin.SampleLake(t, 33, 60, 1)
	truths := standin.ReadTruth(t, truthDir)
	db, _ := stacktest.MySQL(t)
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	st := mysql.New(db)
	rooms := make([]labelledRoom, len(truths))
	for i, r := range truths {
		k := pipeline.ReviewKey{RoomID: r.RoomID, WindowStart: r.FirstMessageAt.UTC().Truncate(time.Second),
			WindowEnd: r.LastMessageAt.UTC().Truncate(time.Second).Add(2 * time.Second), PipelineVersion: "pv-console"}
		label, cat, sev := pipelineSays(i, r)
		at := k.WindowEnd.Add(time.Hour)
		v := pipeline.Verdict{Key: k, RunID: "run-sample", Status: pipeline.StatusDone, Label: label, Category: cat, Severity: sev,
			Action: pipeline.ActionNone, Attempts: 1, PublishedAt: at, StartedAt: at, FinishedAt: at}
		storetest.MustSave(t, ctx, st, v)
		id, err := st.VerdictID(ctx, k)
		require.NoError(t, err)
		rooms[i] = labelledRoom{truth: r, verdict: v, id: id}
	}

	cfg := console.DefaultConfig()
	cfg.DevLogin, cfg.AuditShare = true, 0.5
	hub, err := live.NewHub(cfg.Hub(), nil, nil)
	require.NoError(t, err)
	chat, err := chatapi.New(func() chatapi.Config {
		c := chatapi.DefaultConfig()
		c.BaseURL = standin.StartChatAPILake(t, lakeDir)
		return c
	}())
	require.NoError(t, err)
	fb := &capturedFeedback{}
	app, err := console.New(cfg, console.Deps{Store: st, Feedback: fb, Chat: chat, Reviewer: noReviews{}, Hub: hub})
	require.NoError(t, err)
	ts := httptest.NewServer(app.Handler())
	t.Cleanup(ts.Close)
	mod := moderatorClient(t, ts.URL)

	// The queue shows audit items marked, among the flagged ones.
	queue := mod.get(t, "/queue")
	auditRows := regexp.MustCompile(`data-id="(\d+)" class="[^"]*\baudit\b`).FindAllStringSubmatch(queue, -1)
	require.NotEmpty(t, auditRows, "the default queue mixes audit items in")
	require.Contains(t, queue, `<span class="badge audit"`, "marked by text, not colour only")
	audited := mod.get(t, "/queue?audit=1")

	want := map[string]int{}
	missed, unaudited := 0, 0
	for _, r := range rooms {
		v := r.verdict
		isAudit := moderation.IsAuditItem(v.Key, v.Status, v.Label, cfg.AuditShare)
		switch {
		case isAudit:
			require.Contains(t, audited, fmt.Sprintf(`data-id="%d"`, r.id), "the audit queue lists every undecided audit item")
		case v.Label == pipeline.LabelClean && r.truth.Label == pipeline.LabelClean && unaudited < 2:
			unaudited++ // decided from its room page, outside the audit
		case v.Label == pipeline.LabelClean:
			continue // a clean verdict nobody looks at
		}
		mod.decide(t, r)
		d := eval.Decision{VerdictLabel: v.Label, DecidedLabel: r.truth.Label, DecidedCategory: r.truth.Category, Audit: isAudit}
		want[d.Stratum()]++
		if isAudit && r.truth.Label != pipeline.LabelClean {
			missed++
		}
	}
	require.Positive(t, want[eval.StratumClean])
	require.Positive(t, want[eval.StratumHardNegative])
	require.Equal(t, 2, want[eval.StratumCleanUnaudited])
	require.Positive(t, missed, "the sample has a flagged room the pipeline called clean and the audit sampled")

	// The lake: the verdicts' events and the console's feedback events,
	// decoded and written as the consumer writes them.
	received := time.Now().UTC() // the decisions were made now
	var bodies [][]byte
	for _, r := range rooms {
		v := r.verdict
		ev := pipeline.LakeEvent{EventID: pipeline.VerdictEventID(v.Key, v.Status), EventType: pipeline.EventVerdict, OccurredAt: v.FinishedAt,
			SchemaVersion: pipeline.LakeEventSchemaVersion, Payload: pipeline.VerdictEvent{RoomID: v.Key.RoomID, WindowStart: v.Key.WindowStart,
				WindowEnd: v.Key.WindowEnd, PipelineVersion: v.Key.PipelineVersion, RunID: v.RunID, Status: v.Status, Label: v.Label,
				Category: v.Category, Severity: v.Severity, Action: v.Action, Attempts: 1}}
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		bodies = append(bodies, b)
	}
	fb.mu.Lock()
	require.Len(t, fb.bodies, len(rooms)-countUndecided(rooms, cfg.AuditShare, 2), "one feedback event per decision")
	bodies = append(bodies, fb.bodies...)
	fb.mu.Unlock()
	writeLake(t, lakeDir, bodies, received)

	sim := standin.StartAthena(t, standin.AthenaOptions{LakeDir: lakeDir})
	api := awsathena.New(awsathena.Options{Region: "us-east-1", BaseEndpoint: aws.String(sim.URL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	out := filepath.Join(t.TempDir(), "set")
	day := truths[0].FirstMessageAt.UTC()
	args := []string{"--from", day.AddDate(0, 0, -1).Format(time.DateOnly), "--to", received.AddDate(0, 0, 1).Format(time.DateOnly),
		"--stratum-size", "50", "--seed", "33", "--out", out, "--chat-api-url", standin.StartChatAPILake(t, lakeDir)}
	var stdout, stderr bytes.Buffer
	code := runBuildSet(ctx, args, func(string) string { return "" }, &stdout, &stderr, buildSetDeps{Athena: api, Clock: clock.Real()})
	require.Zero(t, code, stderr.String())
	b, err := os.ReadFile(filepath.Join(out, "manifest.json"))
	require.NoError(t, err)
	var m eval.Manifest
	require.NoError(t, json.Unmarshal(b, &m))
	got := map[string]int{}
	for _, s := range m.Strata {
		require.Equal(t, s.Available, s.Written, "%s: every decision fits the stratum size", s.Stratum)
		got[s.Stratum] = s.Written
		if s.Stratum == eval.StratumClean {
			require.Equal(t, missed, s.MissedPositives, "overturned audit items")
		}
	}
	require.Equal(t, want, got, "the manifest counts what the moderator decided, per stratum")
	require.Equal(t, len(fb.bodies), m.Decisions)
	t.Logf("strata %v, %d missed positives among the audit items", got, missed)
	if *publishManifest != "" {
		require.NoError(t, os.WriteFile(*publishManifest, b, 0o644))
	}
}

// countUndecided is how many rooms the test leaves undecided: clean
// verdicts outside the audit but the first `unaudited`.
func countUndecided(rooms []labelledRoom, share float64, unaudited int) int {
	n := 0
	for _, r := range rooms {
		v := r.verdict
		if v.Label == pipeline.LabelClean && !moderation.IsAuditItem(v.Key, v.Status, v.Label, share) {
			n++
		}
	}
	return n - unaudited
}

// writeLake decodes bodies as the consumer does and writes them into
// lakeDir, one Parquet object per partition.
func writeLake(t *testing.T, lakeDir string, bodies [][]byte, received time.Time) {
	t.Helper()
	parts := map[string][]pipeline.LakeRecord{}
	for _, body := range bodies {
		d, err := pipeline.DecodeLakeEvent(body, received)
		require.NoError(t, err)
		p := s3lake.PartitionPath(d.EventType, pipeline.LakeHour(d.OccurredAt))
		parts[p] = append(parts[p], d)
	}
	for p, recs := range parts {
		var buf bytes.Buffer
		require.NoError(t, s3lake.EncodeParquet(&buf, recs[0].EventType, recs))
		dir := filepath.Join(lakeDir, "events", filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "part-console.parquet"), buf.Bytes(), 0o644))
	}
}

// moderator is a signed-in moderator's browser, without the browser.
type moderator struct {
	base string
	hc   *http.Client
}

func moderatorClient(t *testing.T, base string) *moderator {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := hc.PostForm(base+"/login", url.Values{"email": {"ana@example.com"}, "next": {"/queue"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return &moderator{base: base, hc: hc}
}

func (m *moderator) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := m.hc.Get(m.base + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}

var (
	csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	seenRe = regexp.MustCompile(`name="seen" value="([^"]*)"`)
)

// decide opens r's room page and confirms its verdict when it agrees with
// the room's truth, or overturns it to the truth.
func (m *moderator) decide(t *testing.T, r labelledRoom) {
	t.Helper()
	path := "/verdicts/" + strconv.FormatUint(r.id, 10)
	page := m.get(t, path)
	form := url.Values{"csrf": {csrfRe.FindStringSubmatch(page)[1]}, "seen": {seenRe.FindStringSubmatch(page)[1]}}
	if r.truth.Label == r.verdict.Label && r.truth.Category == r.verdict.Category {
		form.Set("decision", moderation.DecisionConfirm)
	} else {
		form.Set("decision", moderation.DecisionOverturn)
		form.Set("label", string(r.truth.Label))
		form.Set("category", string(r.truth.Category))
	}
	resp, err := m.hc.PostForm(m.base+path+"/decide", form)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.NotContains(t, string(b), "not decided", r.truth.RoomID)
}
