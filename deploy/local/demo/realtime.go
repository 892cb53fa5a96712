package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/chatreplay"
	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline"
)

// RealtimeReport is what a real-time run measured.
type RealtimeReport struct {
	Speedup float64
	// Messages and Events are what the replayed chat service released and
	// announced; Rooms the rooms they fell in.
	Messages, Events, Rooms int
	// Verdicts are the done verdicts (one per fired window); Uncovered the
	// messages no done verdict's window covers; CoveredTwice those more
	// than one covers.
	Verdicts, Uncovered, CoveredTwice int
	// Freshness is, per done verdict, its commit time minus the replayed
	// sent_at of the window's newest message; FreshnessOldest the same for
	// its oldest. Review is its commit time minus its publish time.
	Freshness, FreshnessOldest, Review Percentiles
	// Hourly is what the hourly batch would give the same rooms: the end of
	// the lake hour minus the room's newest (and oldest) message of the hour,
	// plus the review latency measured here; computed, not run.
	Hourly, HourlyOldest Percentiles
}

// Percentiles are p50, p95 and p99 of a sample.
type Percentiles struct {
	N             int
	P50, P95, P99 time.Duration
}

func percentiles(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	d := func(p float64) time.Duration {
		return time.Duration(Percentile(xs, p) * float64(time.Second)).Round(100 * time.Millisecond)
	}
	return Percentiles{N: len(xs), P50: d(50), P95: d(95), P99: d(99)}
}

func (p Percentiles) String() string {
	if p.N == 0 {
		return "n/a"
	}
	return fmt.Sprintf("p50 %s  p95 %s  p99 %s  (n=%d)", p.P50, p.P95, p.P99, p.N)
}

// realtimeRun is the state a real-time run owns; close stops it.
type realtimeRun struct {
	events, reviews queuePair
	chat            *chatapi.Server
	http            *http.Server
	plan            []chatreplay.Arrival
	cancel          context.CancelFunc
	done            chan struct{}
	stats           chatreplay.Stats
	err             error
}

func (rt *realtimeRun) close() {
	if rt.cancel != nil {
		rt.cancel()
		<-rt.done
	}
	if rt.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if rt.http.Shutdown(ctx) != nil {
			_ = rt.http.Close()
		}
	}
}

func (rt *realtimeRun) replayed() bool {
	select {
	case <-rt.done:
		return true
	default:
		return false
	}
}

// runRealtime is run's real-time path: its queues, the replayed chat
// service, the trigger beside the consumer and workers, the watch, and
// the freshness figures.
func (r *runner) runRealtime(ctx context.Context) error {
	rt := &realtimeRun{}
	r.rt = rt
	if err := r.realtimeQueues(ctx, rt); err != nil {
		return err
	}
	chatURL, err := r.serveChat(rt)
	if err != nil {
		return err
	}
	if err := r.startServices(map[string]string{"CHATGUARD_CHAT_API_URL": chatURL, "CHATGUARD_REALTIME_QUEUE_URL": rt.reviews.URL}); err != nil {
		return err
	}
	if err := r.startTrigger(rt); err != nil {
		return err
	}
	if err := r.startReplay(ctx, rt); err != nil {
		return err
	}
	if err := r.watchRealtime(ctx, rt); err != nil {
		return err
	}
	if err := r.stopServices(); err != nil {
		return err
	}
	return r.finishRealtime(ctx, rt)
}

func (r *runner) realtimeQueues(ctx context.Context, rt *realtimeRun) error {
	prefix := unsafeName.ReplaceAllString(r.cfg.RunID, "-")
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	if rt.events, err = createQueuePair(qctx, r.sqs, prefix+"-chat-events", 5); err != nil {
		return err
	}
	r.queues = append(r.queues, rt.events)
	if rt.reviews, err = createQueuePair(qctx, r.sqs, prefix+"-review-realtime", 5); err != nil {
		return err
	}
	r.queues = append(r.queues, rt.reviews)
	r.step("queues %s and %s created, each with a -dlq", rt.events.Name, rt.reviews.Name)
	return nil
}

// serveChat serves the replay's chat API on a free local port.
func (r *runner) serveChat(rt *realtimeRun) (string, error) {
	chat, err := chatapi.New(chatapi.Config{Messages: map[string][]pipeline.ChatMessage{}})
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("chat api: %w", err)
	}
	rt.chat, rt.http = chat, &http.Server{Handler: chat.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rt.http.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

func (r *runner) startTrigger(rt *realtimeRun) error {
	p, err := startProc("trigger", r.bin("trigger"), nil, r.childEnv(map[string]string{
		"CHATGUARD_CHAT_EVENTS_QUEUE_URL":     rt.events.URL,
		"CHATGUARD_CHAT_EVENTS_DLQ_URL":       rt.events.DLQURL,
		"CHATGUARD_REVIEW_REALTIME_QUEUE_URL": rt.reviews.URL,
		"CHATGUARD_KEY_PREFIX":                "chatguard:demo:" + unsafeName.ReplaceAllString(r.cfg.RunID, "-") + ":",
		"CHATGUARD_ADMIN_ADDR":                "127.0.0.1:0",
		"CHATGUARD_WAIT_TIME":                 "5s",
	}), r.cfg.Root, r.cfg.LogDir, false)
	if err != nil {
		return err
	}
	r.procs = append(r.procs, p)
	r.step("started trigger (pid %d)", p.PID)
	return nil
}

// startReplay plans the window onto wall time from a few seconds ahead
// (the processes are starting) and replays it in the background.
func (r *runner) startReplay(ctx context.Context, rt *realtimeRun) error {
	start, end, err := r.window()
	if err != nil {
		return err
	}
	r.rep.WindowStart, r.rep.WindowEnd = start, end
	lake, err := sampledata.LoadMessages(r.env["CHATGUARD_LAKE_DIR"])
	if err != nil {
		return err
	}
	if rt.plan, err = chatreplay.Plan(lake, start, end, time.Now().Add(3*time.Second), r.cfg.Speedup); err != nil {
		return err
	}
	pub := chatreplay.SQSPublisher{API: r.sqs, QueueURL: rt.events.URL}
	rctx, cancel := context.WithCancel(ctx)
	rt.cancel, rt.done = cancel, make(chan struct{})
	go func() {
		defer close(rt.done)
		rt.stats, rt.err = (&chatreplay.Replayer{Store: rt.chat, Publisher: pub}).Run(rctx, rt.plan)
	}()
	r.step("replaying %d messages of %s to %s, %g times faster (%s of wall time)", len(rt.plan), start.Format(time.RFC3339), end.Format(time.RFC3339),
		r.cfg.Speedup, (time.Duration(float64(end.Sub(start)) / r.cfg.Speedup)).Round(time.Second))
	return nil
}

// window is the run's window: the configured one or the stack's sample.
func (r *runner) window() (time.Time, time.Time, error) {
	if !r.cfg.WindowStart.IsZero() {
		return r.cfg.WindowStart.UTC(), r.cfg.WindowEnd.UTC(), nil
	}
	v, err := r.env.Require("CHATGUARD_SAMPLE_WINDOW_START", "CHATGUARD_SAMPLE_WINDOW_END")
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	start, err1 := time.Parse(time.RFC3339, v[0])
	end, err2 := time.Parse(time.RFC3339, v[1])
	if err := errors.Join(err1, err2); err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("the stack's sample window: %w", err)
	}
	return start.UTC(), end.UTC(), nil
}

// watchRealtime prints progress until the replay is done, every replayed
// message is covered by a done verdict and the real-time queues are empty.
func (r *runner) watchRealtime(ctx context.Context, rt *realtimeRun) error {
	tick := time.NewTicker(r.cfg.Progress)
	defer tick.Stop()
	began := time.Now()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for real time to cover the window: %w", context.Cause(ctx))
		case <-tick.C:
		}
		if rt.replayed() && rt.err != nil {
			return fmt.Errorf("replay: %w", rt.err)
		}
		for _, p := range r.procs {
			if p.exited() {
				return fmt.Errorf("%s (pid %d) stopped on its own (%v); log %s", p.Name, p.PID, p.result(), p.Log)
			}
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		vs, err := loadWindows(lctx, r.db)
		var events, reviews Depth
		if err == nil {
			events, err = depth(lctx, r.sqs, rt.events.URL)
		}
		if err == nil {
			reviews, err = depth(lctx, r.sqs, rt.reviews.URL)
		}
		cancel()
		if err != nil {
			return err
		}
		released := rt.chatMessages()
		cov := coverage(rt.plan[:released], vs)
		fmt.Fprintf(r.out, "[%4ds] replayed %d/%d messages | chat-events: %s | review-realtime: %s | verdicts %d | messages covered %d/%d\n",
			int(time.Since(began).Seconds()), released, len(rt.plan), events, reviews, len(vs), released-cov.uncovered, released)
		if rt.replayed() && cov.uncovered == 0 && events.Total() == 0 && reviews.Total() == 0 {
			r.rep.DrainedAfter = time.Since(began)
			r.step("covered after %s: every replayed message is in a done verdict's window", r.rep.DrainedAfter.Round(time.Second))
			return nil
		}
	}
}

// chatMessages is how many arrivals of the plan the chat API serves: the
// replay releases them in plan order.
func (rt *realtimeRun) chatMessages() int {
	if rt.replayed() {
		return rt.stats.Messages
	}
	n := 0
	now := time.Now()
	for _, a := range rt.plan {
		if a.Message.SentAt.After(now) {
			break
		}
		n++
	}
	return n
}

// window is one done verdict's window, as real time committed it.
type windowRow struct {
	RoomID                   string
	Start, End               time.Time
	Source                   string
	PublishedAt, CommittedAt time.Time
}

func loadWindows(ctx context.Context, db *sql.DB) ([]windowRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT room_id, window_start, window_end, run_id, published_at, updated_at FROM verdicts WHERE status = 'done' ORDER BY room_id, window_start`)
	if err != nil {
		return nil, fmt.Errorf("mysql: verdicts: %w", err)
	}
	var out []windowRow
	for rows.Next() {
		var w windowRow
		if err := rows.Scan(&w.RoomID, &w.Start, &w.End, &w.Source, &w.PublishedAt, &w.CommittedAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("mysql: verdicts: %w", err)
		}
		out = append(out, w)
	}
	return out, errorsOf(rows)
}

type coverageCount struct{ uncovered, twice int }

// coverage counts the arrivals no window covers and those two or more do.
func coverage(plan []chatreplay.Arrival, ws []windowRow) coverageCount {
	byRoom := map[string][]windowRow{}
	for _, w := range ws {
		byRoom[w.RoomID] = append(byRoom[w.RoomID], w)
	}
	var c coverageCount
	for _, a := range plan {
		n := 0
		for _, w := range byRoom[a.RoomID] {
			if !a.Message.SentAt.Before(w.Start) && a.Message.SentAt.Before(w.End) {
				n++
			}
		}
		switch {
		case n == 0:
			c.uncovered++
		case n > 1:
			c.twice++
		}
	}
	return c
}

// finishRealtime reads the final verdicts and computes the figures.
func (r *runner) finishRealtime(ctx context.Context, rt *realtimeRun) error {
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ws, err := loadWindows(fctx, r.db)
	if err != nil {
		return err
	}
	r.rep.Realtime = realtimeFigures(rt.plan, ws, r.rep.WindowEnd, r.cfg.Speedup)
	r.rep.Realtime.Events = rt.stats.Events
	return nil
}

// realtimeFigures computes the report from the plan and the verdicts.
func realtimeFigures(plan []chatreplay.Arrival, ws []windowRow, hourEnd time.Time, speedup float64) *RealtimeReport {
	rep := &RealtimeReport{Speedup: speedup, Messages: len(plan), Verdicts: len(ws)}
	cov := coverage(plan, ws)
	rep.Uncovered, rep.CoveredTwice = cov.uncovered, cov.twice
	byRoom := map[string][]chatreplay.Arrival{}
	for _, a := range plan {
		byRoom[a.RoomID] = append(byRoom[a.RoomID], a)
	}
	rep.Rooms = len(byRoom)
	var fresh, oldest, review []float64
	reviewByRoom := map[string][]float64{}
	for _, w := range ws {
		var lo, hi time.Time
		for _, a := range byRoom[w.RoomID] {
			at := a.Message.SentAt
			if at.Before(w.Start) || !at.Before(w.End) {
				continue
			}
			if lo.IsZero() || at.Before(lo) {
				lo = at
			}
			if at.After(hi) {
				hi = at
			}
		}
		if hi.IsZero() {
			continue
		}
		fresh = append(fresh, w.CommittedAt.Sub(hi).Seconds())
		oldest = append(oldest, w.CommittedAt.Sub(lo).Seconds())
		rv := w.CommittedAt.Sub(w.PublishedAt).Seconds()
		review = append(review, rv)
		reviewByRoom[w.RoomID] = append(reviewByRoom[w.RoomID], rv)
	}
	rep.Freshness, rep.FreshnessOldest, rep.Review = percentiles(fresh), percentiles(oldest), percentiles(review)
	var hourly, hourlyOldest []float64
	rooms := make([]string, 0, len(byRoom))
	for room := range byRoom {
		rooms = append(rooms, room)
	}
	sort.Strings(rooms)
	for _, room := range rooms {
		as, rv := byRoom[room], reviewByRoom[room]
		if len(rv) == 0 {
			continue
		}
		lat := Percentile(rv, 50)
		hourly = append(hourly, hourEnd.Sub(as[len(as)-1].LakeSentAt).Seconds()+lat)
		hourlyOldest = append(hourlyOldest, hourEnd.Sub(as[0].LakeSentAt).Seconds()+lat)
	}
	rep.Hourly, rep.HourlyOldest = percentiles(hourly), percentiles(hourlyOldest)
	return rep
}

// printRealtime is Print's real-time summary.
func (r *Report) printRealtime(p func(string, ...any)) {
	rt := r.Realtime
	p("")
	p("chatguard demo, real time: window %s to %s replayed %g times faster; covered %s after the replay began (whole demo %s)",
		r.WindowStart.Format(time.RFC3339), r.WindowEnd.Format(time.RFC3339), rt.Speedup, r.DrainedAfter.Round(time.Second), r.Elapsed.Round(time.Second))
	p("  %d messages in %d rooms, %d chat events; %d done verdicts (windows fired by the trigger)", rt.Messages, rt.Rooms, rt.Events, rt.Verdicts)
	p("  messages never covered: %d; covered by two or more windows: %d", rt.Uncovered, rt.CoveredTwice)
	p("")
	p("Freshness (verdict commit minus the message's sent_at, wall time):")
	rows := [][2]string{
		{"real time, newest message of each window", rt.Freshness.String()},
		{"real time, oldest message of each window", rt.FreshnessOldest.String()},
		{"hourly batch, newest message of each room", rt.Hourly.String()},
		{"hourly batch, oldest message of each room", rt.HourlyOldest.String()},
		{"review (publish to commit), real time", rt.Review.String()},
	}
	for _, row := range rows {
		p("  %-44s %s", row[0], row[1])
	}
	p("  The hourly rows are computed, not run: the end of the lake hour minus the message's own sent_at, plus the room's")
	p("  review latency measured here (the DAG's start delay and the batch's Athena query would add to them).")
	p("  The trigger ran with its real --quiet and --max-delay; the replay compresses each conversation %g times, so", rt.Speedup)
	p("  busy rooms go quiet sooner than they would live. The models are the LLM simulator, not vLLM.")
	p("  Logs: %s", r.LogDir)
}
