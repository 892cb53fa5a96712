package console

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"

	"github.com/chatguard/chatguard/moderation/moderationtest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/pipeline/live"
	"github.com/chatguard/chatguard/pipeline/policy"
	"github.com/chatguard/chatguard/pipeline/protect"
)

// flaggingReviewer flags every window it reviews, as the stand-in model
// answers a scam, and records the sources it was asked with.
type flaggingReviewer struct {
	mu      sync.Mutex
	sources []pipeline.ReviewSource
}

func (*flaggingReviewer) PipelineVersion() string { return "v1" }
func (f *flaggingReviewer) Review(_ context.Context, ev pipeline.ReviewEvent, _ []pipeline.ChatMessage, _ int) (pipeline.Verdict, error) {
	f.mu.Lock()
	f.sources = append(f.sources, ev.Source)
	f.mu.Unlock()
	return pipeline.Verdict{Key: ev.Key("v1"), RunID: ev.RunID, Status: pipeline.StatusDone, Label: pipeline.LabelAbusive,
		Category: pipeline.CategoryExternalPayment, Severity: 4, Confidence: 0.9, Action: pipeline.ActionRestrict,
		Subjects: []string{"s1"}, OffenderRole: pipeline.RoleSeller, Rationale: "asks for a prepayment"}, nil
}

// campaignConsole is a console over the in-memory store holding a clean
// batch verdict of room-camp's window, its reviews answered by rev.
// It returns the batch verdict's id.
func campaignConsole(t *testing.T, rev pipeline.Reviewer) (*App, *moderationtest.Memory, pipeline.ReviewKey, uint64) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DevLogin, cfg.TrustedProxies = true, "127.0.0.1/32"
	st := moderationtest.NewMemory()
	v := moderationtest.Verdict("room-camp")
	v.Key.PipelineVersion, v.RunID = "v1", "run-batch"
	v.Label, v.Category, v.Severity, v.Action = pipeline.LabelClean, pipeline.CategoryClean, 0, pipeline.ActionNone
	id := moderationtest.Seed(t, st, v)
	ml := &memLog{evs: map[string][]pipeline.LiveEvent{}}
	hub, err := live.NewHub(cfg.Hub(), ml, nil)
	require.NoError(t, err)
	app, err := New(cfg, Deps{Store: st, Feedback: &fakeFeedback{}, Chat: corpusSource{at: moderationtest.T0}, Reviewer: rev, Hub: hub, LiveLog: ml})
	require.NoError(t, err)
	t.Cleanup(func() { app.cancelWork(nil); app.rv.running.Wait() })
	return app, st, v.Key, id
}

// current reads key's current revision.
func current(t *testing.T, st *moderationtest.Memory, key pipeline.ReviewKey) (uint64, pipeline.Verdict) {
	t.Helper()
	id, err := st.VerdictID(context.Background(), key)
	require.NoError(t, err)
	v, err := st.VerdictByID(context.Background(), id)
	require.NoError(t, err)
	return id, v
}

func TestCampaignReReviewIsANewRevisionReviewedAsSourceCampaign(t *testing.T) {
	rev := &flaggingReviewer{}
	app, st, key, batchID := campaignConsole(t, rev)
	ctx := context.Background()
	label, err := app.ReReviewCampaign(ctx, key.RoomID, key.WindowStart, key.WindowEnd)
	require.NoError(t, err)
	require.Equal(t, pipeline.LabelAbusive, label)
	require.Equal(t, []pipeline.ReviewSource{pipeline.SourceCampaign}, rev.sources, "reviewed with source campaign")

	id, cur := current(t, st, key)
	require.NotEqual(t, batchID, id, "the re-review is a new row")
	require.True(t, strings.HasPrefix(cur.RunID, pipeline.CampaignReReviewRunPrefix), cur.RunID)
	require.Equal(t, 2, cur.Revision)
	batch, err := st.VerdictByID(ctx, batchID)
	require.NoError(t, err)
	require.Equal(t, "run-batch", batch.RunID, "the batch verdict is kept as it was")
	require.Equal(t, pipeline.LabelClean, batch.Label)
	require.False(t, batch.SupersededAt.IsZero())
	require.Zero(t, len(app.rv.slots), "the admission slot is given back")
}

// anySource is a policy whose one rule warns the counterpart and
// escalates every flagged room, whatever its source.
const anySource = `{"version":"t1","defaults":{"locale":"ko","suppress_notices":"24h","action_ttl":"1h","restrict_for":"24h","cleared_for":"720h",
  "heavy_per_account_daily":1,"heavy_min_campaign_rooms":3,"heavy_min_history_rooms":1},
  "rules":[{"id":"notice","name":"Notice","daily_cap":10,"match":{"labels":["abusive"],"min_severity":3},
    "actions":[{"action":"warn_counterpart","mode":"on"},{"action":"escalate","mode":"on"}]}]}`

// noHistory is a pipeline.ActionLedger with nothing recorded.
type noHistory struct{}

func (noHistory) ActionState(context.Context, pipeline.ActionStateQuery) (pipeline.ActionState, error) {
	return pipeline.ActionState{}, nil
}

// savingStore records every verdict the console saves, with its actions.
type savingStore struct {
	*moderationtest.Memory
	mu    sync.Mutex
	saved []pipeline.Verdict
}

func (s *savingStore) Revise(ctx context.Context, v pipeline.Verdict) (int, bool, error) {
	s.mu.Lock()
	s.saved = append(s.saved, v)
	s.mu.Unlock()
	return s.Memory.Revise(ctx, v)
}

func TestCampaignReReviewThatFlagsTakesNoActionBeyondEscalate(t *testing.T) {
	pol, err := policy.Parse([]byte(anySource))
	require.NoError(t, err)
	kinds := func(v pipeline.Verdict) (out []pipeline.ActionKind) {
		for _, a := range v.Actions {
			out = append(out, a.Action.ID)
		}
		return out
	}
	app, mem, key, _ := campaignConsole(t, &flaggingReviewer{})
	st := &savingStore{Memory: mem}
	app.rv.store, app.rv.planner = st, protect.New(pol, noHistory{}, nil, nil, nil)

	_, err = app.ReReviewCampaign(context.Background(), key.RoomID, key.WindowStart, key.WindowEnd)
	require.NoError(t, err)
	require.Len(t, st.saved, 1)
	require.Equal(t, []pipeline.ActionKind{pipeline.ActionEscalate}, kinds(st.saved[0]), "the campaign re-review escalates, and warns nobody")
	require.Equal(t, pipeline.ActionSourceCampaign, st.saved[0].Actions[0].Source)

	// The same verdict from a moderator's review would warn.
	v := st.saved[0]
	v.Key.RoomID = "room-moderator"
	saved := app.rv.save(context.Background(), "r-mod", v, pipeline.ActionSourceOnDemand)
	require.Equal(t, []pipeline.ActionKind{pipeline.ActionWarnCounterpart, pipeline.ActionEscalate}, kinds(saved))
}

func TestCampaignReReviewWaitsForASlotWithinItsContext(t *testing.T) {
	app, _, key, _ := campaignConsole(t, &flaggingReviewer{})
	for range cap(app.rv.slots) {
		app.rv.slots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := app.ReReviewCampaign(ctx, key.RoomID, key.WindowStart, key.WindowEnd)
	require.ErrorIs(t, err, context.Canceled, "every slot is a moderator's: the re-review waits, bounded by its context")
	for range cap(app.rv.slots) {
		<-app.rv.slots
	}
	app.rv.beginDrain()
	_, err = app.ReReviewCampaign(context.Background(), key.RoomID, key.WindowStart, key.WindowEnd)
	require.ErrorIs(t, err, errDraining)
}

// TestCampaignJoinReReviewsALinkedRoomOnceThroughTheConsole runs the
// campaign join over the in-memory store with the console as its
// re-reviewer: the clean room whose sighting the run links is re-reviewed
// once, as a new revision, and counted; the next run re-reviews nothing.
func TestCampaignJoinReReviewsALinkedRoomOnceThroughTheConsole(t *testing.T) {
	app, st, key, batchID := campaignConsole(t, &flaggingReviewer{})
	ctx := context.Background()
	mark := moderationtest.Mark(61)
	sighted := moderationtest.Verdict("room-camp-early")
	sighted.Key.PipelineVersion = "v1"
	sighted.Label, sighted.Category, sighted.Severity, sighted.Action = pipeline.LabelClean, pipeline.CategoryClean, 0, pipeline.ActionNone
	sighted.Sightings = []pipeline.CampaignCount{{Kind: pipeline.CampaignScript, Mark: mark, MessageID: "m1", Rooms: 1, Senders: 1}}
	earlyID := moderationtest.Seed(t, st, sighted)
	moderationtest.Seed(t, st, moderationtest.Verdict("room-camp-fourth", mark))

	cfg := campaign.DefaultJoinConfig()
	cfg.ReReviewMax = 1
	reg := prometheus.NewRegistry()
	j, err := campaign.NewJoiner(cfg, st, reg, clock.NewFake(moderationtest.T0.Add(2*time.Hour)))
	require.NoError(t, err)
	j.SetReReviewer(app)
	stats, linked, err := j.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, linked)
	require.Equal(t, 1, stats.ReReviews)
	id, cur := current(t, st, sighted.Key)
	require.NotEqual(t, earlyID, id, "the linked room has a new revision")
	require.True(t, strings.HasPrefix(cur.RunID, pipeline.CampaignReReviewRunPrefix), cur.RunID)
	require.Equal(t, 1.0, rereviews(t, reg, campaign.ReReviewFlagged))

	stats, _, err = j.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, stats.ReReviews, "no room twice")
	batch, err := st.VerdictByID(ctx, batchID)
	require.NoError(t, err)
	require.True(t, batch.SupersededAt.IsZero(), "a room the join did not link is not re-reviewed: %s", key.RoomID)
}

// rereviews reads chatguard_campaign_rereviews_total{outcome} from reg
// (-1: not there).
func rereviews(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "chatguard_campaign_rereviews_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}
