// Package review is chatguard's stage runner: it implements
// pipeline.Reviewer by preparing a window's chat (chatprep) and running the
// stages (triage → extract → vision → judge) through the LLM router, with an
// early clean exit, answer validation against the chat, a prompt-injection
// canary, and one inference-log event per model call.
package review

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
	"github.com/chatguard/chatguard/stages"
)

// Completer is the router as the reviewer uses it; *llm.Router satisfies it.
type Completer interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
	Models() (primary, fallback string)
}

var _ Completer = (*llm.Router)(nil)

// TokenCounter is a Completer that can ask the serving model's tokenizer
// how long a text is (*llm.Router, through vLLM's /tokenize). Without one,
// or when it fails, the reviewer keeps chatprep's estimate.
type TokenCounter interface {
	CountTokens(ctx context.Context, text string) (llm.TokenCount, error)
}

var _ TokenCounter = (*llm.Router)(nil)

// Config tunes the reviewer. The zero value is usable.
type Config struct {
	// Prep bounds what the models see (token budget, images).
	Prep chatprep.Config
	// MaxTokens bounds each stage's answer; zero entries take defaults.
	MaxTokens map[pipeline.StageName]int
	// Class is the traffic class of this reviewer's calls when the
	// review's context carries none (pipeline.WithClass): batch for the
	// queue, interactive for the console's on-demand reviews.
	Class pipeline.Class
	// Defence selects the prompt-injection defences; leave it zero.
	Defence Defence
	// Keys key every pseudonym the reviewer makes: quote digests, subject
	// pseudonyms, campaign marks (pseudonym.Resolve, from one Secret). Nil
	// uses the public development keys, labelled "hmac2-dev": for tests
	// and offline evaluation only; the binaries refuse to start without a
	// secret unless --dev-insecure-keys says so.
	Keys *pseudonym.Keys
	// LegacyPseudonyms also computes the pre-HKDF forms during the
	// transition (docs/privacy.md, "Pseudonym keys"): campaign marks are
	// counted under both, and the verdict records each legacy value beside
	// its current one (pipeline.PseudonymAlias) so that stored legacy
	// values keep matching.
	LegacyPseudonyms bool
	// Images, when set, vets every image URL before a model sees it (see
	// ImageGate); nil sends the chat's URLs as they are.
	Images ImageGate
	// History, when set, gives every review the account history of its
	// room's participants as a block of its own in the prompts (see
	// HistoryLookup); nil turns the account history off.
	History HistoryLookup
	// Campaigns, when set, counts the window's campaign marks fleet-wide
	// (keyed with Keys) and gives the campaign signals to the stages;
	// nil reviews every room on its own.
	Campaigns Campaigns
}

// Defence turns prompt-injection defences off, one by one. The zero value
// is every defence, and nothing but the injection suite (which measures
// what each changes) should set a field.
type Defence struct {
	// NoDatamark sends chat text without datamarking (stages.MarkData).
	NoDatamark bool
	// NoFloor behaves as before the defence: rule signals of injection
	// attempts are not shown or counted, an injection cannot stop an early
	// clean exit, a clean verdict stays clean, and an answer that repeats
	// the canary is retried until the stage fails.
	NoFloor bool
}

// DefaultMaxTokens are the per-stage answer limits: enough for the
// schemas' largest answers with room to spare.
var DefaultMaxTokens = map[pipeline.StageName]int{
	pipeline.StageTriage:  400,
	pipeline.StageExtract: 1500,
	pipeline.StageVision:  1200,
	pipeline.StageJudge:   800,
}

// MaxPromptSignals bounds the rule signals a prompt lists; a flooded chat
// can hold thousands. The rest are counted in the prompt.
const MaxPromptSignals = 64

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
	cm      *contextMetrics
	clock   clock.Clock
	// overhead estimates the tokens of a prompt beyond its transcript
	// (system prompt, signals, findings) plus the longest answer.
	overhead int
	// keys key quote digests and subject pseudonyms.
	keys           *pseudonym.Keys
	imagesRejected *prometheus.CounterVec
	// marker keys campaign marks.
	marker chatprep.CampaignMarker
}

var _ pipeline.Reviewer = (*Reviewer)(nil)

// New builds a reviewer. sink may be nil (no inference logs); reg may be
// nil (no metrics registered); c is the clock of the verdicts' start and
// finish times and the inference logs' event times (nil: the wall clock).
// The pipeline version is fixed here from the prompts, schemas and the
// router's model names.
func New(cfg Config, router Completer, sink pipeline.EventSink, reg prometheus.Registerer, c clock.Clock) (*Reviewer, error) {
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
	cfg.Prep = cfg.Prep.WithDefaults()
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	prim, fb := router.Models()
	overhead := 0
	for _, st := range pipeline.Stages {
		overhead = max(overhead, chatprep.EstimateTokens(stages.SystemPrompt(st))+mt[st])
	}
	// Signals (at most MaxPromptSignals lines), the account history (at
	// most MaxPromptHistoryLines) and findings come on top.
	overhead += MaxPromptSignals*24 + stages.MaxPromptHistoryLines*24 + 1500
	ir, err := newImageMetrics(reg)
	if err != nil {
		return nil, err
	}
	cm, err := newContextMetrics(reg)
	if err != nil {
		return nil, err
	}
	rv := &Reviewer{cfg: cfg, router: router, sink: sink, version: stages.Fingerprint(prim, fb), m: m, cm: cm, clock: clock.Or(c), overhead: overhead,
		keys: pseudonym.OrDev(cfg.Keys), imagesRejected: ir}
	rv.marker = chatprep.NewCampaignMarker(rv.keys, cfg.LegacyPseudonyms)
	return rv, nil
}

// PipelineVersion returns the short hex fingerprint of prompts, schemas and
// model names stored with every verdict.
func (r *Reviewer) PipelineVersion() string { return r.version }

// run is one review in progress.
type run struct {
	r *Reviewer
	// class is the traffic class of every model call of this review: the
	// one ctx carries (pipeline.WithClass), else the reviewer's.
	class pipeline.Class
	ev    pipeline.ReviewEvent
	msgs  []pipeline.ChatMessage
	prep  chatprep.Config
	w     chatprep.Window
	base  stages.PromptInput
	// injection is set when an answer repeated the canary.
	injection atomic.Bool
	v         *pipeline.Verdict
	// vetted maps image message ids to the URL the image gate admitted
	// ("" rejected); rejected lists the rejections (images.go).
	vetted   map[string]string
	rejected []RejectedImage
	// pseudonyms is this review's placeholder table for pools that
	// pseudonymize (the third-party fallback).
	pseudonyms *chatprep.Pseudonyms
	// history is what the account-history lookup answered (nil: off or
	// not asked), historyBlock its prompt block (history.go).
	history      *pipeline.HistorySeen
	historyBlock string
}

// Review implements pipeline.Reviewer. On success the verdict has Status
// done. On error the returned verdict still carries the key and the stage
// results that ran (failed stages included, with their Error), so the
// caller can store them; the error is the router's: retryable, permanent,
// or wrapping context.Cause(ctx) / the stop check's *StoppedError. Its text
// is clipped and masked (it may quote what a pool answered).
//
// A chat that tries to instruct the models (a rule signal of kind
// injection) or an answer that repeats the system prompt's canary makes the
// verdict at least suspicious, with InjectionFlagged set, and never lets
// the review end early as clean without the judge. A pool's context-length
// refusal shrinks the prompt and retries the stage once.
func (r *Reviewer) Review(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (pipeline.Verdict, error) {
	v := pipeline.Verdict{
		Key: ev.Key(r.version), RunID: ev.RunID, Attempts: attempt, PublishedAt: ev.PublishedAt,
		StartedAt: r.clock.Now().UTC(), Status: pipeline.StatusFailed,
	}
	rn := &run{r: r, class: pipeline.ClassFrom(ctx, r.cfg.Class), ev: ev, msgs: msgs, prep: r.cfg.Prep, v: &v, pseudonyms: chatprep.NewPseudonyms()}
	rn.w = rn.prepare()
	rn.v.Participants = participants(msgs)
	if len(rn.v.Participants) > pipeline.MaxParticipants {
		rn.v.Participants = rn.v.Participants[:pipeline.MaxParticipants]
	}
	rn.fit(ctx)
	rn.vetImages(ctx)
	r.m.observePrep(rn.w)
	r.cm.observe(rn.w)
	if len(rn.w.Messages) > 0 {
		rn.lookUpHistory(ctx)
	}
	rn.campaigns(ctx)
	rn.rebase()
	v, err := rn.stages(ctx)
	rn.recordHistory()
	rn.recordSignals()
	rn.recordRejected()
	v.Stages = rn.v.Stages
	if err != nil {
		err = &cleanError{msg: cleanText(rn.pseudonyms.Conceal(err.Error()), maxErrorRunes), err: err}
	}
	v.InjectionFlagged = rn.injection.Load() || (!r.cfg.Defence.NoFloor && len(rn.injections()) > 0)
	v.FinishedAt = r.clock.Now().UTC()
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

// fit asks the serving model's tokenizer how long the transcript really
// is and, when it is over the budget the estimate kept it under, prepares
// the window again with a budget scaled down by the estimate's error.
func (rn *run) fit(ctx context.Context) {
	tc, ok := rn.r.router.(TokenCounter)
	if !ok || len(rn.w.Messages) == 0 {
		rn.r.m.tokenCounts.WithLabelValues("estimate").Inc()
		return
	}
	n, err := tc.CountTokens(ctx, rn.contextBlock()+rn.transcript())
	if err != nil || n.Tokens <= 0 {
		rn.r.m.tokenCounts.WithLabelValues("estimate").Inc()
		return
	}
	rn.r.m.tokenCounts.WithLabelValues("tokenizer").Inc()
	limit := rn.prep.MaxTokens
	if n.MaxModelLen > 0 {
		// The rest of the prompt and the longest answer must fit too.
		limit = min(limit, n.MaxModelLen-rn.r.overhead)
	}
	if n.Tokens <= limit || rn.chatTokens() <= 0 {
		return
	}
	// The estimate said chatTokens, the model says n.Tokens: scale the
	// estimated budget so that the real count fits, with a margin.
	budget := int(float64(rn.chatTokens()) * float64(max(limit, 1)) / float64(n.Tokens) * 0.95)
	rn.reprepare(budget)
}

// reprepare builds the window again under an estimated token budget
// (never below chatprep's floor of 200), shortening long messages in
// proportion.
func (rn *run) reprepare(budget int) {
	budget = max(budget, 200)
	if rn.prep.MaxTokens > 0 && budget < rn.prep.MaxTokens {
		rn.prep.MaxMessageRunes = max(100, rn.prep.MaxMessageRunes*budget/rn.prep.MaxTokens)
	}
	rn.prep.MaxTokens = budget
	rn.w = rn.prepare()
	rn.applyVetted()
}

// transcript is the window's transcript block as the models see it.
func (rn *run) transcript() string {
	if rn.r.cfg.Defence.NoDatamark {
		return stages.FormatTranscript(rn.w.Messages)
	}
	return stages.FormatMarkedTranscript(rn.w.Messages)
}

// signals are the window's rule signals as the models and the early exit
// see them.
func (rn *run) signals() []chatprep.Signal {
	if !rn.r.cfg.Defence.NoFloor {
		return rn.w.Signals
	}
	var out []chatprep.Signal
	for _, s := range rn.w.Signals {
		if s.Kind != chatprep.SignalInjection {
			out = append(out, s)
		}
	}
	return out
}

// injections are the window's injection signals.
func (rn *run) injections() []chatprep.Signal {
	var out []chatprep.Signal
	for _, s := range rn.w.Signals {
		if s.Kind == chatprep.SignalInjection {
			out = append(out, s)
		}
	}
	return out
}

// rebase builds the stages' common prompt input from the window.
func (rn *run) rebase() {
	w := rn.w
	rn.base = stages.PromptInput{
		Transcript: rn.transcript(), Messages: len(w.Messages),
		Omitted: w.Cut.Messages, OmittedFrom: w.Cut.FirstID, OmittedTo: w.Cut.LastID, Shortened: w.Truncated,
		Flooded: w.Trim.Dropped, FloodUnread: w.Trim.Unread, History: rn.historyBlock,
	}
	rn.withContext(&rn.base)
	sigs := slices.Clone(rn.signals())
	// Injection attempts first, then what the models can see, then what
	// was cut: if the list must be shortened, the end goes.
	rank := func(s chatprep.Signal) int {
		switch {
		case s.Kind == chatprep.SignalInjection:
			return 0
		case !s.Cut:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(sigs, func(a, b chatprep.Signal) int { return rank(a) - rank(b) })
	// Campaign signals come first and are never cut (at most
	// pipeline.MaxCampaigns of them).
	rn.base.Signals = rn.campaignSignals()
	if room := MaxPromptSignals - len(rn.base.Signals); len(sigs) > room {
		rn.base.SignalsOmitted = len(sigs) - room
		sigs = sigs[:room]
	}
	for _, s := range sigs {
		rn.base.Signals = append(rn.base.Signals, stages.SignalLine{Kind: string(s.Kind), MessageID: s.MessageID, Value: s.Value, Cut: s.Cut})
	}
}

// withBase returns in with its window-derived fields taken from the
// current base (after a shrink), keeping the findings.
func (rn *run) withBase(in stages.PromptInput) stages.PromptInput {
	out := rn.base
	out.Findings = in.Findings
	if len(in.ImageIDs) > 0 {
		for _, im := range rn.w.Images {
			out.ImageIDs = append(out.ImageIDs, im.MessageID)
		}
	}
	return out
}

// shrink prepares a smaller window after a pool refused a stage's prompt
// for its length (each stage retries once): by what the pool said is too
// much, with a margin, and at least by half. It reports false when the
// window cannot get smaller.
func (rn *run) shrink(cl *llm.ContextLengthError) bool {
	if rn.chatTokens() <= 200 {
		return false
	}
	// At least half: there is one retry, and the server's count and the
	// estimate differ by an unknown factor.
	factor := 0.5
	if cl.Limit > 0 && cl.Requested > cl.Limit {
		factor = min(factor, float64(cl.Limit)/float64(cl.Requested)*0.7)
	}
	budget := int(float64(rn.chatTokens()) * factor)
	rn.reprepare(budget)
	rn.rebase()
	rn.r.m.shrinks.Inc()
	return true
}

// stages runs triage, extract, vision (when the window has images) and
// judge, and returns the verdict as it stands: done after the judge or an
// early clean exit, failed with the error of the stage that failed.
func (rn *run) stages(ctx context.Context) (pipeline.Verdict, error) {
	v := rn.v
	if len(rn.w.Messages) == 0 {
		// Nothing but system noise: there is nothing a model could judge.
		rn.clean(1, "no user messages in the window")
		return *v, nil
	}
	floor := !rn.r.cfg.Defence.NoFloor
	triage, err := rn.triage(ctx)
	if err != nil {
		return *v, err
	}
	// An injection attempt is a rule signal, and so is a campaign: no
	// early exit past the judge.
	if triage.Risk == stages.RiskNone && len(rn.signals()) == 0 && !rn.campaign() && !(floor && rn.injection.Load()) {
		rn.clean(0, "triage found no risk and no rule signal")
		return *v, nil
	}
	in := rn.base
	in.Findings = &stages.Findings{Triage: &triage}
	extract, err := rn.extract(ctx, in)
	if err != nil {
		return *v, err
	}
	in = rn.withBase(in)
	in.Findings = &stages.Findings{Triage: &triage, Evidence: extract.Evidence}
	if len(rn.w.Images) > 0 {
		vision, err := rn.vision(ctx, in.Findings)
		if err != nil {
			return *v, err
		}
		in.Findings.Vision = &vision
	}
	in = rn.withBase(in)
	judge, err := rn.judge(ctx, in)
	if err != nil {
		return *v, err
	}
	rn.settle(judge)
	if floor {
		rn.floorInjection(&triage, extract)
	}
	rn.subjects(judge.OffenderRole)
	return *v, nil
}

// subjects records whom the verdict is about: the senders with the judge's
// offender role whose messages are the verdict's evidence. The other side
// is never a subject, however its messages were cited: quoting a victim's
// reply is evidence of the scam, not of the victim.
func (rn *run) subjects(role pipeline.SenderRole) {
	v := rn.v
	v.OffenderRole, v.Subjects = "", nil
	if v.Label == pipeline.LabelClean || (role != pipeline.RoleBuyer && role != pipeline.RoleSeller) {
		return
	}
	v.OffenderRole = role
	for _, m := range rn.msgs {
		if m.SenderRole != role || m.SenderID == "" || !slices.Contains(v.EvidenceIDs, m.MessageID) || !rn.w.HasMessage(m.MessageID) {
			continue
		}
		if !slices.Contains(v.Subjects, m.SenderID) {
			v.Subjects = append(v.Subjects, m.SenderID)
		}
	}
	slices.Sort(v.Subjects)
	if len(v.Subjects) > pipeline.MaxSubjects {
		v.Subjects = v.Subjects[:pipeline.MaxSubjects]
	}
	if rn.r.marker.Legacy() {
		for _, id := range v.Subjects {
			v.Aliases = append(v.Aliases, pipeline.PseudonymAlias{Purpose: pipeline.AliasSubject,
				Legacy: rn.r.keys.Legacy(pseudonym.Subject, id), Current: rn.r.keys.Sum(pseudonym.Subject, id)})
		}
	}
}

// triage runs the first look; a compromised answer stands in as high
// risk, so the review goes on to the judge.
func (rn *run) triage(ctx context.Context) (stages.TriageOutput, error) {
	return runStage(ctx, rn, pipeline.StageTriage, rn.base, stages.ParseTriage, func() stages.TriageOutput {
		return stages.TriageOutput{Risk: stages.RiskHigh, Categories: []pipeline.Category{}, Reason: injectionNote}
	})
}

// extract collects the evidence, each cited message checked against the
// window; a compromised answer stands in as no evidence.
func (rn *run) extract(ctx context.Context, in stages.PromptInput) (stages.ExtractOutput, error) {
	return runStage(ctx, rn, pipeline.StageExtract, in, rn.windowEvidence, func() stages.ExtractOutput { return stages.ExtractOutput{Evidence: []stages.Evidence{}} })
}

// vision describes the window's images with the findings so far; a
// compromised answer stands in as every image undescribed, low risk.
func (rn *run) vision(ctx context.Context, findings *stages.Findings) (stages.VisionOutput, error) {
	in := rn.base
	in.Findings = findings
	for _, im := range rn.w.Images {
		in.ImageIDs = append(in.ImageIDs, im.MessageID)
	}
	return runStage(ctx, rn, pipeline.StageVision, in, func(b []byte) (stages.VisionOutput, error) {
		return stages.ParseVision(b, rn.w.HasImage)
	}, func() stages.VisionOutput {
		out := stages.VisionOutput{Images: []stages.ImageFinding{}}
		for _, im := range rn.w.Images {
			out.Images = append(out.Images, stages.ImageFinding{MessageID: im.MessageID, Description: "not described: " + injectionNote, Flags: []stages.ImageFlag{}, Risk: stages.RiskLow})
		}
		return out
	})
}

// judge decides the verdict from the findings; a compromised answer
// stands in as clean, which floorInjection then raises.
func (rn *run) judge(ctx context.Context, in stages.PromptInput) (stages.JudgeOutput, error) {
	return runStage(ctx, rn, pipeline.StageJudge, in, rn.windowJudge, func() stages.JudgeOutput {
		return stages.JudgeOutput{Label: pipeline.LabelClean, Category: pipeline.CategoryClean, Severity: 1, Action: pipeline.ActionNone,
			Rationale: injectionNote, EvidenceIDs: []string{}}
	})
}

// settle writes the judge's answer on the verdict, done. The rationale is
// model text: it may quote the chat's numbers, so it is masked.
func (rn *run) settle(judge stages.JudgeOutput) {
	v := rn.v
	v.Status = pipeline.StatusDone
	v.Label, v.Category, v.Severity = judge.Label, judge.Category, judge.Severity
	v.Confidence, v.Action, v.Rationale = judge.Confidence, judge.Action, pipeline.ClipRunes(rn.mask(judge.Rationale), 500)
	v.EvidenceIDs = judge.EvidenceIDs
	if v.EvidenceIDs == nil {
		v.EvidenceIDs = []string{}
	}
}

// injectionNote explains a substitute answer and a raised verdict.
const injectionNote = "the chat tried to instruct the reviewing model (prompt injection)"

// floorInjection makes a verdict at least suspicious when the chat tried
// to instruct the models: a canary hit, or an injection rule signal.
func (rn *run) floorInjection(triage *stages.TriageOutput, extract stages.ExtractOutput) {
	inj := rn.injections()
	if !rn.injection.Load() && len(inj) == 0 {
		return
	}
	v := rn.v
	var ids []string
	for _, s := range inj {
		if rn.w.HasMessage(s.MessageID) && !slices.Contains(ids, s.MessageID) {
			ids = append(ids, s.MessageID)
		}
	}
	if v.Label == pipeline.LabelClean {
		v.Label = pipeline.LabelSuspicious
		v.Category = floorCategory(triage, extract, rn.w.Signals)
		v.Severity, v.Action = max(v.Severity, 2), pipeline.ActionWarn
		v.Confidence = max(v.Confidence, 0.6)
		v.Rationale = pipeline.ClipRunes("Raised from clean: "+injectionNote+". "+v.Rationale, 500)
		v.EvidenceIDs = nil
	}
	for _, id := range ids {
		if !slices.Contains(v.EvidenceIDs, id) && len(v.EvidenceIDs) < 20 {
			v.EvidenceIDs = append(v.EvidenceIDs, id)
		}
	}
	if v.EvidenceIDs == nil {
		v.EvidenceIDs = []string{}
	}
}

// floorCategory names the category of a verdict raised for an injection
// attempt: what the earlier stages or the rule signals point at, and spam
// (unsolicited text aimed at the platform rather than the trade) when
// nothing does.
func floorCategory(triage *stages.TriageOutput, extract stages.ExtractOutput, sigs []chatprep.Signal) pipeline.Category {
	if triage != nil && len(triage.Categories) > 0 {
		return triage.Categories[0]
	}
	if len(extract.Evidence) > 0 {
		return extract.Evidence[0].Category
	}
	for _, s := range sigs {
		switch s.Kind {
		case chatprep.SignalURL, chatprep.SignalPaymentLink:
			return pipeline.CategoryPhishingLink
		case chatprep.SignalPrepayment:
			return pipeline.CategoryExternalPayment
		case chatprep.SignalBankAccount:
			return pipeline.CategoryExternalPayment
		case chatprep.SignalCardNumber, chatprep.SignalResidentID:
			return pipeline.CategoryPersonalInfo
		case chatprep.SignalPhone, chatprep.SignalEmail, chatprep.SignalMessenger, chatprep.SignalMessengerID:
			return pipeline.CategoryOffPlatform
		}
	}
	return pipeline.CategorySpam
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
// and returns the parsed answer. An answer that repeats the canary is
// taken as compromised: the injection is recorded and compromised()
// stands in for it (with the floor off, it is invalid as before). A
// context-length refusal shrinks the window and retries once.
func runStage[T any](ctx context.Context, rn *run, stage pipeline.StageName, in stages.PromptInput, parse func([]byte) (T, error), compromised func() T) (T, error) {
	var out T
	if err := pipeline.CheckStop(ctx); err != nil {
		return out, fmt.Errorf("%s: %w", stage, err)
	}
	if err := context.Cause(ctx); err != nil {
		return out, fmt.Errorf("%s: %w", stage, err)
	}
	res := pipeline.StageResult{Stage: stage}
	ctx, span := startStageSpan(ctx, stage)
	var err error
	defer func() { endStageSpan(span, &res, err) }()
	for try := 0; ; try++ {
		var msgs []llm.Message
		var prompt promptFacts
		msgs, prompt, err = rn.stagePrompt(stage, in)
		if err != nil {
			return out, pipeline.Permanent(err)
		}
		var logged redactedOutput
		req := stageRequest(rn, stage, msgs, prompt, parse, compromised, &out, &logged)
		var resp llm.Response
		resp, err = rn.r.router.Complete(ctx, req)
		addUsage(&res, resp)
		var cl *llm.ContextLengthError
		if err != nil && try == 0 && errors.As(err, &cl) && rn.shrink(cl) {
			in = rn.withBase(in)
			continue
		}
		if err != nil {
			res.Error = cleanText(rn.pseudonyms.Conceal(err.Error()), 1000)
			rn.v.Stages = append(rn.v.Stages, res)
			return out, err
		}
		// out is the decoded answer (or, after a canary, its stand-in: an
		// answer that holds the canary is never stored).
		if logged.ok {
			res.Output = []byte(logged.s)
		} else {
			res.Output = []byte(rn.redactOutput(stage, out))
		}
		rn.v.Stages = append(rn.v.Stages, res)
		return out, nil
	}
}

// stagePrompt renders a stage's system and user messages (with the
// window's image URLs when in asks for images) and the facts of the
// prompt that the inference log keeps instead of its text.
func (rn *run) stagePrompt(stage pipeline.StageName, in stages.PromptInput) ([]llm.Message, promptFacts, error) {
	var imageURLs []string
	if len(in.ImageIDs) > 0 {
		for _, im := range rn.w.Images {
			imageURLs = append(imageURLs, im.URL)
		}
	}
	user, err := stages.UserPrompt(stage, in)
	if err != nil {
		return nil, promptFacts{}, err
	}
	sys := stages.SystemPrompt(stage)
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Text: sys},
		{Role: llm.RoleUser, Text: user, ImageURLs: imageURLs},
	}
	return msgs, newPromptFacts(sys, user, imageURLs), nil
}

// newPromptFacts hashes and measures a prompt: the system and user texts
// and the image URLs, zero-separated.
func newPromptFacts(sys, user string, imageURLs []string) promptFacts {
	ph := sha256.New()
	ph.Write([]byte(sys))
	ph.Write([]byte{0})
	ph.Write([]byte(user))
	for _, u := range imageURLs {
		ph.Write([]byte{0})
		ph.Write([]byte(u))
	}
	return promptFacts{sha: hex.EncodeToString(ph.Sum(nil)), chars: utf8.RuneCountInString(sys) + utf8.RuneCountInString(user), images: len(imageURLs)}
}

// stageRequest is the router request of one stage try. Its validator
// stores the decoded answer in *out, or, when the answer repeats the
// canary and the floor is on, compromised()'s stand-in; every attempt is
// published to the inference log.
func stageRequest[T any](rn *run, stage pipeline.StageName, msgs []llm.Message, prompt promptFacts, parse func([]byte) (T, error), compromised func() T, out *T, logged *redactedOutput) llm.Request {
	floor := !rn.r.cfg.Defence.NoFloor
	// last is the latest answer Validate decoded: the inference log of
	// that attempt redacts this value, not the answer's bytes.
	var last struct {
		content []byte
		out     T
		ok      bool
	}
	return llm.Request{
		Stage:     stage,
		Class:     rn.class,
		Messages:  msgs,
		Schema:    stages.Schema(stage),
		MaxTokens: rn.r.cfg.MaxTokens[stage],
		Validate: func(b []byte) error {
			o, err := parse(b)
			last.content, last.ok = b, false
			if errors.Is(err, stages.ErrCanary) {
				rn.injection.Store(true)
				if floor {
					// The chat talked the model into leaking its
					// instructions: nothing it said can be trusted,
					// and asking again only lets the chat try again.
					*out = compromised()
					return nil
				}
			}
			if err == nil {
				*out = o
				last.out, last.ok = o, true
			}
			return err
		},
		Repair:     repairMessages,
		Pseudonyms: rn.pseudonyms,
		OnAttempt: func(a llm.Attempt) {
			var decoded any
			if a.Outcome == llm.OutcomeOK && last.ok && bytes.Equal(a.Content, last.content) {
				decoded = last.out
			}
			if s, ok := rn.publish(stage, a, prompt, decoded, a.Trace); ok {
				*logged = redactedOutput{s: s, ok: true}
			}
		},
	}
}

// addUsage adds what one router call spent to a stage's result; pool,
// model and time to first token are the last call's.
func addUsage(res *pipeline.StageResult, resp llm.Response) {
	res.Pool, res.Model, res.TTFT = resp.Pool, resp.Model, resp.TTFT
	res.Attempts += resp.Attempts
	res.Latency += resp.Latency
	res.TokensIn += resp.TokensIn
	res.TokensOut += resp.TokensOut
	res.TokensCached += resp.TokensCached
	res.CostUSD += resp.CostUSD
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
// chat text: a prompt hash and sizes, and the answer as its parser decoded
// it, redacted (decoded is nil when the attempt has no valid answer: then
// no output is logged). It returns the redacted output, and whether it
// redacted one.
func (rn *run) publish(stage pipeline.StageName, a llm.Attempt, p promptFacts, decoded any, tc trace.SpanContext) (output string, redacted bool) {
	if rn.r.sink == nil {
		return "", false
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
		TokensCached: a.TokensCached, CostUSD: a.CostUSD, PromptSHA256: p.sha, PromptChars: p.chars, Messages: len(rn.w.Messages), Images: p.images,
	}
	switch {
	case bytes.Contains(a.Content, []byte(stages.Canary)):
		// Replaced (or refused): the answer itself never leaves, it holds
		// the confidential canary.
		log.Outcome, log.ErrorKind = "invalid", "canary"
	case a.Outcome != llm.OutcomeOK:
		log.ErrorKind = a.Outcome
	case decoded != nil:
		log.Output = rn.redactOutput(stage, decoded)
		redacted = true
	}
	ev := pipeline.LakeEvent{
		EventID: pipeline.InferenceLogEventID(rn.ev.Key(rn.r.version), stage, a.N), EventType: pipeline.EventInferenceLog, OccurredAt: rn.r.clock.Now().UTC(),
		SchemaVersion: pipeline.LakeEventSchemaVersion, Payload: log, Trace: tc,
	}
	if !rn.r.sink.Publish(ev) {
		rn.r.m.eventsDropped.Inc()
	}
	return log.Output, redacted
}

// redactedOutput is the answer an attempt's inference-log event carried,
// redacted: the stage's stored output is the same value redacted the same
// way, so the stage reuses it rather than redact it again (redaction was
// a third of a review's CPU, done twice).
type redactedOutput struct {
	s  string
	ok bool
}

// mask hides every contact detail in model free text before it is stored
// or logged. Values restored from placeholders (a pseudonymizing pool
// answered) become their placeholders again first: the model saw only the
// placeholder, and Redact alone may not recognise a value away from the
// chat words that introduced it.
func (rn *run) mask(s string) string {
	return chatprep.Redact(rn.pseudonyms.Conceal(s))
}

// redactOutput is Reviewer.redactOutput with this review's mask.
func (rn *run) redactOutput(stage pipeline.StageName, decoded any) string {
	return rn.r.redactOutput(stage, decoded, rn.mask)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cleanText masks any contact detail in a text that may carry model or
// server output (an error's message quotes what a pool answered) and then
// bounds it, before it reaches MySQL, the lake or a log. Masking comes
// first: a number cut in half by the bound would no longer look like one.
func cleanText(s string, n int) string {
	return pipeline.ClipRunes(chatprep.Redact(s), n)
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
