package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatguard/chatguard/deploy/local/chaos"
	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/chatreplay"
	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatcontext"
)

// RealtimeReport is what a real-time run measured.
type RealtimeReport struct {
	Speedup float64
	// Messages and Events are what the replayed chat service released and
	// announced; Rooms the rooms they fell in.
	Messages, Events, Rooms int
	// Verdicts are the done verdicts (one per reviewed window); Uncovered the
	// messages no done verdict's window covers; CoveredTwice those more
	// than one covers.
	Verdicts, Uncovered, CoveredTwice int
	// Fetched and FetchedTwice count, from the chat stand-in's fetch log,
	// the messages some window fetch answered and those two or more
	// distinct windows answered (see fetchCoverage).
	Fetched, FetchedTwice int
	// ExtraCalls are the model calls of windows that covered nothing new;
	// DeadLettered the messages in the chat-events and review-realtime DLQs
	// at the end.
	ExtraCalls, DeadLettered int
	// Fault is the fault injected (empty for none) and what it did.
	Fault, FaultNote string
	// Freshness is, per done verdict, its commit time minus when the
	// window's newest message was announced (its replayed sent_at, or a
	// late event's publication); FreshnessOldest the same for
	// its oldest. Review is its commit time minus its publish time.
	Freshness, FreshnessOldest, Review Percentiles
	// PerMessage is freshness counted per message (see MessageFreshness).
	PerMessage MessageFreshness
	// Hourly is what the hourly batch would give the same rooms: the end of
	// the lake hour minus the room's newest (and oldest) message of the hour,
	// plus the review latency measured here; computed, not run.
	Hourly, HourlyOldest Percentiles
	// RoomHours are the (room, lake hour) pairs with messages: the reviews
	// the hourly batch would make.
	RoomHours int
	// Peak and Trough are freshness in the day's peak (19–22 UTC) and
	// trough (02–06 UTC) hours, real time then hourly (a generated day only).
	Peak, Trough [2]Percentiles
	// Bench holds the benchmark's cost figures (a generated day only).
	Bench *BenchFigures
	// Protection is what protective actions did (nil when none ran).
	Protection *ProtectionReport
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

	// fault is the injected fault (nil for none).
	fault *faultRun
	// actions is the chat service's side of protective actions.
	actions *actionsRun

	// The benchmark's probes (a generated day).
	trigger      *proc
	metricsURL   string
	keyPrefix    string
	redis        *redis.Client
	bytesPerRoom float64
	peakRooms    int
	cpu          time.Duration
	redisCalls   float64
}

func (rt *realtimeRun) close() {
	if rt.fault != nil && rt.fault.proxy != nil {
		rt.fault.proxy.Close()
	}
	if rt.redis != nil {
		_ = rt.redis.Close()
	}
	if rt.cancel != nil {
		rt.cancel()
		<-rt.done
	}
	rt.actions.close()
	if rt.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if rt.http.Shutdown(ctx) != nil {
			_ = rt.http.Close()
		}
	}
}

// messages is how many messages the plan holds (repeats aside).
func (rt *realtimeRun) messages() int {
	n := 0
	for _, a := range rt.plan {
		if !a.Repeat {
			n++
		}
	}
	return n
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
	if r.cfg.Fault != "" {
		rt.fault = &faultRun{name: r.cfg.Fault}
		if r.cfg.Fault == "redis" {
			p, err := chaos.NewProxy(r.env["CHATGUARD_REDIS_ADDR"])
			if err != nil {
				return err
			}
			rt.fault.proxy = p
		}
	}
	if err := r.realtimeQueues(ctx, rt); err != nil {
		return err
	}
	chatURL, err := r.serveChat(rt)
	if err != nil {
		return err
	}
	env, err := r.startActions(ctx, rt)
	if err != nil {
		return err
	}
	env["CHATGUARD_CHAT_API_URL"], env["CHATGUARD_REALTIME_QUEUE_URL"] = chatURL, rt.reviews.URL
	if err := r.startServices(env); err != nil {
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
	// The figures are read before the overturn, which retracts a notice.
	prot, err := r.protectionFigures(ctx, rt)
	if err != nil {
		return err
	}
	if err := r.overturnOne(ctx, rt); err != nil {
		return err
	}
	prot.countReversed(rt)
	if err := r.stopServices(); err != nil {
		return err
	}
	if err := r.finishRealtime(ctx, rt); err != nil {
		return err
	}
	r.rep.Realtime.Protection = prot
	return nil
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
	admin, err := freeAddr()
	if err != nil {
		return err
	}
	rt.metricsURL = "http://" + admin + "/metrics"
	rt.keyPrefix = "chatguard:demo:" + unsafeName.ReplaceAllString(r.cfg.RunID, "-") + ":"
	if rt.redis == nil {
		rt.redis = redis.NewClient(&redis.Options{Addr: r.env["CHATGUARD_REDIS_ADDR"]})
	}
	redisAddr := r.env["CHATGUARD_REDIS_ADDR"]
	if rt.fault != nil && rt.fault.proxy != nil {
		redisAddr = rt.fault.proxy.Addr()
	}
	p, err := startProc("trigger", r.bin("trigger"), nil, r.childEnv(map[string]string{
		"CHATGUARD_REDIS_ADDR":                redisAddr,
		"CHATGUARD_CHAT_EVENTS_QUEUE_URL":     rt.events.URL,
		"CHATGUARD_CHAT_EVENTS_DLQ_URL":       rt.events.DLQURL,
		"CHATGUARD_REVIEW_REALTIME_QUEUE_URL": rt.reviews.URL,
		"CHATGUARD_KEY_PREFIX":                rt.keyPrefix,
		"CHATGUARD_ADMIN_ADDR":                admin,
		"CHATGUARD_WAIT_TIME":                 "5s",
	}), r.cfg.Root, r.cfg.LogDir, false)
	if err != nil {
		return err
	}
	rt.trigger = p
	r.procs = append(r.procs, p)
	r.step("started trigger (pid %d)", p.PID)
	return nil
}

// startReplay plans the window onto wall time from a few seconds ahead
// (the processes are starting) and replays it in the background.
func (r *runner) startReplay(ctx context.Context, rt *realtimeRun) error {
	start, end, lake, err := r.replaySource(ctx)
	if err != nil {
		return err
	}
	r.rep.WindowStart, r.rep.WindowEnd = start, end
	begin := time.Now().Add(3 * time.Second)
	if rt.plan, err = chatreplay.Plan(lake, start, end, begin, r.cfg.Speedup); err != nil {
		return err
	}
	if rt.fault != nil {
		rt.plan = rt.fault.shapePlan(rt.plan, begin, time.Duration(float64(end.Sub(start))/r.cfg.Speedup))
		r.step("fault %s scheduled", rt.fault.name)
	}
	if r.cfg.LateShare > 0 {
		rt.plan = chatreplay.Late(rt.plan, r.cfg.LateShare, 15*time.Second, 2*time.Minute, 43)
		r.step("%g of the chat events announced 15 s to 2 min late", r.cfg.LateShare)
	}
	pub := chatreplay.SQSPublisher{API: r.sqs, QueueURL: rt.events.URL}
	rctx, cancel := context.WithCancel(ctx)
	rt.cancel, rt.done = cancel, make(chan struct{})
	go func() {
		defer close(rt.done)
		rt.stats, rt.err = (&chatreplay.Replayer{Store: rt.chat, Publisher: pub}).Run(rctx, rt.plan)
	}()
	r.step("replaying %d messages of %s to %s, %g times faster (%s of wall time)", rt.messages(), start.Format(time.RFC3339), end.Format(time.RFC3339),
		r.cfg.Speedup, (time.Duration(float64(end.Sub(start)) / r.cfg.Speedup)).Round(time.Second))
	return nil
}

// replaySource is what the run replays: a generated day (DayRooms) or
// the window of the stack's sample lake.
func (r *runner) replaySource(ctx context.Context) (time.Time, time.Time, map[string][]pipeline.ChatMessage, error) {
	if r.cfg.DayRooms > 0 {
		day, rooms, err := generateDay(ctx, r.cfg.DayRooms, r.cfg.LogDir)
		return day, day.Add(24 * time.Hour), rooms, err
	}
	start, end, err := r.window()
	if err != nil {
		return start, end, nil, err
	}
	lake, err := sampledata.LoadMessages(r.env["CHATGUARD_LAKE_DIR"])
	return start, end, lake, err
}

// generateDay writes a sample lake of n rooms under dir and retimes its
// rooms onto one day by chatreplay.DefaultDayShape, the spam rooms first
// into the bursts.
func generateDay(ctx context.Context, n int, dir string) (time.Time, map[string][]pipeline.ChatMessage, error) {
	lakeDir, truthDir := filepath.Join(dir, "day-lake"), filepath.Join(dir, "day-truth")
	if _, err := sampledata.Generate(ctx, sampledata.Options{LakeDir: lakeDir, TruthDir: truthDir, Seed: 28, Rooms: n, Days: 1}); err != nil {
		return time.Time{}, nil, err
	}
	rooms, err := sampledata.LoadMessages(lakeDir)
	if err != nil {
		return time.Time{}, nil, err
	}
	truth, err := sampledata.LoadTruth(truthDir)
	if err != nil {
		return time.Time{}, nil, err
	}
	var spam []string
	for id, t := range truth {
		if t.Category == pipeline.CategorySpam || t.Label == pipeline.LabelAbusive {
			spam = append(spam, id)
		}
	}
	sort.Strings(spam)
	day := sampledata.DefaultStart
	return day, chatreplay.Retime(rooms, day, chatreplay.DefaultDayShape(), spam, 28), nil
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
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for real time to cover the window: %w", context.Cause(ctx))
		case <-tick.C:
		}
		if rt.replayed() && rt.err != nil {
			return fmt.Errorf("replay: %w", rt.err)
		}
		for _, p := range r.procs {
			if p.exited() && !p.oneShot() {
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
		out, released := rt.released()
		cov := coverage(out, vs)
		if err := r.faultTick(ctx, rt, time.Now()); err != nil {
			return err
		}
		if r.cfg.DayRooms > 0 && n%5 == 0 {
			if err := rt.sample(ctx); err != nil {
				return err
			}
		}
		fmt.Fprintf(r.out, "[%4ds] replayed %d/%d messages | chat-events: %s | review-realtime: %s | verdicts %d | messages covered %d/%d\n",
			int(time.Since(began).Seconds()), released, rt.messages(), events, reviews, len(vs), released-cov.uncovered, released)
		settled := rt.replayed() && events.Total() == 0 && reviews.Total() == 0
		if settled {
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			settled, err = r.actionsSettled(actx, rt)
			cancel()
			if err != nil {
				return err
			}
		}
		waitFlush := false
		if rt.fault != nil {
			if waitFlush, err = r.flushStep(ctx, rt, settled, cov.uncovered); err != nil {
				return err
			}
		}
		if settled && !waitFlush && (cov.uncovered == 0 || rt.fault.gaveUp()) {
			if err := rt.probe(ctx); err != nil {
				return err
			}
			r.rep.DrainedAfter = time.Since(began)
			if cov.uncovered > 0 {
				r.step("settled after %s with %d replayed messages in no done verdict's window", r.rep.DrainedAfter.Round(time.Second), cov.uncovered)
				return nil
			}
			r.step("covered after %s: every replayed message is in a done verdict's window", r.rep.DrainedAfter.Round(time.Second))
			return nil
		}
	}
}

// released is the part of the plan released so far (all of it once the
// replay is done): the plan is in release order, repeats included.
func (rt *realtimeRun) released() ([]chatreplay.Arrival, int) {
	n := len(rt.plan)
	if !rt.replayed() {
		now := time.Now()
		n = sort.Search(len(rt.plan), func(i int) bool { return rt.plan[i].At.After(now) })
	}
	msgs := 0
	for _, a := range rt.plan[:n] {
		if !a.Repeat {
			msgs++
		}
	}
	return rt.plan[:n], msgs
}

// window is one done verdict's window, as real time committed it.
type windowRow struct {
	// Calls are the model calls its review made (verdict_stages attempts).
	Calls                    int
	RoomID                   string
	Start, End               time.Time
	PublishedAt, CommittedAt time.Time
}

func loadWindows(ctx context.Context, db *sql.DB) ([]windowRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT v.room_id, v.window_start, v.window_end, v.published_at, v.updated_at,
		(SELECT COALESCE(SUM(s.attempts), 0) FROM verdict_stages s WHERE s.verdict_id = v.id)
		FROM verdicts v WHERE v.status = 'done' ORDER BY v.room_id, v.window_start`)
	if err != nil {
		return nil, fmt.Errorf("mysql: verdicts: %w", err)
	}
	var out []windowRow
	for rows.Next() {
		var w windowRow
		if err := rows.Scan(&w.RoomID, &w.Start, &w.End, &w.PublishedAt, &w.CommittedAt, &w.Calls); err != nil {
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
		if a.Repeat {
			continue
		}
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

// fetchCoverage counts, from the chat stand-in's fetch log, the messages
// a window fetch answered and those that two or more distinct windows of
// their room answered (a retried fetch of one window counts once). The
// worker reads each window with its context, a fetch exactly lookback wide
// ending at the window's start: fetches that wide are taken as context
// (a real-time window is never an hour wide; the flush fault's sweep
// windows are, and are not counted then).
func fetchCoverage(fetches []chatapi.Fetch, lookback time.Duration) (fetched, twice int) {
	type window struct{ from, to time.Time }
	seen := map[string]map[window]bool{}
	for _, f := range fetches {
		if f.To.Sub(f.From) == lookback {
			continue
		}
		for _, id := range f.IDs {
			k := f.RoomID + "\x00" + id
			if seen[k] == nil {
				seen[k] = map[window]bool{}
			}
			seen[k][window{f.From, f.To}] = true
		}
	}
	for _, ws := range seen {
		fetched++
		if len(ws) > 1 {
			twice++
		}
	}
	return fetched, twice
}

// finishRealtime reads the final verdicts and computes the figures.
func (r *runner) finishRealtime(ctx context.Context, rt *realtimeRun) error {
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ws, err := loadWindows(fctx, r.db)
	if err != nil {
		return err
	}
	peak, trough := r.dayHours()
	r.rep.Realtime = realtimeFigures(rt.plan, ws, r.cfg.Speedup, peak, trough)
	r.rep.Realtime.Events = rt.stats.Events
	r.rep.Realtime.Fetched, r.rep.Realtime.FetchedTwice = fetchCoverage(rt.chat.Fetches(), chatcontext.DefaultLookback)
	for _, u := range []string{rt.events.DLQURL, rt.reviews.DLQURL} {
		d, err := depth(fctx, r.sqs, u)
		if err != nil {
			return err
		}
		r.rep.Realtime.DeadLettered += d.Total()
	}
	if rt.fault != nil {
		r.rep.Realtime.Fault, r.rep.Realtime.FaultNote = rt.fault.name, rt.fault.note()
	}
	if r.cfg.DayRooms > 0 {
		n, in, out, cached, err := tokenTotals(fctx, r.db)
		if err != nil {
			return err
		}
		rh := float64(max(r.rep.Realtime.RoomHours, 1))
		ev := float64(max(rt.stats.Events, 1))
		r.rep.Realtime.Bench = &BenchFigures{TriggerCPU: rt.cpu, EventsPerCPUSecond: ev / max(rt.cpu.Seconds(), 0.01),
			RedisCallsPerEvent: rt.redisCalls / ev, BytesPerPendingRoom: rt.bytesPerRoom, PeakRooms: rt.peakRooms,
			ReviewsPerRoomHour: float64(n) / rh, TokensPerRoomHour: float64(in+out) / rh, CachedShare: float64(cached) / float64(max(in, 1))}
	}
	return nil
}

// sample records the Redis memory per room holding state, keeping the
// largest.
func (rt *realtimeRun) sample(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	bytes, rooms, err := redisFootprint(sctx, rt.redis, rt.keyPrefix)
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if rooms > 0 {
		rt.bytesPerRoom = max(rt.bytesPerRoom, float64(bytes)/float64(rooms))
	}
	rt.peakRooms = max(rt.peakRooms, rooms)
	return nil
}

// probe reads the trigger's CPU time and Redis round trips before it stops.
func (rt *realtimeRun) probe(ctx context.Context) error {
	var err error
	if rt.cpu, err = cpuTime(rt.trigger.PID); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rt.redisCalls, err = metricSum(pctx, rt.metricsURL, "chatguard_trigger_redis_seconds_count")
	return err
}

// realtimeFigures computes the report from the plan and the verdicts.
// Freshness is also split by the lake hour of each window's newest message
// into the peak and trough hours given (none for a single hour).
func realtimeFigures(plan []chatreplay.Arrival, ws []windowRow, speedup float64, peak, trough []int) *RealtimeReport {
	rep := &RealtimeReport{Speedup: speedup, Verdicts: len(ws)}
	cov := coverage(plan, ws)
	rep.Uncovered, rep.CoveredTwice = cov.uncovered, cov.twice
	byRoom := map[string][]chatreplay.Arrival{}
	for _, a := range plan {
		if !a.Repeat {
			byRoom[a.RoomID] = append(byRoom[a.RoomID], a)
			rep.Messages++
		}
	}
	rep.Rooms = len(byRoom)
	var fresh, oldest, review []float64
	late := lateAnnouncements(plan)
	split := map[string][]float64{}
	reviewByRoom := map[string][]float64{}
	for _, w := range ws {
		lo, hi, ok := windowSpan(byRoom[w.RoomID], w)
		if !ok {
			continue
		}
		// Freshness counts from when the message's event was announced
		// (its release, or a late event's late publication: real time
		// cannot know of it sooner), not from a skewed producer's stamp.
		f := w.CommittedAt.Sub(announcedAt(hi, late)).Seconds()
		fresh = append(fresh, f)
		oldest = append(oldest, w.CommittedAt.Sub(lo.At).Seconds())
		rv := w.CommittedAt.Sub(w.PublishedAt).Seconds()
		review = append(review, rv)
		reviewByRoom[w.RoomID] = append(reviewByRoom[w.RoomID], rv)
		split[hourClass(hi.LakeSentAt.Hour(), peak, trough)+"/rt"] = append(split[hourClass(hi.LakeSentAt.Hour(), peak, trough)+"/rt"], f)
	}
	rep.Freshness, rep.FreshnessOldest, rep.Review = percentiles(fresh), percentiles(oldest), percentiles(review)
	rep.PerMessage = messageFreshness(plan, ws, peak)
	rep.ExtraCalls = redundantCalls(byRoom, ws)
	var hourly, hourlyOldest []float64
	for _, g := range roomHours(byRoom) {
		rv := reviewByRoom[g[0].RoomID]
		if len(rv) == 0 {
			continue
		}
		end := g[0].LakeSentAt.Truncate(time.Hour).Add(time.Hour)
		lat := Percentile(rv, 50)
		h := end.Sub(g[len(g)-1].LakeSentAt).Seconds() + lat
		hourly = append(hourly, h)
		hourlyOldest = append(hourlyOldest, end.Sub(g[0].LakeSentAt).Seconds()+lat)
		class := hourClass(g[0].LakeSentAt.Hour(), peak, trough)
		split[class+"/hourly"] = append(split[class+"/hourly"], h)
	}
	rep.RoomHours = len(roomHours(byRoom))
	rep.Hourly, rep.HourlyOldest = percentiles(hourly), percentiles(hourlyOldest)
	if len(peak) > 0 {
		rep.Peak = [2]Percentiles{percentiles(split["peak/rt"]), percentiles(split["peak/hourly"])}
		rep.Trough = [2]Percentiles{percentiles(split["trough/rt"]), percentiles(split["trough/hourly"])}
	}
	return rep
}

// redundantCalls sums the model calls of windows that covered no message
// an earlier-committed window had not covered already: reviews a fault
// made happen twice.
func redundantCalls(byRoom map[string][]chatreplay.Arrival, ws []windowRow) int {
	sorted := slices.Clone(ws)
	slices.SortStableFunc(sorted, func(a, b windowRow) int { return a.CommittedAt.Compare(b.CommittedAt) })
	covered := map[string]bool{}
	extra := 0
	for _, w := range sorted {
		news := false
		for _, a := range byRoom[w.RoomID] {
			at := a.Message.SentAt
			if at.Before(w.Start) || !at.Before(w.End) {
				continue
			}
			key := w.RoomID + "\x00" + a.Message.MessageID
			news = news || !covered[key]
			covered[key] = true
		}
		if !news {
			extra += w.Calls
		}
	}
	return extra
}

// windowSpan is the oldest and newest arrival of as inside w.
func windowSpan(as []chatreplay.Arrival, w windowRow) (lo, hi chatreplay.Arrival, ok bool) {
	for _, a := range as {
		at := a.Message.SentAt
		if at.Before(w.Start) || !at.Before(w.End) {
			continue
		}
		if !ok || at.Before(lo.Message.SentAt) {
			lo = a
		}
		if !ok || at.After(hi.Message.SentAt) {
			hi = a
		}
		ok = true
	}
	return lo, hi, ok
}

// roomHours groups each room's arrivals by the lake hour they were sent
// in: what one hourly batch window of the room would hold.
func roomHours(byRoom map[string][]chatreplay.Arrival) [][]chatreplay.Arrival {
	rooms := make([]string, 0, len(byRoom))
	for room := range byRoom {
		rooms = append(rooms, room)
	}
	sort.Strings(rooms)
	var out [][]chatreplay.Arrival
	for _, room := range rooms {
		as := byRoom[room]
		for i := 0; i < len(as); {
			j := i
			for j < len(as) && as[j].LakeSentAt.Truncate(time.Hour).Equal(as[i].LakeSentAt.Truncate(time.Hour)) {
				j++
			}
			out = append(out, as[i:j])
			i = j
		}
	}
	return out
}

// dayHours are a generated day's peak (19-21 UTC) and trough (02-05 UTC)
// hours; none for the sample hour.
func (r *runner) dayHours() (peak, trough []int) {
	if r.cfg.DayRooms > 0 {
		return []int{19, 20, 21}, []int{2, 3, 4, 5}
	}
	return nil, nil
}

func hourClass(h int, peak, trough []int) string {
	switch {
	case slices.Contains(peak, h):
		return "peak"
	case slices.Contains(trough, h):
		return "trough"
	}
	return "other"
}

// printRealtime is Print's real-time summary.
func (r *Report) printRealtime(p func(string, ...any)) {
	rt := r.Realtime
	p("")
	p("chatguard demo, real time: window %s to %s replayed %g times faster; covered %s after the replay began (whole demo %s)",
		r.WindowStart.Format(time.RFC3339), r.WindowEnd.Format(time.RFC3339), rt.Speedup, r.DrainedAfter.Round(time.Second), r.Elapsed.Round(time.Second))
	p("  %d messages in %d rooms, %d chat events; %d done verdicts (one per reviewed window: fired by the trigger, or the sweep's after a flush)", rt.Messages, rt.Rooms, rt.Events, rt.Verdicts)
	p("  messages never covered: %d; covered by two or more windows: %d; model calls of windows that covered nothing new: %d; dead-lettered: %d",
		rt.Uncovered, rt.CoveredTwice, rt.ExtraCalls, rt.DeadLettered)
	p("  from the chat stand-in's fetch log: %d messages fetched by a window, %d (%.1f %%) by two or more distinct windows",
		rt.Fetched, rt.FetchedTwice, 100*float64(rt.FetchedTwice)/float64(max(rt.Fetched, 1)))
	if rt.Fault != "" {
		p("  fault: %s", rt.FaultNote)
	}
	p("")
	p("Freshness (verdict commit minus the message's sent_at, wall time):")
	rows := [][2]string{
		{"real time, newest message of each window", rt.Freshness.String()},
		{"real time, oldest message of each window", rt.FreshnessOldest.String()},
		{"real time, per message announced on time", rt.PerMessage.OnTime.String()},
		{"real time, per late message, from announcing", rt.PerMessage.Late.String()},
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
	if b := rt.Bench; b != nil {
		p("")
		p("A generated day (%d rooms, %d room-hours; peak 20x the trough, spam bursts) in %s of wall time:", rt.Rooms, rt.RoomHours,
			(24 * time.Hour / time.Duration(rt.Speedup)).Round(time.Second))
		p("  %-44s %s", "peak hours (19-22 UTC), real time", rt.Peak[0])
		p("  %-44s %s", "peak hours, real time, per on-time message", rt.PerMessage.OnTimePeak)
		p("  %-44s %s", "peak hours, hourly batch (computed)", rt.Peak[1])
		p("  %-44s %s", "trough hours (02-06 UTC), real time", rt.Trough[0])
		p("  %-44s %s", "trough hours, hourly batch (computed)", rt.Trough[1])
		p("  trigger: %s CPU for %d chat events: %.0f events per CPU-second; %.2f Redis round trips per event",
			b.TriggerCPU, rt.Events, b.EventsPerCPUSecond, b.RedisCallsPerEvent)
		p("  Redis: at most %.0f bytes per room holding state (MEMORY USAGE, sampled every 10 s; at most %d rooms at once)", b.BytesPerPendingRoom, b.PeakRooms)
		p("  cost of freshness: %.2f reviews and %.0f model tokens per active room-hour in real time (the hourly batch: 1 review);"+
			" %.0f %% of prompt tokens from the prefix cache", b.ReviewsPerRoomHour, b.TokensPerRoomHour, 100*b.CachedShare)
	}
	fresh := rt.Freshness.P95
	if rt.Bench != nil {
		fresh = rt.Peak[0].P95
	}
	rt.Protection.print(p, fresh)
	p("  Logs: %s", r.LogDir)
}
