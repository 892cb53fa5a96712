package jobloop

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// DependencyGate runs calls to a dependency through its health state
// (pipeline/health.Monitor implements it): a call refused or failed while
// the dependency is down comes back as a *pipeline.DependencyError with
// Down set, which the handler turns into a held job.
type DependencyGate interface {
	Call(ctx context.Context, d pipeline.Dependency, fn func(ctx context.Context) error) error
}

// The wrappers below route every call a review makes through the gate, so
// that the breakers are fed by real outcomes in one place and the handler's
// code stays the same with or without them.

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

// SaveReleasing forwards to the store's SaveReleasing; the handler calls it
// only when the store implements pipeline.ReleasingSaver (releasingStore).
func (s gatedStore) SaveReleasing(ctx context.Context, v pipeline.Verdict, owner string) (committed bool, err error) {
	err = s.g.Call(ctx, pipeline.DepMySQL, func(ctx context.Context) error {
		committed, err = s.VerdictStore.(pipeline.ReleasingSaver).SaveReleasing(ctx, v, owner)
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

// gate wraps the handler's dependencies when a gate is configured.
func (h *ReviewHandler) gate(g DependencyGate) {
	if g == nil {
		return
	}
	h.store = gatedStore{VerdictStore: h.store, g: g}
	h.chat = gatedChat{c: h.chat, g: g}
	h.reviewer = gatedReviewer{Reviewer: h.reviewer, g: g}
	if h.cfg.Claims != nil {
		h.cfg.Claims = gatedClaims{c: h.cfg.Claims, g: g}
	}
}

// held is the outcome of a job that failed because a dependency is down:
// the loop keeps its message and runs it again once the dependency is back.
func held(err error) Outcome {
	var de *pipeline.DependencyError
	errors.As(err, &de)
	return Outcome{Action: Hold, Label: "held", Dep: de.Dep, Err: err}
}

// retryOrHold is the outcome of a job whose verdict could not be recorded
// (serr): held when MySQL is down, retried otherwise.
func retryOrHold(err, serr error) Outcome {
	if d, _ := pipeline.Classify(serr); d == pipeline.Hold {
		return held(err)
	}
	return Outcome{Action: Retry, Label: "retry", Err: err}
}

// unsavedVerdicts keeps the verdict of a held job whose save failed, for
// the same delivery's next run: the loop runs a held job again in this
// process, and the models need not be paid twice for one review. Only held
// jobs put entries, and each run takes its own, so it holds at most one per
// job in flight.
type unsavedVerdicts struct {
	mu sync.Mutex
	m  map[string]pipeline.Verdict
}

func deliveryKey(m Message) string { return m.ID + "/" + m.ReceiptHandle }

func (u *unsavedVerdicts) put(m Message, v pipeline.Verdict) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]pipeline.Verdict{}
	}
	u.m[deliveryKey(m)] = v
}

func (u *unsavedVerdicts) take(m Message) (pipeline.Verdict, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.m[deliveryKey(m)]
	delete(u.m, deliveryKey(m))
	return v, ok
}

// releasingStore reports whether s can release claims on save.
func releasingStore(s pipeline.VerdictStore) bool {
	_, ok := s.(pipeline.ReleasingSaver)
	return ok
}
