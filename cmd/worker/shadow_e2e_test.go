package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// shadowRooms are chats with contact details, so that what reached the
// candidate shows whether it was pseudonymised.
var shadowRooms = func() map[string][]pipeline.ChatMessage {
	at := testWindow.Add(10 * time.Minute)
	rooms := map[string][]pipeline.ChatMessage{}
	for i := range 6 {
		id := fmt.Sprintf("shadow-%02d", i)
		rooms[id] = []pipeline.ChatMessage{
			{MessageID: id + "-1", SenderID: "b", SenderRole: pipeline.RoleBuyer, SentAt: at, Kind: pipeline.KindText, Text: "안녕하세요 아직 판매중인가요?"},
			{MessageID: id + "-2", SenderID: "s", SenderRole: pipeline.RoleSeller, SentAt: at.Add(time.Minute), Kind: pipeline.KindText,
				Text: fmt.Sprintf("카톡으로 연락주세요 010-5555-%04d", 1000+i)},
		}
	}
	return rooms
}()

// withShadow points the worker's live path at live and mirrors every
// review to the candidate at candidateURL, slots shadow reviews at once.
func withShadow(live *standin.LLM, candidateURL string, slots int, timeout time.Duration) func(*Config) {
	return func(c *Config) {
		withSims(live.BaseURL, live.Model, "", "", "")(c)
		c.Shadow = ShadowConfig{Rate: 1, BaseURL: candidateURL, Model: "cand-large", APIKey: "cand-key", Pseudonymize: true,
			Concurrency: slots, Timeout: timeout}
		c.Shadow.Price.PromptPerMTok, c.Shadow.Price.CompletionPerMTok = 3, 15
	}
}

// feedbackEvents receives the feedback queue's events of type typ until n
// arrive (or within passes), decoded by the consumer's decoder: each is
// one the consumer admits.
func feedbackEvents(t *testing.T, r *rig, typ pipeline.EventType, n int, within time.Duration) []pipeline.LakeRecord {
	t.Helper()
	var out []pipeline.LakeRecord
	deadline := time.Now().Add(within)
	for len(out) < n && time.Now().Before(deadline) {
		for _, m := range r.receiveAll(t, r.feedback.URL, 1, time.Second) {
			ev, err := pipeline.DecodeLakeEvent([]byte(aws.ToString(m.Body)), time.Now().UTC())
			require.NoError(t, err, "the consumer admits every event the worker writes")
			if ev.EventType == typ {
				out = append(out, ev)
			}
		}
	}
	require.Len(t, out, n, "%s events on the feedback queue", typ)
	return out
}

func TestShadowVerdictsReachTheLakeBesideLiveVerdicts(t *testing.T) {
	t.Parallel()
	live, _ := simProc(t, "primary", "live-small", "", "")
	cand, _ := simProc(t, "shadow", "cand-large", "cand-key", "")
	liveRec, candRec := recordModel(t, live), recordModel(t, cand)
	liveProxy := *live
	liveProxy.BaseURL = liveRec.URL
	r := startRig(t, rigOpts{chatURL: standin.StartChatAPI(t, shadowRooms), mut: withShadow(&liveProxy, candRec.URL, 8, time.Minute)})
	var evs []pipeline.ReviewEvent
	for room := range shadowRooms {
		evs = append(evs, event(room))
	}
	r.sendEvents(t, evs...)
	waitDone(t, r, len(evs), 2*time.Minute)

	got := feedbackEvents(t, r, pipeline.EventShadowVerdict, len(evs), time.Minute)
	for _, ev := range got {
		p := ev.Payload.(pipeline.ShadowVerdict)
		k := pipeline.ReviewKey{RoomID: p.RoomID, WindowStart: p.WindowStart, WindowEnd: p.WindowEnd, PipelineVersion: p.PipelineVersion}
		v, err := r.store.Get(context.Background(), k)
		require.NoError(t, err, "the shadow event names a committed live verdict")
		require.Equal(t, pipeline.ShadowVerdictEventID(k, "cand-large"), ev.EventID, "deterministic: a rerun writes the same event")
		require.Equal(t, pipeline.ShadowOK, p.Outcome, "room %s: %s", p.RoomID, p.ErrorKind)
		require.Equal(t, v.Label, p.LiveLabel)
		require.NotEmpty(t, p.Label)
		require.NotEqual(t, p.PipelineVersion, p.CandidatePipelineVersion, "the candidate's model is part of its version")
		require.True(t, p.TextDiffers, "the live primary saw the chat, the candidate its pseudonymised copy")
		require.NotEmpty(t, p.Stages)
		require.Positive(t, p.CostUSD, "priced by --shadow-price")
	}
	// The events are what the lake's Parquet writer takes.
	var buf bytes.Buffer
	require.NoError(t, s3lake.EncodeParquet(&buf, pipeline.EventShadowVerdict, got))
	require.Positive(t, buf.Len())

	// A third-party candidate is pseudonymised like the fallback; the live
	// primary (self-hosted) is not.
	require.Contains(t, strings.Join(bodies(liveRec.requests()), "\n"), "010-5555-1000")
	candReqs := strings.Join(bodies(candRec.requests()), "\n")
	require.NotEmpty(t, candReqs)
	require.NotContains(t, candReqs, "010-5555")
	require.Contains(t, candReqs, "PHONE_1")
	require.Equal(t, float64(len(evs)), r.metric(t, `chatguard_worker_shadow_reviews_total{outcome="ok"}`))
	require.NoError(t, r.stop())
}

func bodies(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// A candidate that fails every call, or hangs, changes nothing live: every
// live verdict commits and every message is deleted while the candidate is
// still failing or holding its calls; a hanging one is canceled and
// counted at the drain.
func TestFailingSlowOrHangingCandidateChangesNothingLiveInTheWorker(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"failing", "hanging"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			live, _ := simProc(t, "primary", "live-small", "", "")
			var calls atomic.Int64
			release := make(chan struct{})
			cand := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				calls.Add(1)
				if mode == "hanging" {
					select {
					case <-req.Context().Done():
					case <-release:
					}
				}
				http.Error(w, `{"error":"candidate down"}`, http.StatusServiceUnavailable)
			}))
			t.Cleanup(cand.Close)
			t.Cleanup(func() { close(release) })
			mut := func(c *Config) {
				// A failing candidate's breaker opens and its reviews
				// wait for it until their deadline: 20 s here.
				slots, timeout := 8, 20*time.Second
				if mode == "hanging" {
					slots, timeout = 4, 10*time.Minute
				}
				withShadow(live, cand.URL+"/v1", slots, timeout)(c)
				// One attempt outlasts the test: the hanging calls are
				// held until the drain cancels them.
				c.LLM.AttemptTimeout, c.Loop.JobTimeout = 5*time.Minute, 6*time.Minute
			}
			r := startRig(t, rigOpts{chatURL: standin.StartChatAPI(t, shadowRooms), mut: mut})
			var evs []pipeline.ReviewEvent
			for room := range shadowRooms {
				evs = append(evs, event(room))
			}
			r.sendEvents(t, evs...)
			waitDone(t, r, len(evs), 2*time.Minute)
			require.Eventually(t, func() bool { vis, inf := r.queueCounts(t, r.queue.URL); return vis+inf == 0 }, 30*time.Second, 50*time.Millisecond,
				"every live message deleted")
			require.Positive(t, calls.Load(), "the candidate was asked")
			require.Zero(t, r.countRows(t, "SELECT COUNT(*) FROM verdicts WHERE status <> 'done'"))
			require.Equal(t, float64(len(evs)), r.metric(t, `chatguard_worker_jobs_total{outcome="done"}`))
			if mode == "failing" {
				for _, ev := range feedbackEvents(t, r, pipeline.EventShadowVerdict, len(evs), 2*time.Minute) {
					p := ev.Payload.(pipeline.ShadowVerdict)
					require.Equal(t, pipeline.ShadowError, p.Outcome)
					require.NotContains(t, p.ErrorKind, "candidate down", "a class, never the candidate's text")
				}
				require.NoError(t, r.stop())
				return
			}
			// Every shadow slot is held by the hanging candidate (4 of 6
			// offers ran, 2 were dropped) while every live review is done.
			require.Equal(t, 2.0, r.metric(t, `chatguard_worker_shadow_reviews_total{outcome="dropped_saturated"}`))
			require.NoError(t, r.stop(), "the drain cancels the shadow reviews and ends in time")
			for _, ev := range feedbackEvents(t, r, pipeline.EventShadowVerdict, 4, time.Minute) {
				p := ev.Payload.(pipeline.ShadowVerdict)
				require.Equal(t, pipeline.ShadowCanceled, p.Outcome)
			}
		})
	}
}
