package reviewjob

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// recordingMirror records offers and what the store held at each.
type recordingMirror struct {
	store  pipeline.VerdictStore
	offers []pipeline.Verdict
	msgs   [][]pipeline.ChatMessage
	stored []pipeline.Status
}

func (m *recordingMirror) Offer(live pipeline.Verdict, _ pipeline.ReviewEvent, msgs []pipeline.ChatMessage) {
	m.offers = append(m.offers, live)
	m.msgs = append(m.msgs, msgs)
	v, err := m.store.Get(context.Background(), live.Key)
	if err == nil {
		m.stored = append(m.stored, v.Status)
	}
}

func TestMirrorIsOfferedOnlyCommittedDoneVerdicts(t *testing.T) {
	t.Parallel()
	r := setupReview(t)
	mirror := &recordingMirror{store: r.store}
	deps := r.deps()
	deps.Mirror = mirror
	r.build(deps)
	out := r.h.Handle(context.Background(), msg(r.body(t), 1, 5))
	require.Equal(t, "done", out.Label)
	require.Len(t, mirror.offers, 1)
	require.Equal(t, []pipeline.Status{pipeline.StatusDone}, mirror.stored, "offered after the commit")
	require.Equal(t, r.key(), mirror.offers[0].Key)
	require.Equal(t, "선입금 부탁드려요", mirror.msgs[0][0].Text, "with the chat the live review ran on")

	// A redelivery of a done review is a duplicate: no model, no offer.
	require.Equal(t, jobloop.Delete, r.h.Handle(context.Background(), msg(r.body(t), 2, 5)).Action)
	require.Len(t, mirror.offers, 1)

	// A failed review is not offered.
	r2 := setupReview(t)
	m2 := &recordingMirror{store: r2.store}
	deps = r2.deps()
	deps.Mirror = m2
	r2.rev.review = func(context.Context, pipeline.ReviewEvent, []pipeline.ChatMessage, int) (pipeline.Verdict, error) {
		return pipeline.Verdict{}, &pipeline.PermanentError{Err: errors.New("no model can review this")}
	}
	r2.build(deps)
	r2.h.Handle(context.Background(), msg(r2.body(t), 5, 5))
	require.Empty(t, m2.offers)
}
