package reviewjob

import (
	"context"
	"errors"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// DependencyGate runs calls to a dependency through its health state
// (pipeline/health.Monitor implements it): a call refused or failed while
// the dependency is down comes back as a *pipeline.DependencyError with
// Down set, which the handler turns into a held job.
type DependencyGate interface {
	Call(ctx context.Context, d pipeline.Dependency, fn func(ctx context.Context) error) error
}

// Gated routes every call a review makes (MySQL's store and claims, the
// chat API, the models) through g, so that the breakers are fed by real
// outcomes in one place and the handler's code stays the same with or
// without them. A store that is a pipeline.ReleasingSaver stays one.
func Gated(d Deps, g DependencyGate) Deps {
	gs := gatedStore{VerdictStore: d.Store, g: g}
	if rs, ok := d.Store.(pipeline.ReleasingSaver); ok {
		d.Store = gatedReleasingStore{gatedStore: gs, rs: rs}
	} else {
		d.Store = gs
	}
	d.Chat = gatedChat{c: d.Chat, g: g}
	d.Reviewer = gatedReviewer{Reviewer: d.Reviewer, g: g}
	if d.Claims != nil {
		d.Claims = gatedClaims{c: d.Claims, g: g}
	}
	return d
}

type gatedStore struct {
	pipeline.VerdictStore
	g DependencyGate
}

func (s gatedStore) Get(ctx context.Context, k pipeline.ReviewKey) (v pipeline.Verdict, err error) {
	err = s.g.Call(ctx, pipeline.DepMySQL, func(ctx context.Context) error {
		v, err = s.VerdictStore.Get(ctx, k)
		return err
	})
	return v, err
}

func (s gatedStore) Save(ctx context.Context, v pipeline.Verdict) (committed bool, err error) {
	err = s.g.Call(ctx, pipeline.DepMySQL, func(ctx context.Context) error {
		committed, err = s.VerdictStore.Save(ctx, v)
		return err
	})
	return committed && err == nil, err
}

// gatedReleasingStore is the gated store of a pipeline.ReleasingSaver.
type gatedReleasingStore struct {
	gatedStore
	rs pipeline.ReleasingSaver
}

func (s gatedReleasingStore) SaveReleasing(ctx context.Context, v pipeline.Verdict, owner string) (committed bool, err error) {
	err = s.g.Call(ctx, pipeline.DepMySQL, func(ctx context.Context) error {
		committed, err = s.rs.SaveReleasing(ctx, v, owner)
		return err
	})
	return committed && err == nil, err
}

type gatedClaims struct {
	c pipeline.ReviewClaims
	g DependencyGate
}

func (c gatedClaims) Claim(ctx context.Context, k pipeline.ReviewKey, owner string, ttl time.Duration) (got pipeline.Claim, err error) {
	err = c.g.Call(ctx, pipeline.DepMySQL, func(ctx context.Context) error {
		got, err = c.c.Claim(ctx, k, owner, ttl)
		return err
	})
	return got, err
}

func (c gatedClaims) Release(ctx context.Context, k pipeline.ReviewKey, owner string) error {
	return c.g.Call(ctx, pipeline.DepMySQL, func(ctx context.Context) error { return c.c.Release(ctx, k, owner) })
}

type gatedChat struct {
	c pipeline.ChatSource
	g DependencyGate
}

func (c gatedChat) History(ctx context.Context, room string, from, to time.Time) (msgs []pipeline.ChatMessage, err error) {
	err = c.g.Call(ctx, pipeline.DepChatAPI, func(ctx context.Context) error {
		msgs, err = c.c.History(ctx, room, from, to)
		return err
	})
	return msgs, err
}

type gatedReviewer struct {
	pipeline.Reviewer
	g DependencyGate
}

func (r gatedReviewer) Review(ctx context.Context, ev pipeline.ReviewEvent, msgs []pipeline.ChatMessage, attempt int) (v pipeline.Verdict, err error) {
	err = r.g.Call(ctx, pipeline.DepModels, func(ctx context.Context) error {
		v, err = r.Reviewer.Review(ctx, ev, msgs, attempt)
		return err
	})
	return v, err
}

// SubjectPseudonyms forwards to the wrapped reviewer; one without a key
// gives none, and the verdict event then carries no subjects.
func (r gatedReviewer) SubjectPseudonyms(ids []string) []string {
	if p, ok := r.Reviewer.(pipeline.SubjectPseudonymizer); ok {
		return p.SubjectPseudonyms(ids)
	}
	return nil
}

// held is the outcome of a job that failed because a dependency is down:
// the loop keeps its message and runs it again once the dependency is back.
func held(err error) jobloop.Outcome {
	var de *pipeline.DependencyError
	errors.As(err, &de)
	return jobloop.Outcome{Action: jobloop.Hold, Label: "held", Dep: de.Dep, Err: err}
}

// retryOrHold is the outcome of a job whose verdict could not be recorded
// (serr): held when MySQL is down, retried otherwise.
func retryOrHold(err, serr error) jobloop.Outcome {
	if d, _ := pipeline.Classify(serr); d == pipeline.Hold {
		return held(err)
	}
	return jobloop.Outcome{Action: jobloop.Retry, Label: "retry", Err: err}
}
