package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/eval/stats"
)

var shadowT0 = time.Date(2026, 11, 2, 19, 0, 0, 0, time.UTC)

// shadowRec is candidate's answer on room's window, the live path having
// said live.
func shadowRec(room, candidate string, live, cand pipeline.Label, cat pipeline.Category) ShadowRecord {
	r := ShadowRecord{OccurredAt: shadowT0.Add(time.Hour), ReceivedAt: shadowT0.Add(time.Hour + time.Second)}
	r.ShadowVerdict = pipeline.ShadowVerdict{RoomID: room, WindowStart: shadowT0, WindowEnd: shadowT0.Add(time.Hour),
		PipelineVersion: "live-v1", Candidate: candidate, CandidateModel: "cand-model", CandidatePipelineVersion: "cand-v1",
		Outcome: pipeline.ShadowOK, LiveLabel: live, Label: cand, LatencyMs: 100, CostUSD: 0.001}
	if live != pipeline.LabelClean {
		r.LiveCategory = cat
	}
	if cand != pipeline.LabelClean {
		r.Category = cat
	}
	r.EventID = pipeline.ShadowVerdictEventID(r.Key(), candidate)
	return r
}

func TestPairShadowKeepsTheLatestCopyAndSetsAsideWhatCannotBeCompared(t *testing.T) {
	t.Parallel()
	a := shadowRec("r1", "big", pipeline.LabelAbusive, pipeline.LabelClean, pipeline.CategoryPhishingLink)
	rerun := a
	rerun.OccurredAt = a.OccurredAt.Add(time.Minute) // the same live review shadowed again: same id, later
	rerun.Label, rerun.Category = pipeline.LabelAbusive, pipeline.CategoryPhishingLink
	copyOfRerun := rerun
	copyOfRerun.ReceivedAt = rerun.ReceivedAt.Add(-time.Hour) // an earlier-received copy loses the tie
	copyOfRerun.Label = pipeline.LabelSuspicious
	noLive := shadowRec("r2", "big", "", pipeline.LabelClean, "")
	canceled := shadowRec("r3", "big", pipeline.LabelClean, "", "")
	canceled.Outcome = pipeline.ShadowCanceled
	failed := shadowRec("r4", "big", pipeline.LabelAbusive, "", pipeline.CategorySpam)
	failed.Outcome, failed.ErrorKind, failed.TextDiffers = pipeline.ShadowError, "timeout", true
	other := shadowRec("r1", "small", pipeline.LabelAbusive, pipeline.LabelAbusive, pipeline.CategoryPhishingLink)

	set := PairShadow([]ShadowRecord{copyOfRerun, a, noLive, rerun, canceled, failed, other})
	require.Equal(t, 7, set.Events)
	require.Equal(t, 2, set.Superseded, "three copies of one event id are one review")
	require.Len(t, set.Candidates, 2, "two candidates on one review stay two")
	big := set.Candidates[0]
	require.Equal(t, "big", big.Name)
	require.Equal(t, 4, big.Shadowed)
	require.Equal(t, []int{1, 1, 1, 1}, []int{big.Answered, big.Errors, big.Canceled, big.NoLive})
	require.Len(t, big.Pairs, 2, "the answered one and the failed one are compared")
	require.Equal(t, "r1", big.Pairs[0].RoomID)
	require.Equal(t, pipeline.LabelAbusive, big.Pairs[0].Label, "the latest answer stands, not the earlier-received copy")
	require.Equal(t, 1, big.TextDiffers)
	require.Equal(t, []string{"cand-model"}, big.Models)
	require.Equal(t, []string{"live-v1"}, big.LiveVersions)
	require.Equal(t, rerun.OccurredAt, set.Last)
}

func TestLatestDecisionsKeepsTheLastAndCountsAll(t *testing.T) {
	t.Parallel()
	k := shadowRec("r1", "c", pipeline.LabelAbusive, pipeline.LabelAbusive, pipeline.CategorySpam).Key()
	ds := LatestDecisions([]Decision{
		{Key: k, DecidedLabel: pipeline.LabelAbusive, DecidedAt: shadowT0.Add(2 * time.Hour)},
		{Key: k, DecidedLabel: pipeline.LabelClean, DecidedAt: shadowT0.Add(time.Hour)},
	})
	require.Len(t, ds, 1)
	require.Equal(t, pipeline.LabelAbusive, ds[k].DecidedLabel)
	require.Equal(t, 2, ds[k].Decisions)
}

// shadowFixture is 40 rooms: the live path flags 20 (phishing links), the
// candidate keeps 16 of them and flags 2 of the 20 the live path did not;
// half the candidate's reviews saw pseudonymised text, all four dropped
// flags among them. Moderators decided 10 windows.
func shadowFixture() ([]ShadowRecord, []Decision) {
	var recs []ShadowRecord
	var ds []Decision
	for i := range 40 {
		live, cand := pipeline.LabelClean, pipeline.LabelClean
		if i < 20 {
			live, cand = pipeline.LabelAbusive, pipeline.LabelAbusive
		}
		if i < 4 || i == 20 || i == 21 {
			cand = map[pipeline.Label]pipeline.Label{pipeline.LabelAbusive: pipeline.LabelClean, pipeline.LabelClean: pipeline.LabelSuspicious}[live]
		}
		r := shadowRec(fmt.Sprintf("room-%02d", i), "cand", live, cand, pipeline.CategoryPhishingLink)
		r.TextDiffers = i%2 == 0 || i < 4
		recs = append(recs, r)
		if i%4 == 0 && i < 40 {
			// Moderators uphold every live flag and confirm the
			// candidate's extra flag (room 20).
			decided := live
			if i == 20 {
				decided = pipeline.LabelAbusive
			}
			ds = append(ds, Decision{Key: r.Key(), DecidedLabel: decided, DecidedCategory: pipeline.CategoryPhishingLink, DecidedAt: shadowT0.Add(3 * time.Hour)})
		}
	}
	return recs, ds
}

func TestSummariseShadowComparesWithTheLivePathAndWithModerators(t *testing.T) {
	t.Parallel()
	recs, ds := shadowFixture()
	set := PairShadow(recs)
	cfg := ShadowConfig{MaxRecallLoss: Margins{Default: 0.05}, Seed: 1}
	s := SummariseShadow(set, LatestDecisions(ds), cfg)

	require.Len(t, s.Agreement, 2, "overall and phishing_link")
	o := s.Agreement[0]
	require.Equal(t, "overall", o.Category)
	require.Equal(t, 20, o.Positives)
	require.Equal(t, 4, o.B, "live flags the candidate dropped")
	require.Equal(t, 2, o.C, "flags only the candidate made")
	require.InDelta(t, 0.8, o.Cand.Recall(), 1e-9, "kept")
	require.InDelta(t, 16.0/18, o.Cand.Precision(), 1e-9, "confirmed")
	require.InDelta(t, 0.1, o.Decision.Loss, 1e-9, "4 dropped less 2 added, of 20")
	require.Greater(t, o.Decision.CI.Hi, 0.2, "no lower than the dropped flags alone allow")
	require.NotEqual(t, stats.NoLossBeyondMargin, o.Decision.Outcome, "20 points dropped is not within 5")
	require.NotEqual(t, stats.LossDetected, o.Decision.Outcome, "4 against 2 is not a significant drop in flagging")

	require.Len(t, s.ByText, 2)
	require.Equal(t, TextSame, s.ByText[0].Text)
	require.Zero(t, s.ByText[0].B, "no flag dropped on the same text")
	require.Equal(t, 4, s.ByText[1].B, "every dropped flag was on pseudonymised text")

	require.Equal(t, TextAll, s.Flips[0].Text)
	require.Equal(t, 40, s.Flips[0].Cases)
	require.Equal(t, 6, s.Flips[0].Flipped)
	require.Greater(t, s.Flips[0].Kappa, 0.5)

	require.Equal(t, 10, s.Decided["cand"])
	m := s.Moderated[0]
	require.Equal(t, "overall", m.Category)
	require.Equal(t, 6, m.Positives, "rooms 0,4,8,12,16 flagged by both decisions and 20 decided abusive")
	require.Equal(t, 5.0/6, m.Ref.Recall(), "the live path missed room 20")
	require.Equal(t, 1, m.B, "room 0: the candidate dropped it")
	require.Equal(t, 1, m.C, "room 20: the candidate caught it")
}

func TestSummariseShadowDetectsACandidateThatFlagsLess(t *testing.T) {
	t.Parallel()
	var recs []ShadowRecord
	for i := range 60 {
		cand := pipeline.LabelAbusive
		if i%3 == 0 {
			cand = pipeline.LabelClean
		}
		recs = append(recs, shadowRec(fmt.Sprint("room-", i), "lenient", pipeline.LabelAbusive, cand, pipeline.CategorySpam))
	}
	s := SummariseShadow(PairShadow(recs), nil, ShadowConfig{MaxRecallLoss: Margins{Default: 0.01}, Seed: 1})
	require.Equal(t, stats.LossDetected, s.Agreement[0].Decision.Outcome)
	require.Empty(t, s.Moderated)
}

func TestWriteShadowReportSaysWhatItIsMeasuredAgainst(t *testing.T) {
	t.Parallel()
	recs, ds := shadowFixture()
	set := PairShadow(recs)
	cfg := ShadowConfig{MaxRecallLoss: Margins{Default: 0.05}, Seed: 1}
	var buf bytes.Buffer
	require.NoError(t, WriteShadowReport(&buf, set, SummariseShadow(set, LatestDecisions(ds), cfg), cfg,
		ShadowReportOptions{Source: "fixture", Command: "worker eval shadow --shadow-events x"}))
	out := buf.String()
	for _, want := range []string{
		"*agreement with the live path, not recall*",
		"Source: fixture. 40 shadow events, 0 of them",
		"| cand | cand-model | cand-v1 | live-v1 | 40 | 40 | 0 | 0 | 0 | 40 | 22 |",
		"- cand, **overall**: **inconclusive**",
		"| cand | overall | pseudonymised text |",
		"| live | cand | all | 40 | 6 | 15.0% |",
		"## Against moderators' decisions",
		"| cand | overall | 6 | 83.3 [40.3, 97.4] | 83.3 [40.3, 97.4] |",
		"worker eval shadow --shadow-events x",
	} {
		require.Contains(t, out, want)
	}

	set = PairShadow(recs[:3])
	buf.Reset()
	require.NoError(t, WriteShadowReport(&buf, set, SummariseShadow(set, nil, cfg), cfg, ShadowReportOptions{Source: "fixture"}))
	require.Contains(t, buf.String(), "No compared window has a moderator's decision (cand 0)")
}

func TestReadShadowExportReadsShadowAndModeratorEvents(t *testing.T) {
	t.Parallel()
	r := shadowRec("r1", "cand", pipeline.LabelAbusive, pipeline.LabelClean, pipeline.CategorySpam)
	line := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	shadow := line(pipeline.LakeEvent{EventID: r.EventID, EventType: pipeline.EventShadowVerdict, OccurredAt: r.OccurredAt, SchemaVersion: 1, Payload: r.ShadowVerdict})
	fb := line(pipeline.LakeEvent{EventID: "e2", EventType: pipeline.EventModeratorFeedback, OccurredAt: shadowT0.Add(5 * time.Hour), SchemaVersion: 1,
		Payload: pipeline.ModeratorFeedback{RoomID: "r1", WindowStart: r.WindowStart, WindowEnd: r.WindowEnd, PipelineVersion: "live-v1",
			VerdictLabel: pipeline.LabelAbusive, DecidedLabel: pipeline.LabelClean}})
	recs, ds, err := ReadShadowExport(strings.NewReader(shadow + "\n\nnot json\n" + fb + "\n"))
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, r.EventID, recs[0].EventID)
	require.Equal(t, r.ShadowVerdict, recs[0].ShadowVerdict)
	require.Len(t, ds, 1)
	require.Equal(t, r.Key(), ds[0].Key)
	require.Equal(t, pipeline.LabelClean, ds[0].DecidedLabel)

	_, _, err = ReadShadowExport(strings.NewReader(`{"event_type":"shadow_verdict","payload":{"room_id":"x"}}`))
	require.ErrorContains(t, err, "line 1")
	require.ErrorContains(t, err, "event_id is missing")
}

func TestParseShadowRowsReadsTheQuerysColumns(t *testing.T) {
	t.Parallel()
	row := []string{"id-1", "2026-11-02 20:00:00.000", "2026-11-02 20:00:01.000", "r1", "2026-11-02 19:00:00.000", "2026-11-02 20:00:00.000",
		"live-v1", "cand", "m", "cand-v1", "error", "timeout", "abusive", "spam", "", "", "true", "", ""}
	recs, err := ParseShadowRows([][]string{shadowColumns, row})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, pipeline.ShadowError, recs[0].Outcome)
	require.True(t, recs[0].TextDiffers)
	require.Equal(t, shadowT0, recs[0].WindowStart)
	_, err = ParseShadowRows([][]string{{"room_id"}})
	require.ErrorContains(t, err, "want the columns")
	bad := append([]string(nil), row...)
	bad[1], bad[17] = "yesterday", "fast"
	_, err = ParseShadowRows([][]string{shadowColumns, bad})
	require.ErrorContains(t, err, "row 1")
	require.ErrorContains(t, err, "yesterday")
	require.ErrorContains(t, err, "fast")
}
