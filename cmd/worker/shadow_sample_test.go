//go:build shadowsample

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
)

// TestShadowSample regenerates docs/eval/shadow-sample/report.md (make
// eval-shadow-sample): a sample lake's rooms reviewed by the worker on the
// local stack with one LLM simulator as the live primary and another, with
// planted mistakes, as the shadow candidate; the shadow events come off
// the feedback queue as the consumer receives them, and `worker eval
// shadow` reads them back. Moderators are simulated from the sample's
// ground truth on every third window.
func TestShadowSample(t *testing.T) {
	const rooms = 150
	out := os.Getenv("SHADOW_SAMPLE_OUT")
	if out == "" {
		out = filepath.Join("docs", "eval", "shadow-sample")
	}
	lakeDir, truthDir := standin.SampleLake(t, 33, rooms, 1)
	truth := standin.ReadTruth(t, truthDir)
	live := standin.StartLLM(t, standin.LLMOptions{Name: "primary", Model: "live-small",
		Config: `{"ttft":"20ms","itl":"1ms","retry_after":"30s"}`})
	cand := standin.StartLLM(t, standin.LLMOptions{Name: "shadow", Model: "cand-large", APIKey: "cand-key",
		Config: candidateSimConfig})
	r := startRig(t, rigOpts{chatURL: standin.StartChatAPILake(t, lakeDir), mut: withShadow(live, cand.BaseURL, rooms, time.Minute)})
	var evs []pipeline.ReviewEvent
	for _, tr := range truth {
		evs = append(evs, event(tr.RoomID, func(ev *pipeline.ReviewEvent) {
			ev.WindowStart = tr.FirstMessageAt.UTC().Truncate(time.Second)
			ev.WindowEnd = tr.LastMessageAt.UTC().Truncate(time.Second).Add(2 * time.Second)
		}))
	}
	r.sendEvents(t, evs...)
	waitDone(t, r, len(evs), 10*time.Minute)
	got := distinctShadowEvents(t, r, len(evs), 5*time.Minute)
	require.NoError(t, r.stop())

	// In review-key order, so that which windows the simulated moderators
	// decide does not hang on arrival order.
	slices.SortFunc(got, func(a, b pipeline.LakeRecord) int {
		return strings.Compare(a.Payload.(pipeline.ShadowVerdict).RoomID, b.Payload.(pipeline.ShadowVerdict).RoomID)
	})
	byRoom := map[string]standin.Truth{}
	for _, tr := range truth {
		byRoom[tr.RoomID] = tr
	}
	var export bytes.Buffer
	for i, ev := range got {
		line, err := json.Marshal(ev.LakeEvent)
		require.NoError(t, err)
		export.Write(append(line, '\n'))
		p := ev.Payload.(pipeline.ShadowVerdict)
		if i%3 != 0 {
			continue
		}
		tr := byRoom[p.RoomID]
		fb := pipeline.LakeEvent{EventID: uuid.NewSHA1(uuid.NameSpaceOID, []byte("mod/"+ev.EventID)).String(), EventType: pipeline.EventModeratorFeedback,
			OccurredAt: ev.OccurredAt.Add(time.Hour), SchemaVersion: pipeline.LakeEventSchemaVersion,
			Payload: pipeline.ModeratorFeedback{RoomID: p.RoomID, WindowStart: p.WindowStart, WindowEnd: p.WindowEnd, PipelineVersion: p.PipelineVersion,
				ModeratorID: "sim-moderator", VerdictLabel: p.LiveLabel, VerdictCategory: p.LiveCategory,
				DecidedLabel: tr.Label, DecidedCategory: tr.Category, ActionTaken: pipeline.ActionNone}}
		line, err = json.Marshal(fb)
		require.NoError(t, err)
		export.Write(append(line, '\n'))
	}
	exportPath := filepath.Join(t.TempDir(), "shadow-events.jsonl")
	require.NoError(t, os.WriteFile(exportPath, export.Bytes(), 0o644))

	// From the repository root, so that the report's command names the
	// folder as make does.
	t.Chdir(filepath.Join("..", ".."))
	var stdout, stderr bytes.Buffer
	code := runShadowEval(context.Background(), []string{"--shadow-events", exportPath, "--out", out, "--max-recall-loss", "5,phishing_link=2",
		"--title", "chatguard shadow traffic: sample report (SIMULATORS)", "--note", fmt.Sprintf(shadowSampleNote, rooms)},
		func(string) string { return "" }, &stdout, &stderr, shadowEvalDeps{})
	require.Zero(t, code, stderr.String())
	t.Log(stdout.String())
}

// distinctShadowEvents receives shadow_verdict events off the feedback
// queue until n distinct ones arrived: the harness does not delete what it
// receives, so a message comes back after its visibility timeout, and the
// sample exports each event once so that its figures rerun the same.
func distinctShadowEvents(t *testing.T, r *rig, n int, within time.Duration) []pipeline.LakeRecord {
	t.Helper()
	seen := map[string]bool{}
	var out []pipeline.LakeRecord
	deadline := time.Now().Add(within)
	for len(out) < n && time.Now().Before(deadline) {
		for _, m := range r.receiveAll(t, r.feedback.URL, 1, time.Second) {
			ev, err := pipeline.DecodeLakeEvent([]byte(aws.ToString(m.Body)), time.Now().UTC())
			require.NoError(t, err)
			if ev.EventType == pipeline.EventShadowVerdict && !seen[ev.EventID] {
				seen[ev.EventID] = true
				out = append(out, ev)
			}
		}
	}
	require.Len(t, out, n, "distinct shadow_verdict events on the feedback queue")
	return out
}

// candidateSimConfig plants the candidate's mistakes: it misses 10 % of
// what the rules flag (phishing links 30 %) and raises a few false alarms.
const candidateSimConfig = `{"ttft":"20ms","itl":"1ms","retry_after":"30s","errors":{"seed":33,` +
	`"miss":{"*":0.1,"phishing_link":0.3},"false_alarm":{"spam":0.03},"hard_negative":0.1}}`

const shadowSampleNote = "**Both sides are LLM simulators (deploy/local/llmsim), not models**: the live primary is the simulator's rule " +
	"engine, the shadow candidate the same engine with planted mistakes (it misses 10 %% of what the rules flag, 30 %% of " +
	"phishing links, and raises a few false alarms), so the comparison has a difference to find. Made by `make " +
	"eval-shadow-sample` on the local stack: %d rooms of a generated sample lake (seed 33) reviewed by the worker with " +
	"`--shadow-rate 1`, the candidate third-party and so pseudonymised (every shadow review saw other text than the live " +
	"path); the shadow_verdict events were taken off the feedback queue as the consumer receives them and exported as JSON " +
	"lines. The moderators are simulated: every third window is decided by the sample's ground truth."
