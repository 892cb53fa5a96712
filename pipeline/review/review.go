// Package review is chatguard's stage runner: it implements
// pipeline.Reviewer by preparing a window's chat (chatprep) and running the
// stages (triage → extract → vision → judge) through the LLM router, with an
// early clean exit, answer validation against the chat, a prompt-injection
// canary, and one inference-log event per model call.
package review

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/stages"
)

// Completer is the router as the reviewer uses it; *llm.Router satisfies it.
type Completer interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
	Models() (primary, fallback string)
}

var _ Completer = (*llm.Router)(nil)

// Config tunes the reviewer. The zero value is usable.
type Config struct {
	// Prep bounds what the models see (token budget, images).
	Prep chatprep.Config
	// MaxTokens bounds each stage's answer; zero entries take defaults.
	MaxTokens map[pipeline.StageName]int
	// Class is the router class of this reviewer's calls (batch for the
	// queue; an on-demand path would build a second reviewer).
	Class llm.Class
}

// DefaultMaxTokens are the per-stage answer limits: enough for the
// schemas' largest answers with room to spare.
var DefaultMaxTokens = map[pipeline.StageName]int{
	pipeline.StageTriage:  400,
	pipeline.StageExtract: 1500,
	pipeline.StageVision:  1200,
	pipeline.StageJudge:   800,
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	errs := []error{c.Prep.Validate()}
	for st, n := range c.MaxTokens {
		if _, ok := DefaultMaxTokens[st]; !ok {
			errs = append(errs, fmt.Errorf("review: max tokens for unknown stage %q", st))
		}
		if n < 0 || n > 32000 {
			errs = append(errs, fmt.Errorf("review: max tokens %d for %s is outside 0..32000", n, st))
		}
	}
	return errors.Join(errs...)
}

// Reviewer runs the stages. It is safe for concurrent use.
type Reviewer struct {
	cfg     Config
	router  Completer
	sink    pipeline.EventSink
	version string
	m       *metrics
	now     func() time.Time
}

var _ pipeline.Reviewer = (*Reviewer)(nil)

// New builds a reviewer. sink may be nil (no inference logs); reg may be
// nil (no metrics registered). The pipeline version is fixed here from the
// prompts, schemas and the router's model names.
func New(cfg Config, router Completer, sink pipeline.EventSink, reg prometheus.Registerer) (*Reviewer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if router == nil {
		return nil, errors.New("review: router is nil")
	}
	mt := make(map[pipeline.StageName]int, len(DefaultMaxTokens))
	for st, n := range DefaultMaxTokens {
		mt[st] = n
		if v := cfg.MaxTokens[st]; v > 0 {
			mt[st] = v
		}
	}
	cfg.MaxTokens = mt
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	prim, fb := router.Models()
	return &Reviewer{cfg: cfg, router: router, sink: sink, version: stages.Fingerprint(prim, fb), m: m, now: time.Now}, nil
}

// PipelineVersion returns the short hex fingerprint of prompts, schemas and
// model names stored with every verdict.
func (r *Reviewer) PipelineVersion() string { return r.version }

// run is one review in progress.
type run struct {
	r         *Reviewer
	ev        pipeline.ReviewEvent
	w         chatprep.Window
	base      stages.PromptInput
	injection atomic.Bool
	v         *pipeline.Verdict
}

// Review implements pipeline.Reviewer. On success the verdict has Status
// done. On error the returned verdict still carries the key and the stage
// results that ran (failed stages included, with their Error), so the
// caller can store them; the error is the router's: retryable, permanent,
// or wrapping context.Cause(ctx) / the stop check's *StoppedError.
func (r *Reviewer) Review(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (pipeline.Verdict, error) {
	v := pipeline.Verdict{
		Key: ev.Key(r.version), RunID: ev.RunID, Attempts: attempt, PublishedAt: ev.PublishedAt,
		StartedAt: r.now().UTC(), Status: pipeline.StatusFailed,
	}
	w := chatprep.Prepare(msgs, r.cfg.Prep)
	r.m.observePrep(w)
	rn := &run{r: r, ev: ev, w: w, v: &v}
	rn.base = stages.PromptInput{
		Transcript: stages.FormatTranscript(w.Messages), Messages: len(w.Messages),
		Omitted: w.Cut.Messages, OmittedFrom: w.Cut.FirstID, OmittedTo: w.Cut.LastID, Shortened: w.Truncated,
		Flooded: w.Trim.Dropped, FloodUnread: w.Trim.Unread,
	}
	for _, s := range w.Signals {
		rn.base.Signals = append(rn.base.Signals, stages.SignalLine{Kind: string(s.Kind), MessageID: s.MessageID, Value: s.Value, Cut: s.Cut})
	}
	v, err := rn.stages(ctx)
	if err != nil {
		err = &cleanError{msg: cleanText(err.Error(), maxErrorRunes), err: err}
	}
	v.InjectionFlagged = rn.injection.Load()
	v.FinishedAt = r.now().UTC()
	if v.InjectionFlagged {
		r.m.injections.Inc()
	}
	switch {
	case err != nil && ctx.Err() != nil:
		r.m.reviews.WithLabelValues("canceled").Inc()
	case err != nil:
		r.m.reviews.WithLabelValues("failed").Inc()
	case v.EarlyExit:
		r.m.reviews.WithLabelValues("early_exit").Inc()
	default:
		r.m.reviews.WithLabelValues("done").Inc()
	}
	return v, err
}

func (rn *run) stages(ctx context.Context) (pipeline.Verdict, error) {
	v := rn.v
	if len(rn.w.Messages) == 0 {
		// Nothing but system noise: there is nothing a model could judge.
		rn.clean(1, "no user messages in the window")
		return *v, nil
	}
	triage, err := runStage(ctx, rn, pipeline.StageTriage, rn.base, nil, stages.ParseTriage)
	if err != nil {
		return *v, err
	}
	if triage.Risk == stages.RiskNone && len(rn.w.Signals) == 0 {
		rn.clean(0, "triage found no risk and no rule signal")
		return *v, nil
	}
	in := rn.base
	in.Findings = &stages.Findings{Triage: &triage}
	extract, err := runStage(ctx, rn, pipeline.StageExtract, in, nil, func(b []byte) (stages.ExtractOutput, error) {
		return stages.ParseExtract(b, rn.w.HasMessage)
	})
	if err != nil {
		return *v, err
	}
	in.Findings = &stages.Findings{Triage: &triage, Evidence: extract.Evidence}
	if len(rn.w.Images) > 0 {
		vin := rn.base
		vin.Findings = in.Findings
		urls := make([]string, len(rn.w.Images))
		for i, im := range rn.w.Images {
			vin.ImageIDs = append(vin.ImageIDs, im.MessageID)
			urls[i] = im.URL
		}
		vision, err := runStage(ctx, rn, pipeline.StageVision, vin, urls, func(b []byte) (stages.VisionOutput, error) {
			return stages.ParseVision(b, rn.w.HasImage)
		})
		if err != nil {
			return *v, err
		}
		in.Findings.Vision = &vision
	}
	judge, err := runStage(ctx, rn, pipeline.StageJudge, in, nil, func(b []byte) (stages.JudgeOutput, error) {
		return stages.ParseJudge(b, rn.w.HasMessage)
	})
	if err != nil {
		return *v, err
	}
	v.Status = pipeline.StatusDone
	v.Label, v.Category, v.Severity = judge.Label, judge.Category, judge.Severity
	// The rationale is model text: it may quote the chat's numbers.
	v.Confidence, v.Action, v.Rationale = judge.Confidence, judge.Action, chatprep.Redact(pipeline.ClipRunes(judge.Rationale, 500))
	v.EvidenceIDs = judge.EvidenceIDs
	if v.EvidenceIDs == nil {
		v.EvidenceIDs = []string{}
	}
	return *v, nil
}

// clean ends the review early with a clean verdict. confidence 0 takes
// triage's implicit confidence.
func (rn *run) clean(confidence float64, why string) {
	if confidence == 0 {
		confidence = triageCleanConfidence
	}
	v := rn.v
	v.Status = pipeline.StatusDone
	v.Label, v.Category, v.Severity, v.Action = pipeline.LabelClean, pipeline.CategoryClean, 1, pipeline.ActionNone
	v.Confidence = confidence
	v.Rationale = "early exit: " + why
	v.EvidenceIDs = []string{}
	v.EarlyExit = true
}

// triageCleanConfidence is the confidence of an early clean exit: triage
// has no confidence field, and a text-only first look with no rule signal
// is strong but not final evidence.
const triageCleanConfidence = 0.8

// runStage makes one stage call, records its StageResult on the verdict
// and returns the parsed answer.
func runStage[T any](ctx context.Context, rn *run, stage pipeline.StageName, in stages.PromptInput, imageURLs []string, parse func([]byte) (T, error)) (T, error) {
	var out T
	if err := pipeline.CheckStop(ctx); err != nil {
		return out, fmt.Errorf("%s: %w", stage, err)
	}
	if err := context.Cause(ctx); err != nil {
		return out, fmt.Errorf("%s: %w", stage, err)
	}
	user, err := stages.UserPrompt(stage, in)
	if err != nil {
		return out, pipeline.Permanent(err)
	}
	sys := stages.SystemPrompt(stage)
	ph := sha256.New()
	ph.Write([]byte(sys))
	ph.Write([]byte{0})
	ph.Write([]byte(user))
	for _, u := range imageURLs {
		ph.Write([]byte{0})
		ph.Write([]byte(u))
	}
	prompt := promptFacts{sha: hex.EncodeToString(ph.Sum(nil)), chars: utf8.RuneCountInString(sys) + utf8.RuneCountInString(user), images: len(imageURLs)}

	req := llm.Request{
		Stage: stage,
		Class: rn.r.cfg.Class,
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Text: sys},
			{Role: llm.RoleUser, Text: user, ImageURLs: imageURLs},
		},
		Schema:    stages.Schema(stage),
		MaxTokens: rn.r.cfg.MaxTokens[stage],
		Validate: func(b []byte) error {
			o, err := parse(b)
			if errors.Is(err, stages.ErrCanary) {
				rn.injection.Store(true)
			}
			if err == nil {
				out = o
			}
			return err
		},
		Repair: repairMessages,
		OnAttempt: func(a llm.Attempt) {
			rn.publish(stage, a, prompt)
		},
	}
	resp, err := rn.r.router.Complete(ctx, req)
	res := pipeline.StageResult{
		Stage: stage, Pool: resp.Pool, Model: resp.Model, Attempts: resp.Attempts, TTFT: resp.TTFT,
		Latency: resp.Latency, TokensIn: resp.TokensIn, TokensOut: resp.TokensOut,
	}
	if err != nil {
		res.Error = cleanText(err.Error(), 1000)
		rn.v.Stages = append(rn.v.Stages, res)
		return out, err
	}
	res.Output = []byte(redactOutput(stage, resp.Content))
	rn.v.Stages = append(rn.v.Stages, res)
	return out, nil
}

// repairMessages asks once more after an invalid or truncated answer. A
// truncated answer is not echoed back: it would only eat the budget again.
func repairMessages(content []byte, problem error) []llm.Message {
	if errors.Is(problem, llm.ErrTruncated) {
		return []llm.Message{{Role: llm.RoleUser, Text: stages.RepairPrompt("it was cut off at the length limit", true)}}
	}
	why := "it is not valid JSON for the schema"
	var ie *stages.InvalidAnswerError
	if errors.As(problem, &ie) {
		why = ie.Problem
	}
	return []llm.Message{
		{Role: llm.RoleAssistant, Text: string(content)},
		{Role: llm.RoleUser, Text: stages.RepairPrompt(why, false)},
	}
}

type promptFacts struct {
	sha    string
	chars  int
	images int
}

// publish sends one inference-log event for an attempt. The event holds no
// chat text: a prompt hash and sizes, and the validated answer redacted.
func (rn *run) publish(stage pipeline.StageName, a llm.Attempt, p promptFacts) {
	if rn.r.sink == nil {
		return
	}
	outcome := "error"
	switch a.Outcome {
	case llm.OutcomeOK:
		outcome = "ok"
	case llm.OutcomeInvalid, llm.OutcomeTruncated:
		outcome = "invalid"
	case llm.OutcomeCanceled:
		outcome = "canceled"
	}
	log := pipeline.InferenceLog{
		RoomID: rn.ev.RoomID, WindowStart: rn.ev.WindowStart.UTC(), WindowEnd: rn.ev.WindowEnd.UTC(),
		PipelineVersion: rn.r.version, RunID: rn.ev.RunID, Stage: stage, Pool: a.Pool, Model: a.Model,
		Attempt: a.N, Outcome: outcome,
		TTFTMillis: ms(a.TTFT), LatencyMs: ms(a.Latency), TokensIn: a.TokensIn, TokensOut: a.TokensOut,
		PromptSHA256: p.sha, PromptChars: p.chars, Messages: len(rn.w.Messages), Images: p.images,
	}
	if a.Outcome != llm.OutcomeOK {
		log.ErrorKind = a.Outcome
		if errors.Is(a.Err, stages.ErrCanary) {
			log.ErrorKind = "canary"
		}
	} else {
		log.Output = redactOutput(stage, a.Content)
	}
	ev := pipeline.LakeEvent{
		EventID: uuid.NewString(), EventType: pipeline.EventInferenceLog, OccurredAt: rn.r.now().UTC(),
		SchemaVersion: pipeline.LakeEventSchemaVersion, Payload: log,
	}
	if !rn.r.sink.Publish(ev) {
		rn.r.m.eventsDropped.Inc()
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cleanText bounds a text that may carry model or server output (an
// error's message quotes what a pool answered) and masks any contact
// detail in it, before it reaches MySQL, the lake or a log.
func cleanText(s string, n int) string {
	return chatprep.Redact(pipeline.ClipRunes(s, n))
}

// cleanError is an error whose text was cleaned (cleanText) while the
// chain below it still answers errors.Is and errors.As.
type cleanError struct {
	msg string
	err error
}

func (e *cleanError) Error() string { return e.msg }
func (e *cleanError) Unwrap() error { return e.err }

// maxErrorRunes bounds the text of an error Review returns; the job loop
// stores it as the verdict's error.
const maxErrorRunes = 2000
