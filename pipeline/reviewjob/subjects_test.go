package reviewjob

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/health"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// keyedReviewer is a fakeReviewer with a (fake) keyed pseudonymizer.
type keyedReviewer struct{ *fakeReviewer }

func (keyedReviewer) SubjectPseudonyms(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = "hmac:" + strings.Repeat("0", 24-len(id)) + strings.ToLower(strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return 'a'
		}, id))
	}
	return out
}

// TestVerdictEventCarriesSubjectPseudonymsNotIDs: the verdict event's
// subjects come from the reviewer's pseudonymizer, also through the
// dependency gate; a reviewer without one sends no subjects at all.
func TestVerdictEventCarriesSubjectPseudonymsNotIDs(t *testing.T) {
	t.Parallel()
	withSubjects := func(r *fakeReviewer) {
		r.review = func(context.Context, pipeline.ReviewEvent, []pipeline.ChatMessage, int) (pipeline.Verdict, error) {
			v := abusive()
			v.OffenderRole, v.Subjects = pipeline.RoleSeller, []string{"u1"}
			return v, nil
		}
	}
	for _, gated := range []bool{false, true} {
		r := setupReview(t)
		withSubjects(r.rev)
		deps := r.deps()
		deps.Reviewer = keyedReviewer{r.rev}
		if gated {
			mon, err := health.New(health.Config{Failures: 2, OpenFor: time.Minute}, nil, nil)
			require.NoError(t, err)
			deps = Gated(deps, mon)
		}
		r.build(deps)
		require.Equal(t, jobloop.Delete, r.h.Handle(context.Background(), msg(r.body(t), 1, 5)).Action)
		evs := r.outboxEvents(t)
		require.Len(t, evs, 1)
		p := evs[0].Payload.(pipeline.VerdictEvent)
		require.Equal(t, []string{"hmac:0000000000000000000000a1"}, p.Subjects, "gated %v", gated)
		require.True(t, pipeline.IsSubjectPseudonym(p.Subjects[0]))
		v, err := r.store.Get(context.Background(), r.key())
		require.NoError(t, err)
		require.Equal(t, []string{"u1"}, v.Subjects, "the store keeps the raw id")
	}

	r := setupReview(t)
	withSubjects(r.rev)
	require.Equal(t, jobloop.Delete, r.h.Handle(context.Background(), msg(r.body(t), 1, 5)).Action)
	require.Nil(t, r.outboxEvents(t)[0].Payload.(pipeline.VerdictEvent).Subjects, "no key: no subjects, never raw ids")
}
