package demo

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/chatreplay"
	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	sqsq "github.com/chatguard/chatguard/storage/sqs"
)

// demoPolicy is the real-time demo's protective-action policy: the
// shipped default with warn_counterpart and escalate on, everything else
// in dry run.
//
//go:embed policy.json
var demoPolicy []byte

// ProtectionReport is what protective actions did in a real-time run.
type ProtectionReport struct {
	// ScamRooms are the announced rooms the ground truth calls abusive;
	// Protected those of them with a notice shown; CleanNoticed the rooms
	// the truth calls clean with a notice. Flagged are the rooms a
	// verdict put under a warn_counterpart rule in mode on: each should
	// show one notice.
	ScamRooms, Protected, CleanNoticed, Flagged int
	// Doubled counts rooms with more than one notice about one offender
	// under one rule.
	Doubled int
	// Latency is, per notice, when the chat service showed it minus the
	// replayed sent_at of the newest message of the window its verdict
	// reviewed.
	Latency Percentiles
	// Publish is protection latency as chatguard measures it, per
	// forward `on` action: the actions queue's acceptance (the outbox
	// row's sent_at) minus the release of the newest message of its
	// verdict's window, the moment freshness counts from too. PublishPeak
	// is the same over the windows whose newest message the generated day
	// sent in its peak hours (zero outside a generated day).
	Publish, PublishPeak Percentiles
	// Applied, Duplicates, Rejected and Reversed are the chat service's
	// counts: actions applied (reversals included), copies dropped by key,
	// dead-lettered, and reversals applied.
	Applied, Duplicates, Rejected, Reversed int64
}

// actionsRun is the chat service's side in a real-time run.
type actionsRun struct {
	queue  queuePair
	policy string
	stop   context.CancelFunc
	done   chan struct{}
}

// startActions creates the actions queue, writes the demo policy and
// runs the chat API's consumer of the queue; it returns the workers'
// settings.
func (r *runner) startActions(ctx context.Context, rt *realtimeRun) (map[string]string, error) {
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	q, err := createQueuePair(qctx, r.sqs, unsafeName.ReplaceAllString(r.cfg.RunID, "-")+"-actions", 5)
	if err != nil {
		return nil, err
	}
	r.queues = append(r.queues, q)
	path := filepath.Join(r.cfg.LogDir, "demo-policy.json")
	if err := os.WriteFile(path, demoPolicy, 0o644); err != nil {
		return nil, fmt.Errorf("demo policy: %w", err)
	}
	open := func(name, url string) (*sqsq.Queue, error) {
		c := sqsq.DefaultConfig()
		c.Name, c.URL = name, url
		return sqsq.New(r.sqs, c)
	}
	in, err := open("actions", q.URL)
	if err != nil {
		return nil, err
	}
	dlq, err := open("actions-dlq", q.DLQURL)
	if err != nil {
		return nil, err
	}
	cctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	rt.actions = &actionsRun{queue: q, policy: path, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(rt.actions.done)
		_ = (&chatapi.Consumer{Server: rt.chat, Inbox: in, DLQ: dlq, Wait: time.Second}).Run(cctx)
		_ = in.Close(context.Background())
		_ = dlq.Close(context.Background())
	}()
	r.step("queue %s created; the chat API applies its actions; policy %s (warn_counterpart and escalate on)", q.Name, path)
	return map[string]string{"CHATGUARD_ACTIONS_QUEUE_URL": q.URL, "CHATGUARD_ACTIONS_POLICY": path}, nil
}

func (a *actionsRun) close() {
	if a != nil {
		a.stop()
		<-a.done
	}
}

// actionsSettled reports whether every action written has been published
// and the actions queue is empty.
func (r *runner) actionsSettled(ctx context.Context, rt *realtimeRun) (bool, error) {
	if rt.actions == nil {
		return true, nil
	}
	var pending int
	if err := r.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE destination = 'actions' AND sent_at IS NULL").Scan(&pending); err != nil {
		return false, fmt.Errorf("mysql: outbox: %w", err)
	}
	d, err := depth(ctx, r.sqs, rt.actions.queue.URL)
	if err != nil {
		return false, err
	}
	return pending == 0 && d.Total() == 0, nil
}

// overturnOne overturns the first protected room's actions through the
// moderation core, as the console's overturn does, and waits until the
// chat service has applied the reversal: the workers' relay publishes it.
func (r *runner) overturnOne(ctx context.Context, rt *realtimeRun) error {
	if rt.actions == nil {
		return nil
	}
	store := mysql.New(r.db)
	for _, room := range rt.chat.Rooms() {
		rows, err := store.RoomActions(ctx, room, 100)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(rows, func(a moderation.RoomAction) bool { return a.InForce() && a.Mode == pipeline.ModeOn })
		if i < 0 {
			continue
		}
		now := time.Now()
		if _, err := store.ReverseActions(ctx, moderation.Reversal{Key: rows[i].Verdict, At: now,
			ClearedUntil: now.Add(720 * time.Hour), ExpiresAt: now.Add(time.Hour)}); err != nil {
			return err
		}
		deadline := time.Now().Add(time.Minute)
		for rt.chat.Actions().Stats.Applied[pipeline.ActionRetractNotice] == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("the overturn of room %s was not applied by the chat service within a minute", room)
			}
			if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
				return err
			}
		}
		r.step("overturned room %s: its notice was retracted by the chat service", room)
		return nil
	}
	r.step("no protected room to overturn")
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// truth is the ground truth of the replayed rooms.
func (r *runner) truth() (map[string]sampledata.Truth, error) {
	dir := r.env["CHATGUARD_TRUTH_DIR"]
	if r.cfg.DayRooms > 0 {
		dir = filepath.Join(r.cfg.LogDir, "day-truth")
	}
	return sampledata.LoadTruth(dir)
}

// countReversed adds the chat service's counts, once the overturn is
// applied.
func (p *ProtectionReport) countReversed(rt *realtimeRun) {
	if p == nil {
		return
	}
	st := rt.chat.Actions().Stats
	p.Applied, p.Duplicates, p.Rejected = st.Outcomes[chatapi.OutcomeApplied], st.Outcomes[chatapi.OutcomeDuplicate], st.Outcomes[chatapi.OutcomeRejected]
	p.Reversed = st.Applied[pipeline.ActionRetractNotice] + st.Applied[pipeline.ActionReleaseTransaction] + st.Applied[pipeline.ActionLiftRestriction]
}

// protectionFigures reads what the chat service shows and the actions'
// rows into the report.
func (r *runner) protectionFigures(ctx context.Context, rt *realtimeRun) (*ProtectionReport, error) {
	if rt.actions == nil {
		return nil, nil
	}
	truth, err := r.truth()
	if err != nil {
		return nil, err
	}
	msgAt, err := noticeMessageTimes(ctx, r.db)
	if err != nil {
		return nil, err
	}
	rep := &ProtectionReport{}
	if err := r.db.QueryRowContext(ctx, `SELECT COUNT(DISTINCT room_id) FROM protective_actions
		WHERE action = 'warn_counterpart' AND mode = 'on' AND reverses IS NULL`).Scan(&rep.Flagged); err != nil {
		return nil, fmt.Errorf("mysql: actions: %w", err)
	}
	announced := map[string]bool{}
	for _, a := range rt.plan {
		announced[a.RoomID] = true
	}
	var lat []float64
	for room := range announced {
		notices := roomNotices(rt, room)
		scam := truth[room].Label == pipeline.LabelAbusive
		switch {
		case scam:
			rep.ScamRooms++
			if len(notices) > 0 {
				rep.Protected++
			}
		case len(notices) > 0:
			rep.CleanNoticed++
		}
		perRule := map[string]int{}
		for _, n := range notices {
			k := msgAt[n.MessageID]
			perRule[k.offenderRule]++
			if !k.at.IsZero() {
				lat = append(lat, n.SentAt.Sub(k.at).Seconds())
			}
		}
		for _, c := range perRule {
			if c > 1 {
				rep.Doubled++
				break
			}
		}
	}
	rep.Latency = percentiles(lat)
	pubs, err := actionPublishes(ctx, r.db)
	if err != nil {
		return nil, err
	}
	peak, _ := r.dayHours()
	rep.Publish, rep.PublishPeak = publishLatency(rt.plan, pubs, peak)
	return rep, nil
}

// actionPublish is a forward `on` action's verdict window and when the
// actions queue accepted it.
type actionPublish struct {
	RoomID     string
	Start, End time.Time
	SentAt     time.Time
}

// actionPublishes reads the forward `on` actions the relay has sent, with
// their outbox send times.
func actionPublishes(ctx context.Context, db *sql.DB) ([]actionPublish, error) {
	rows, err := db.QueryContext(ctx, `SELECT a.room_id, a.window_start, a.window_end, o.sent_at FROM protective_actions a
		JOIN outbox o ON o.destination = 'actions' AND o.event_id = a.idempotency_key
		WHERE a.mode = 'on' AND a.reverses IS NULL AND a.window_start IS NOT NULL AND o.sent_at IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("mysql: action publishes: %w", err)
	}
	defer rows.Close()
	var out []actionPublish
	for rows.Next() {
		var p actionPublish
		if err := rows.Scan(&p.RoomID, &p.Start, &p.End, &p.SentAt); err != nil {
			return nil, fmt.Errorf("mysql: action publishes: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// publishLatency is protection latency over pubs, and over those whose
// window's newest message the day sent in a peak hour: each publish minus
// the release of its window's newest message (as freshness counts).
func publishLatency(plan []chatreplay.Arrival, pubs []actionPublish, peak []int) (all, atPeak Percentiles) {
	byRoom := map[string][]chatreplay.Arrival{}
	for _, a := range plan {
		if !a.Repeat {
			byRoom[a.RoomID] = append(byRoom[a.RoomID], a)
		}
	}
	var lat, peakLat []float64
	for _, p := range pubs {
		_, hi, ok := windowSpan(byRoom[p.RoomID], windowRow{RoomID: p.RoomID, Start: p.Start, End: p.End})
		if !ok {
			continue
		}
		d := p.SentAt.Sub(hi.At).Seconds()
		lat = append(lat, d)
		if slices.Contains(peak, hi.LakeSentAt.Hour()) {
			peakLat = append(peakLat, d)
		}
	}
	return percentiles(lat), percentiles(peakLat)
}

// roomNotices are the notices the chat service shows in room.
func roomNotices(rt *realtimeRun, room string) []pipeline.ChatMessage {
	var out []pipeline.ChatMessage
	h, ok := rt.chat.Messages(room)
	if !ok {
		return nil
	}
	for _, m := range h {
		if pipeline.IsActionNotice(m) {
			out = append(out, m)
		}
	}
	return out
}

type noticeRow struct {
	at           time.Time
	offenderRule string
}

// noticeMessageTimes maps each `on` notice's message id (at the chat
// service) to the sent_at of the newest message of its window and its
// offender and rule.
func noticeMessageTimes(ctx context.Context, db *sql.DB) (map[string]noticeRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT idempotency_key, message_at, account_id, rule_id FROM protective_actions
		WHERE mode = 'on' AND action IN ('warn_counterpart', 'warn_sender')`)
	if err != nil {
		return nil, fmt.Errorf("mysql: actions: %w", err)
	}
	defer rows.Close()
	out := map[string]noticeRow{}
	for rows.Next() {
		var key, acct, rule string
		var at sql.NullTime
		if err := rows.Scan(&key, &at, &acct, &rule); err != nil {
			return nil, fmt.Errorf("mysql: actions: %w", err)
		}
		out[pipeline.ActionNoticeID(key)] = noticeRow{at: at.Time, offenderRule: acct + "/" + rule}
	}
	return out, rows.Err()
}

// print prints the protective actions' table.
func (p *ProtectionReport) print(pr func(string, ...any), freshnessP95 time.Duration) {
	if p == nil {
		return
	}
	pr("")
	pr("Protective actions (demo policy: warn_counterpart and escalate on; the chat API stand-in applies them):")
	pr("  %-44s %d", "scams announced (rooms the truth calls abusive)", p.ScamRooms)
	pr("  %-44s %d", "flagged under a warn_counterpart rule (on)", p.Flagged)
	pr("  %-44s %d", "protected (a notice shown in the room)", p.Protected)
	pr("  %-44s %d", "clean rooms with a notice", p.CleanNoticed)
	pr("  %-44s %d", "rooms with two notices for one offender", p.Doubled)
	pr("  %-44s %s", "scam's message to its notice", p.Latency)
	pr("  %-44s %s", "message to the action's publish (on actions)", p.Publish)
	against := p.Publish
	if p.PublishPeak.N > 0 {
		pr("  %-44s %s", "message to the action's publish, peak hours", p.PublishPeak)
		against = p.PublishPeak
	}
	pr("  %-44s %d", "actions reversed (applied reversals)", p.Reversed)
	pr("  chat service: %d applied, %d duplicate copies dropped by key, %d dead-lettered", p.Applied, p.Duplicates, p.Rejected)
	if against.N > 0 {
		pr("  protection latency p95 %s (message to publish%s) against freshness p95 %s + 10 s: %s", against.P95,
			map[bool]string{true: ", peak hours", false: ""}[p.PublishPeak.N > 0], freshnessP95,
			map[bool]string{true: "within", false: "over"}[against.P95 <= freshnessP95+10*time.Second])
	}
}
