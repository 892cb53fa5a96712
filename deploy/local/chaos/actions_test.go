//go:build chaosactions

package chaos

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	sqsq "github.com/chatguard/chatguard/storage/sqs"
)

// chaosPolicy acts on every abusive or suspicious verdict with a notice
// (and an escalation, which the chat service ignores), in mode on.
const chaosPolicy = `{"version":"chaos","defaults":{"locale":"ko","suppress_notices":"24h","action_ttl":"1h","restrict_for":"24h",
  "cleared_for":"720h","heavy_per_account_daily":1,"heavy_min_campaign_rooms":3,"heavy_min_history_rooms":1},
  "rules":[{"id":"any","name":"Any flag","daily_cap":100000,"match":{"labels":["abusive","suspicious"]},
    "actions":[{"action":"warn_counterpart","mode":"on"},{"action":"warn_sender","mode":"on"},{"action":"escalate","mode":"on"}]}]}`

// standInChat is the chat service's side: the stand-in over the stack's
// lake, consuming the actions queue directly (never through the SQS
// proxy the workers' faults cut), with its journal.
func standInChat(t *testing.T, q stacktest.Queue) *chatapi.Server {
	t.Helper()
	chat, err := chatapi.New(chatapi.Config{LakeDir: stacktest.LakeDir(t), ActionsJournal: filepath.Join(t.TempDir(), "actions.jsonl")})
	require.NoError(t, err)
	open := func(name, url string) *sqsq.Queue {
		c := sqsq.DefaultConfig()
		c.Name, c.URL = name, url
		sq, err := sqsq.New(stacktest.SQS(t), c)
		require.NoError(t, err)
		return sq
	}
	in, dlq := open("actions", q.URL), open("actions-dlq", q.DLQURL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&chatapi.Consumer{Server: chat, Inbox: in, DLQ: dlq, Wait: time.Second}).Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = in.Close(context.Background())
		_ = dlq.Close(context.Background())
		_ = chat.Close()
	})
	return chat
}

// The protective actions' fault test (make chaos-actions): a worker
// SIGKILLed between its verdicts' commit and their actions' publish, SQS
// cut for 60 s under the next worker's relay, that relay SIGKILLed in
// the middle of its sends; a last worker drains. Every `on` action is
// published at least once (its outbox row sent) and applied once by key
// at the chat service stand-in.
func TestActionsSurviveKillsAndAnSQSCut(t *testing.T) {
	const n = 24
	actions := stacktest.NewQueue(t, "chaos-actions", 5, 10*time.Second)
	policy := filepath.Join(t.TempDir(), "policy.json")
	require.NoError(t, os.WriteFile(policy, []byte(chaosPolicy), 0o644))
	e := newEnv(t, "CHATGUARD_OUTBOX_POLL=1h", "CHATGUARD_ACTIONS_QUEUE_URL="+actions.URL, "CHATGUARD_ACTIONS_POLICY="+policy)
	chat := standInChat(t, actions)

	first := e.startWorker()
	e.send(events(t, n))
	e.settle(n, 3*time.Minute)
	written := e.count("SELECT COUNT(*) FROM protective_actions WHERE mode = 'on'")
	require.Positive(t, written, "the policy acted on some verdicts")
	require.Equal(t, written, e.count("SELECT COUNT(*) FROM outbox WHERE destination = 'actions' AND sent_at IS NULL"),
		"committed with their verdicts, none published yet")
	first.kill()

	// SQS cut for 60 s under a relay that sends two rows a claim.
	e.mu.Lock()
	e.extraEnv = []string{"CHATGUARD_ACTIONS_QUEUE_URL=" + actions.URL, "CHATGUARD_ACTIONS_POLICY=" + policy, "CHATGUARD_OUTBOX_BATCH=2"}
	e.mu.Unlock()
	e.sqsProxy.SetDown(true)
	cutAt := time.Now()
	second := e.startWorker()
	for time.Since(cutAt) < 60*time.Second {
		time.Sleep(time.Second) // the cut's length: real processes retry against it
	}
	e.sqsProxy.SetDown(false)
	pending := func() int {
		return e.count("SELECT COUNT(*) FROM outbox WHERE destination = 'actions' AND sent_at IS NULL")
	}
	deadline := time.Now().Add(time.Minute)
	for pending() == written {
		require.True(t, time.Now().Before(deadline), "the relay sends after the cut")
		time.Sleep(50 * time.Millisecond) // watching a real relay
	}
	second.kill() // mid-batch: its claimed rows wait for their lease
	midway := pending()

	e.startWorker()
	deadline = time.Now().Add(2 * time.Minute)
	for pending() > 0 || e.depth(actions.URL) != 0 {
		require.True(t, time.Now().Before(deadline), "the actions drained within 2 minutes: %d pending, %d queued", pending(), e.depth(actions.URL))
		time.Sleep(500 * time.Millisecond) // watching real processes drain
	}

	keys := e.count("SELECT COUNT(DISTINCT idempotency_key) FROM protective_actions WHERE mode = 'on'")
	st := chat.Actions().Stats
	settled := st.Outcomes[chatapi.OutcomeApplied] + st.Outcomes[chatapi.OutcomeIgnored] + st.Outcomes[chatapi.OutcomeDropped]
	require.Equal(t, int64(keys), settled, "every key settled once at the chat service: %+v", st.Outcomes)
	require.Zero(t, st.Outcomes[chatapi.OutcomeRejected], "nothing dead-lettered")
	notices := e.count("SELECT COUNT(*) FROM protective_actions WHERE mode = 'on' AND action IN ('warn_counterpart', 'warn_sender')")
	shown := 0
	for _, room := range chat.Rooms() {
		ms, _ := chat.Messages(room)
		for _, m := range ms {
			if pipeline.IsActionNotice(m) {
				shown++
			}
		}
	}
	require.Equal(t, notices, shown, "one notice per key")
	t.Logf("figures: %d reviews; %d actions in mode on (%d notices); %d pending when the relay was killed; chat service: %d applied, %d ignored, %d duplicate copies dropped by key, %d dead-lettered",
		n, written, notices, midway, st.Outcomes[chatapi.OutcomeApplied], st.Outcomes[chatapi.OutcomeIgnored], st.Outcomes[chatapi.OutcomeDuplicate], st.Outcomes[chatapi.OutcomeRejected])
}
