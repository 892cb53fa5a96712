package chatreplay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/chatreplay"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
)

var hour = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func msg(id string, at time.Duration) pipeline.ChatMessage {
	return pipeline.ChatMessage{MessageID: id, SenderID: "u-" + id, SenderRole: pipeline.RoleBuyer, SentAt: hour.Add(at), Kind: pipeline.KindText, Text: "hello " + id}
}

func rooms() map[string][]pipeline.ChatMessage {
	return map[string][]pipeline.ChatMessage{
		"r1": {msg("a", -time.Minute), msg("b", 0), msg("c", 30*time.Minute)},
		"r2": {msg("d", 30*time.Minute), msg("e", 59*time.Minute), msg("f", time.Hour)},
	}
}

func TestPlanScalesTheWindowOntoWallTime(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	plan, err := chatreplay.Plan(rooms(), hour, hour.Add(time.Hour), start, 60)
	require.NoError(t, err)
	var got []string
	for _, a := range plan {
		got = append(got, fmt.Sprintf("%s/%s@%s", a.RoomID, a.Message.MessageID, a.Message.SentAt.Sub(start)))
		require.Equal(t, "hello "+a.Message.MessageID, a.Message.Text)
	}
	require.Equal(t, []string{"r1/b@0s", "r1/c@30s", "r2/d@30s", "r2/e@59s"}, got, "[from, to) only, an hour in a minute, ties by room")
	require.Equal(t, hour.Add(59*time.Minute), plan[3].LakeSentAt)

	_, err = chatreplay.Plan(rooms(), hour, hour, start, 60)
	require.ErrorContains(t, err, "empty")
	_, err = chatreplay.Plan(rooms(), hour, hour.Add(time.Hour), start, 0)
	require.ErrorContains(t, err, "speed-up")
}

type recorder struct {
	mu     sync.Mutex
	log    []string
	stored map[string]bool
}

func (r *recorder) Add(room string, msgs ...pipeline.ChatMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.stored[m.MessageID] = true
		r.log = append(r.log, "store "+m.MessageID)
	}
}

func (r *recorder) Publish(_ context.Context, evs []pipeline.ChatEvent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		if !r.stored[ev.MessageID] {
			return fmt.Errorf("event %s published before its message was stored", ev.MessageID)
		}
		r.log = append(r.log, "event "+ev.MessageID)
	}
	return nil
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

func TestRunReleasesOnTheClockStoringBeforeAnnouncing(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	plan, err := chatreplay.Plan(rooms(), hour, hour.Add(time.Hour), start, 60)
	require.NoError(t, err)
	rec := &recorder{stored: map[string]bool{}}
	r := &chatreplay.Replayer{Store: rec, Publisher: rec, Clock: clk, Duplicates: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		st  chatreplay.Stats
		err error
	}
	done := make(chan result, 1)
	go func() { st, err := r.Run(ctx, plan); done <- result{st, err} }()

	require.NoError(t, clk.BlockUntilContext(ctx, 1))
	require.Equal(t, []string{"store b", "event b", "event b"}, rec.snapshot(), "due at once; each event twice with Duplicates 1")
	clk.Advance(29 * time.Second)
	require.NoError(t, clk.BlockUntilContext(ctx, 1))
	require.Len(t, rec.snapshot(), 3, "nothing before its time")
	clk.Advance(time.Second)
	require.NoError(t, clk.BlockUntilContext(ctx, 1))
	require.Equal(t, []string{"store c", "store d", "event c", "event c", "event d", "event d"}, rec.snapshot()[3:])
	clk.Advance(29 * time.Second)
	res := <-done
	require.NoError(t, res.err)
	require.Equal(t, chatreplay.Stats{Messages: 4, Events: 8}, res.st)
}

// TestReplayThroughTheChatAPIAndSQS replays onto the chat API stand-in and
// the real SQS protocol (fauxqs): what a consumer receives decodes as chat
// events, and each event's message is readable by then.
func TestReplayThroughTheChatAPIAndSQS(t *testing.T) {
	q := stacktest.NewQueue(t, "chatreplay", 5, 30*time.Second)
	c := stacktest.SQS(t)
	srv, err := chatapi.New(chatapi.Config{Messages: map[string][]pipeline.ChatMessage{}})
	require.NoError(t, err)
	start := time.Now().UTC()
	plan, err := chatreplay.Plan(rooms(), hour, hour.Add(time.Hour), start, 1e6)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := (&chatreplay.Replayer{Store: srv, Publisher: chatreplay.SQSPublisher{API: c, QueueURL: q.URL}}).Run(ctx, plan)
	require.NoError(t, err)
	require.Equal(t, chatreplay.Stats{Messages: 4, Events: 4}, st)
	require.Equal(t, []string{"r1", "r2"}, srv.Rooms())

	seen := map[string]pipeline.ChatEvent{}
	for len(seen) < 4 {
		out, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		require.NoError(t, err)
		for _, m := range out.Messages {
			ev, err := pipeline.DecodeChatEvent([]byte(aws.ToString(m.Body)))
			require.NoError(t, err)
			seen[ev.MessageID] = ev
		}
	}
	for _, a := range plan {
		ev := seen[a.Message.MessageID]
		require.Equal(t, a.RoomID, ev.RoomID)
		require.True(t, a.Message.SentAt.Equal(ev.SentAt), "sent_at is the replay time")
		require.Equal(t, "buyer", ev.SenderRole)
	}
}

func TestRetimeShapesADayKeepingEachConversationsPace(t *testing.T) {
	day := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	src := map[string][]pipeline.ChatMessage{}
	for i := range 4000 {
		id := fmt.Sprintf("room-%04d", i)
		src[id] = []pipeline.ChatMessage{msg(id+"-a", 0), msg(id+"-b", 90*time.Second), msg(id+"-c", 7*time.Minute)}
	}
	shape := chatreplay.DefaultDayShape()
	bursty := []string{"room-0001", "room-0002", "room-0003"}
	shape.Bursts = []chatreplay.Burst{{At: 10 * time.Hour, Within: 5 * time.Minute, Rooms: 3}}
	got := chatreplay.Retime(src, day, shape, bursty, 7)
	require.Equal(t, got, chatreplay.Retime(src, day, shape, bursty, 7), "seeded")
	require.Len(t, got, len(src))
	perHour := [24]int{}
	for id, ms := range got {
		require.Equal(t, 90*time.Second, ms[1].SentAt.Sub(ms[0].SentAt), "pace kept")
		require.Equal(t, 7*time.Minute, ms[2].SentAt.Sub(ms[0].SentAt))
		require.False(t, ms[0].SentAt.Before(day))
		require.True(t, ms[2].SentAt.Before(day.Add(24*time.Hour)), id)
		perHour[ms[0].SentAt.Hour()]++
	}
	for _, id := range bursty {
		at := got[id][0].SentAt.Sub(day)
		require.True(t, at >= 10*time.Hour && at < 10*time.Hour+5*time.Minute, "%s starts in its burst, at %s", id, at)
	}
	// The peak hour (21:00, weight 20) against the trough (03:00, weight 1):
	// 4,000 rooms put about 330 and 17 there.
	require.Greater(t, perHour[21], 10*perHour[3], "peak %d against trough %d", perHour[21], perHour[3])
	require.Equal(t, hour, src["room-0000"][0].SentAt, "the input is not changed")
}

// Late stores a picked message when it is sent and publishes its event
// between min and max later; the rest are untouched.
func TestLateStoresOnTimeAndAnnouncesLate(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	plan, err := chatreplay.Plan(rooms(), hour, hour.Add(time.Hour), start, 60)
	require.NoError(t, err)
	late := chatreplay.Late(plan, 1, 15*time.Second, 2*time.Minute, 1)
	require.Len(t, late, 2*len(plan), "every message: stored, and announced by a copy")
	var stored, announced int
	for _, a := range late {
		if a.Repeat {
			announced++
			d := a.At.Sub(a.Message.SentAt)
			require.True(t, d >= 15*time.Second && d <= 2*time.Minute, "announced %s after it was sent", d)
			continue
		}
		stored++
		require.True(t, a.Unannounced)
		require.Equal(t, a.Message.SentAt, a.At, "stored when sent")
	}
	require.Equal(t, len(plan), stored)
	require.Equal(t, len(plan), announced)
	require.Equal(t, plan, chatreplay.Late(plan, 0, 15*time.Second, 2*time.Minute, 1), "a share of 0 changes nothing")

	// Replayed: the message is stored on time and its event published later.
	clk := clock.NewFake(start)
	rec := &recorder{stored: map[string]bool{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var onlyB []chatreplay.Arrival
	for _, a := range late {
		if a.Message.MessageID == "b" {
			onlyB = append(onlyB, a)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := (&chatreplay.Replayer{Store: rec, Publisher: rec, Clock: clk}).Run(ctx, onlyB)
		done <- err
	}()
	require.NoError(t, clk.BlockUntilContext(ctx, 1))
	require.Equal(t, []string{"store b"}, rec.snapshot(), "stored, not announced yet")
	clk.Advance(2 * time.Minute)
	require.NoError(t, <-done)
	require.Equal(t, []string{"store b", "event b"}, rec.snapshot())
}
