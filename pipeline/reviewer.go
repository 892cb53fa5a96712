package pipeline

import (
	"context"
)

// Reviewer runs the model stages (triage → extract → vision → judge) over one
// window's chat history and returns the verdict. It is the seam between the
// job loop (queue, admission, storage) and the engine (prompts, router).
//
// Review returns a Verdict with Status StatusDone and its StageResults, or an
// error the job loop sorts with Classify: *RetryableError for transient model
// failures, *PermanentError for input no model can review,
// *UnusableAnswerError for a stage whose every answer was unusable. When ctx is
// cancelled it returns promptly with context.Cause(ctx) wrapped, so a
// *StoppedError cause survives. attempt is the message's receive count, for
// the inference logs. msgs is untrusted chat history in any order. Messages
// with Context set are the window's context: the room's messages just
// before it, already reviewed with earlier windows. They are shown to the
// models as such and never become evidence (a verdict cites, and is about,
// the window's messages only).
type Reviewer interface {
	PipelineVersion() string
	Review(ctx context.Context, ev ReviewEvent, msgs []ChatMessage, attempt int) (Verdict, error)
}

// SubjectPseudonymizer turns a verdict's subjects (raw sender ids) into the
// stable keyed pseudonyms the lake keeps instead: the same id gives the same
// pseudonym for as long as the key stays, so analysts can count accounts
// across rooms, and no id can be recovered or confirmed without the key. A
// Reviewer that has the key implements it; the job loop asks it when it
// writes a verdict event.
type SubjectPseudonymizer interface {
	SubjectPseudonyms(senderIDs []string) []string
}

// SetActionOffenders gives each action its offender's keyed pseudonym for
// its lake event (ActionRecord.Offender), as a verdict event's subjects
// get theirs: from reviewer when it is a SubjectPseudonymizer, none
// otherwise (a raw id never goes into an event). The worker's and the
// console's saves both call it.
func SetActionOffenders(recs []ActionRecord, reviewer any) {
	p, ok := reviewer.(SubjectPseudonymizer)
	if !ok {
		return
	}
	for i := range recs {
		if id := recs[i].Creator.ID; id != "" {
			if ps := p.SubjectPseudonyms([]string{id}); len(ps) == 1 {
				recs[i].Offender = ps[0]
			}
		}
	}
}
