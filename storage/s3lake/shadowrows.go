package s3lake

import (
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// ShadowVerdictRow is one row of the shadow_verdict table. The payload's
// per-stage list is flattened into one column set per stage, NULL where the
// candidate did not run that stage, so that analysts sum and compare stages
// without unnesting.
type ShadowVerdictRow struct {
	EventID                  string    `parquet:"event_id"`
	EventType                string    `parquet:"event_type,dict"`
	OccurredAt               time.Time `parquet:"occurred_at,timestamp(millisecond)"`
	SchemaVersion            int32     `parquet:"schema_version"`
	ReceivedAt               time.Time `parquet:"received_at,timestamp(millisecond)"`
	RoomID                   string    `parquet:"room_id"`
	WindowStart              time.Time `parquet:"window_start,timestamp(millisecond)"`
	WindowEnd                time.Time `parquet:"window_end,timestamp(millisecond)"`
	PipelineVersion          string    `parquet:"pipeline_version,dict"`
	RunID                    string    `parquet:"run_id,dict"`
	Candidate                string    `parquet:"candidate,dict"`
	CandidateModel           string    `parquet:"candidate_model,optional,dict"`
	CandidatePipelineVersion string    `parquet:"candidate_pipeline_version,dict"`
	Outcome                  string    `parquet:"outcome,dict"`
	ErrorKind                string    `parquet:"error_kind,optional,dict"`
	LiveLabel                string    `parquet:"live_label,optional,dict"`
	LiveCategory             string    `parquet:"live_category,optional,dict"`
	Label                    string    `parquet:"label,optional,dict"`
	Category                 string    `parquet:"category,optional,dict"`
	Severity                 int32     `parquet:"severity"`
	Confidence               float64   `parquet:"confidence"`
	Action                   string    `parquet:"action,optional,dict"`
	EarlyExit                bool      `parquet:"early_exit"`
	TextDiffers              bool      `parquet:"text_differs"`
	LatencyMs                float64   `parquet:"latency_ms"`
	CostUSD                  float64   `parquet:"cost_usd,optional"`
	TriageTokensIn           *int32    `parquet:"triage_tokens_in,optional"`
	TriageTokensOut          *int32    `parquet:"triage_tokens_out,optional"`
	TriageLatencyMs          *float64  `parquet:"triage_latency_ms,optional"`
	ExtractTokensIn          *int32    `parquet:"extract_tokens_in,optional"`
	ExtractTokensOut         *int32    `parquet:"extract_tokens_out,optional"`
	ExtractLatencyMs         *float64  `parquet:"extract_latency_ms,optional"`
	VisionTokensIn           *int32    `parquet:"vision_tokens_in,optional"`
	VisionTokensOut          *int32    `parquet:"vision_tokens_out,optional"`
	VisionLatencyMs          *float64  `parquet:"vision_latency_ms,optional"`
	JudgeTokensIn            *int32    `parquet:"judge_tokens_in,optional"`
	JudgeTokensOut           *int32    `parquet:"judge_tokens_out,optional"`
	JudgeLatencyMs           *float64  `parquet:"judge_latency_ms,optional"`
}

// stageCols points at the column set of one stage of a row.
type stageCols struct {
	in, out **int32
	lat     **float64
}

// stageColumns returns the column sets of r in pipeline.Stages order.
func (r *ShadowVerdictRow) stageColumns() map[pipeline.StageName]stageCols {
	return map[pipeline.StageName]stageCols{
		pipeline.StageTriage:  {&r.TriageTokensIn, &r.TriageTokensOut, &r.TriageLatencyMs},
		pipeline.StageExtract: {&r.ExtractTokensIn, &r.ExtractTokensOut, &r.ExtractLatencyMs},
		pipeline.StageVision:  {&r.VisionTokensIn, &r.VisionTokensOut, &r.VisionLatencyMs},
		pipeline.StageJudge:   {&r.JudgeTokensIn, &r.JudgeTokensOut, &r.JudgeLatencyMs},
	}
}

func shadowVerdictRow(ev pipeline.LakeRecord) ShadowVerdictRow {
	p := ev.Payload.(pipeline.ShadowVerdict)
	r := ShadowVerdictRow{
		EventID: ev.EventID, EventType: string(ev.EventType), OccurredAt: ms(ev.OccurredAt),
		SchemaVersion: int32(ev.SchemaVersion), ReceivedAt: ms(ev.ReceivedAt),
		RoomID: p.RoomID, WindowStart: ms(p.WindowStart), WindowEnd: ms(p.WindowEnd),
		PipelineVersion: p.PipelineVersion, RunID: p.RunID, Candidate: p.Candidate, CandidateModel: p.CandidateModel,
		CandidatePipelineVersion: p.CandidatePipelineVersion, Outcome: p.Outcome, ErrorKind: p.ErrorKind,
		LiveLabel: string(p.LiveLabel), LiveCategory: string(p.LiveCategory), Label: string(p.Label),
		Category: string(p.Category), Severity: int32(p.Severity), Confidence: p.Confidence, Action: string(p.Action),
		EarlyExit: p.EarlyExit, TextDiffers: p.TextDiffers, LatencyMs: p.LatencyMs, CostUSD: p.CostUSD,
	}
	cols := r.stageColumns()
	for _, s := range p.Stages {
		c := cols[s.Stage] // the decoder admits known stages only
		in, out, lat := int32(s.TokensIn), int32(s.TokensOut), s.LatencyMs
		*c.in, *c.out, *c.lat = &in, &out, &lat
	}
	return r
}

// LakeEvent converts the row back to the wire envelope; the stages come
// back in pipeline order.
func (r ShadowVerdictRow) LakeEvent() pipeline.LakeEvent {
	p := pipeline.ShadowVerdict{
		RoomID: r.RoomID, WindowStart: r.WindowStart.UTC(), WindowEnd: r.WindowEnd.UTC(),
		PipelineVersion: r.PipelineVersion, RunID: r.RunID, Candidate: r.Candidate, CandidateModel: r.CandidateModel,
		CandidatePipelineVersion: r.CandidatePipelineVersion, Outcome: r.Outcome, ErrorKind: r.ErrorKind,
		LiveLabel: pipeline.Label(r.LiveLabel), LiveCategory: pipeline.Category(r.LiveCategory), Label: pipeline.Label(r.Label),
		Category: pipeline.Category(r.Category), Severity: int(r.Severity), Confidence: r.Confidence, Action: pipeline.Action(r.Action),
		EarlyExit: r.EarlyExit, TextDiffers: r.TextDiffers, LatencyMs: r.LatencyMs, CostUSD: r.CostUSD,
	}
	cols := r.stageColumns()
	for _, st := range pipeline.Stages {
		c := cols[st]
		if *c.in == nil && *c.out == nil && *c.lat == nil {
			continue
		}
		s := pipeline.ShadowStage{Stage: st}
		if *c.in != nil {
			s.TokensIn = int(**c.in)
		}
		if *c.out != nil {
			s.TokensOut = int(**c.out)
		}
		if *c.lat != nil {
			s.LatencyMs = **c.lat
		}
		p.Stages = append(p.Stages, s)
	}
	return pipeline.LakeEvent{
		EventID: r.EventID, EventType: pipeline.EventType(r.EventType), OccurredAt: r.OccurredAt.UTC(),
		SchemaVersion: int(r.SchemaVersion), Payload: p,
	}
}

func (r ShadowVerdictRow) receivedAt() time.Time { return r.ReceivedAt }
