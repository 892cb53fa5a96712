// Package s3laketest gives tests of the lake realistic lake events and
// reads a lake back. Tests that need S3 itself use the local stack's
// (internal/stacktest.NewBucket).
package s3laketest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// Events returns n lake events of mixed types spread over hours hours
// starting at start, deterministic for a seed. Times carry whole
// milliseconds so that they survive the lake's millisecond timestamps.
func Events(n int, seed uint64, start time.Time, hours int) []pipeline.LakeEvent {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]pipeline.LakeEvent, n)
	labels := []pipeline.Label{pipeline.LabelAbusive, pipeline.LabelSuspicious, pipeline.LabelClean}
	cats := append([]pipeline.Category{pipeline.CategoryClean}, pipeline.AbuseCategories...)
	actions := []pipeline.Action{pipeline.ActionNone, pipeline.ActionWarn, pipeline.ActionRestrict, pipeline.ActionBan}
	for i := range out {
		occurred := start.UTC().Add(time.Duration(r.Int64N(int64(hours) * int64(time.Hour)))).Truncate(time.Millisecond)
		ws := occurred.Truncate(time.Hour).Add(-time.Hour)
		we := ws.Add(time.Hour)
		room := fmt.Sprintf("room-%05d", r.IntN(5000))
		var id [16]byte
		for j := range id {
			id[j] = byte(r.UintN(256))
		}
		ev := pipeline.LakeEvent{
			EventID:       uuid.Must(uuid.FromBytes(id[:])).String(),
			OccurredAt:    occurred,
			SchemaVersion: pipeline.LakeEventSchemaVersion,
		}
		switch i % 3 {
		case 0:
			ev.EventType = pipeline.EventInferenceLog
			ev.Payload = inferenceLog(r, room, ws, we, cats)
		case 1:
			ev.EventType = pipeline.EventModeratorFeedback
			ev.Payload = pipeline.ModeratorFeedback{
				RoomID: room, WindowStart: ws, WindowEnd: we, PipelineVersion: "v1.2.0", ModeratorID: fmt.Sprintf("mod-%02d", r.IntN(30)),
				VerdictLabel: labels[r.IntN(3)], VerdictCategory: cats[r.IntN(len(cats))],
				DecidedLabel: labels[r.IntN(3)], DecidedCategory: cats[r.IntN(len(cats))], ActionTaken: actions[r.IntN(4)],
			}
		default:
			ev.EventType = pipeline.EventVerdict
			v := pipeline.VerdictEvent{
				RoomID: room, WindowStart: ws, WindowEnd: we, PipelineVersion: "v1.2.0", RunID: "run-" + ws.Format("2006010215"),
				Status: pipeline.StatusDone, Label: labels[r.IntN(3)], Category: cats[r.IntN(len(cats))], Severity: r.IntN(6),
				Confidence: float64(r.IntN(1001)) / 1000, Action: actions[r.IntN(4)], EarlyExit: r.IntN(2) == 0,
				FallbackUsed: r.IntN(8) == 0, Attempts: 1 + r.IntN(4), LatencyMs: float64(r.IntN(60000)),
			}
			ev.Payload = verdictExtras(v, i)
		}
		out[i] = ev
	}
	return out
}

// inferenceLog draws an inference_log payload of room's window from r.
func inferenceLog(r *rand.Rand, room string, ws, we time.Time, cats []pipeline.Category) pipeline.InferenceLog {
	stage := pipeline.Stages[r.IntN(len(pipeline.Stages))]
	pool := pipeline.PoolPrimary
	if r.IntN(10) == 0 {
		pool = pipeline.PoolFallback
	}
	outcome, errKind, output := "ok", "", fmt.Sprintf(`{"risk":"%s","categories":["%s"]}`, []string{"none", "low", "high"}[r.IntN(3)], cats[r.IntN(len(cats))])
	if r.IntN(20) == 0 {
		outcome, errKind, output = "error", "timeout", ""
	}
	p := pipeline.InferenceLog{
		RoomID: room, WindowStart: ws, WindowEnd: we, PipelineVersion: "v1.2.0", RunID: "run-" + ws.Format("2006010215"),
		Stage: stage, Pool: pool, Model: "qwen2.5-32b-instruct", Attempt: 1 + r.IntN(3), Outcome: outcome, ErrorKind: errKind,
		TTFTMillis: float64(r.IntN(2000)) + 0.5, LatencyMs: float64(r.IntN(20000)) + 0.25, TokensIn: r.IntN(8000), TokensOut: r.IntN(500),
		PromptSHA256: fmt.Sprintf("%064x", r.Uint64()), PromptChars: r.IntN(30000), Messages: r.IntN(80), Images: r.IntN(3), Output: output,
	}
	// Token accounting, derived (not drawn) so the stream of random
	// values, and every other field, stays as it was.
	if p.Stage != pipeline.StageTriage {
		p.TokensCached = p.TokensIn * 9 / 10
	}
	p.CostUSD = float64(p.TokensIn-p.TokensCached)*0.15/1e6 + float64(p.TokensCached)*0.075/1e6 + float64(p.TokensOut)*0.6/1e6
	return p
}

// verdictExtras adds to the i-th event's verdict its subjects, campaign
// signals and account history, derived from i, not drawn, so the other
// fields stay as they were.
func verdictExtras(v pipeline.VerdictEvent, i int) pipeline.VerdictEvent {
	if (i/3)%2 == 0 {
		// Every other verdict has subjects, as keyed pseudonyms.
		v.Subjects = []string{fmt.Sprintf("hmac:%024x", i), fmt.Sprintf("hmac:%024x", i+1)}
	}
	if i%5 == 2 {
		// Some verdicts carry campaign signals.
		v.Campaigns = []pipeline.VerdictCampaign{{Kind: pipeline.CampaignScript, Mark: fmt.Sprintf("hmac:%024x", i*7), Rooms: 5 + i%40, Senders: 1 + i%3}}
	}
	if h := i % 7; h == 2 || h == 5 {
		// Some verdicts record the account history their review was
		// shown (one with lines, one that timed out).
		v.AccountHistory = &pipeline.HistorySeen{Status: pipeline.HistoryTimeout, Days: 30}
		if h == 2 {
			v.AccountHistory = &pipeline.HistorySeen{Status: pipeline.HistoryOK, Days: 30, Lines: []pipeline.HistoryCount{
				{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Rooms: 1 + i%9},
				{Role: pipeline.RoleSeller, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Overturned: true, Rooms: 1},
			}}
		}
	}
	return v
}

// ShadowEvents returns n shadow_verdict events spread over hours hours
// starting at start, deterministic for a seed: a candidate that mostly
// agrees with the live label, sometimes fails, sometimes saw pseudonymised
// text, and ran a varying set of stages. They are apart from Events so
// that the mix of the three older types stays what their tests expect.
func ShadowEvents(n int, seed uint64, start time.Time, hours int) []pipeline.LakeEvent {
	r := rand.New(rand.NewPCG(seed, seed^0x51ed27f0a3c4b6d9))
	labels := []pipeline.Label{pipeline.LabelAbusive, pipeline.LabelSuspicious, pipeline.LabelClean}
	cats := append([]pipeline.Category{pipeline.CategoryClean}, pipeline.AbuseCategories...)
	out := make([]pipeline.LakeEvent, n)
	for i := range out {
		occurred := start.UTC().Add(time.Duration(r.Int64N(int64(hours) * int64(time.Hour)))).Truncate(time.Millisecond)
		ws := occurred.Truncate(time.Hour).Add(-time.Hour)
		// One room per event: ids derive from the review key and candidate.
		key := pipeline.ReviewKey{RoomID: fmt.Sprintf("shadow-room-%05d", i), WindowStart: ws, WindowEnd: ws.Add(time.Hour), PipelineVersion: "v1.2.0"}
		candidate := []string{"vllm-qwen3-32b", "managed-large"}[i%2]
		p := pipeline.ShadowVerdict{
			RoomID: key.RoomID, WindowStart: key.WindowStart, WindowEnd: key.WindowEnd, PipelineVersion: key.PipelineVersion,
			RunID: "run-" + ws.Format("2006010215"), Candidate: candidate, CandidateModel: candidate + "-instruct",
			CandidatePipelineVersion: "v1.3.0-rc1", Outcome: pipeline.ShadowOK,
			LiveLabel: labels[r.IntN(3)], LiveCategory: cats[r.IntN(len(cats))],
			TextDiffers: candidate == "managed-large", LatencyMs: float64(r.IntN(30000)) + 0.5,
		}
		p.Label, p.Category = p.LiveLabel, p.LiveCategory
		if r.IntN(5) == 0 {
			p.Label, p.Category = labels[r.IntN(3)], cats[r.IntN(len(cats))]
		}
		p.Severity, p.Confidence, p.Action, p.EarlyExit = r.IntN(6), float64(r.IntN(1001))/1000, pipeline.ActionWarn, p.Label == pipeline.LabelClean
		for _, st := range pipeline.Stages[:1+r.IntN(len(pipeline.Stages))] {
			in, outTok := r.IntN(8000), r.IntN(500)
			p.Stages = append(p.Stages, pipeline.ShadowStage{Stage: st, TokensIn: in, TokensOut: outTok, LatencyMs: float64(r.IntN(5000)) + 0.25})
			p.CostUSD += float64(in)*0.15/1e6 + float64(outTok)*0.6/1e6
		}
		if r.IntN(15) == 0 {
			p.Outcome, p.ErrorKind = pipeline.ShadowError, "timeout"
			p.Label, p.Category, p.Severity, p.Confidence, p.Action, p.EarlyExit = "", "", 0, 0, "", false
		}
		out[i] = pipeline.LakeEvent{
			EventID: pipeline.ShadowVerdictEventID(key, candidate), EventType: pipeline.EventShadowVerdict,
			OccurredAt: occurred, SchemaVersion: pipeline.LakeEventSchemaVersion, Payload: p,
		}
	}
	return out
}

// Body returns the JSON queue body of ev, failing t on error.
func Body(t testing.TB, ev pipeline.LakeEvent) []byte {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatalf("s3laketest: marshal: %v", err)
	}
	return b
}

// Lake is what ReadLake reads from: s3lake.Store or an in-memory map.
type Lake interface {
	List(ctx context.Context, prefix string) ([]string, error)
	Get(ctx context.Context, key string) ([]byte, error)
}

// Contents is a lake read back: every row as its wire envelope (with
// duplicates), the key of each row, and every error line.
type Contents struct {
	Events []pipeline.LakeEvent
	Keys   []string
	Errors []pipeline.LakeErrorLine
	// Objects counts the objects read.
	Objects int
}

// ByID indexes the events by event id and counts copies of each.
func (c Contents) ByID() (map[string]pipeline.LakeEvent, map[string]int) {
	byID, copies := map[string]pipeline.LakeEvent{}, map[string]int{}
	for _, ev := range c.Events {
		byID[ev.EventID] = ev
		copies[ev.EventID]++
	}
	return byID, copies
}

// ReadLake reads every Parquet object under eventsPrefix and every errors
// object under errorsPrefix. It fails when an object is not where its rows
// belong: a key must be <eventsPrefix>event_type=<t>/dt=<day>/hour=<hh>/
// with t, day and hour those of each row's occurred_at.
func ReadLake(ctx context.Context, lake Lake, eventsPrefix, errorsPrefix string) (Contents, error) {
	var out Contents
	keys, err := lake.List(ctx, eventsPrefix)
	if err != nil {
		return out, err
	}
	for _, key := range keys {
		data, err := lake.Get(ctx, key)
		if err != nil {
			return out, err
		}
		out.Objects++
		rest := strings.TrimPrefix(key, eventsPrefix)
		typ, _, _ := strings.Cut(strings.TrimPrefix(rest, "event_type="), "/")
		var evs []pipeline.LakeEvent
		switch pipeline.EventType(typ) {
		case pipeline.EventInferenceLog:
			evs, err = rowsOf(data, s3lake.InferenceLogRow.LakeEvent)
		case pipeline.EventModeratorFeedback:
			evs, err = rowsOf(data, s3lake.ModeratorFeedbackRow.LakeEvent)
		case pipeline.EventVerdict:
			evs, err = rowsOf(data, s3lake.VerdictRow.LakeEvent)
		case pipeline.EventShadowVerdict:
			evs, err = rowsOf(data, s3lake.ShadowVerdictRow.LakeEvent)
		case pipeline.EventProtectiveAction:
			evs, err = rowsOf(data, s3lake.ActionRow.LakeEvent)
		default:
			return out, fmt.Errorf("object %s is not under an event_type partition", key)
		}
		if err != nil {
			return out, fmt.Errorf("object %s: %w", key, err)
		}
		for _, ev := range evs {
			want := eventsPrefix + s3lake.PartitionPath(ev.EventType, pipeline.LakeHour(ev.OccurredAt))
			if !strings.HasPrefix(key, want) {
				return out, fmt.Errorf("event %s of %s at %s is in %s, want %s", ev.EventID, ev.EventType, ev.OccurredAt, key, want)
			}
			out.Events = append(out.Events, ev)
			out.Keys = append(out.Keys, key)
		}
	}
	if errorsPrefix == "" {
		return out, nil
	}
	keys, err = lake.List(ctx, errorsPrefix)
	if err != nil {
		return out, err
	}
	for _, key := range keys {
		data, err := lake.Get(ctx, key)
		if err != nil {
			return out, err
		}
		lines, err := s3lake.DecodeErrors(data)
		if err != nil {
			return out, fmt.Errorf("object %s: %w", key, err)
		}
		out.Errors = append(out.Errors, lines...)
	}
	return out, nil
}

func rowsOf[T any](data []byte, conv func(T) pipeline.LakeEvent) ([]pipeline.LakeEvent, error) {
	rows, err := s3lake.ReadRows[T](data)
	if err != nil {
		return nil, err
	}
	out := make([]pipeline.LakeEvent, len(rows))
	for i, r := range rows {
		out[i] = conv(r)
	}
	return out, nil
}
