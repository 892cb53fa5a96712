package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsathena "github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/lake"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/batchrun"
	athenasrc "github.com/chatguard/chatguard/storage/athena"
)

// soakSize is one soak's load and schedule: make soak's (CHATGUARD_SOAK=
// full, CHATGUARD_SOAK_MINUTES, CHATGUARD_SOAK_SEED) or make test's short
// form (a minute, a fixed seed, fewer events).
type soakSize struct {
	full       bool
	seed       uint64
	load       time.Duration // how long load runs and the nemesis acts
	baseline   time.Duration // when memory and goroutines are first compared (minute 5 of 30)
	waveEvery  time.Duration
	waveEvents int
	poisonWave int // every poisonWave-th wave carries one poison message
	console    time.Duration
	settle     time.Duration // the bound on draining after the load
	spec       nemesisSpec
}

// shortSeed is the short form's seed: one whose schedule has every kind of
// fault (TestNemesisSchedule keeps it so).
const shortSeed = 43

// goroutineSlack is how many goroutines a process may end with beyond its
// baseline (or 10 %, if more).
const goroutineSlack = 6

// shortLoad is how long the short form's load and nemesis run.
const shortLoad = 40 * time.Second

func soakSizes(t *testing.T) soakSize {
	if os.Getenv("CHATGUARD_SOAK") != "full" {
		load := shortLoad
		return soakSize{seed: shortSeed, load: load, baseline: load / 6, waveEvery: 8 * time.Second, waveEvents: 5, poisonWave: 3,
			console: 4 * time.Second, settle: 2 * time.Minute, spec: shortSpec(load)}
	}
	minutes, err := strconv.Atoi(cmpOr(os.Getenv("CHATGUARD_SOAK_MINUTES"), "30"))
	require.NoError(t, err, "CHATGUARD_SOAK_MINUTES")
	require.GreaterOrEqual(t, minutes, 6, "a soak compares minute 5 to its end")
	seed := uint64(time.Now().UnixNano() % 1_000_000)
	if v := os.Getenv("CHATGUARD_SOAK_SEED"); v != "" {
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "CHATGUARD_SOAK_SEED")
	}
	load := time.Duration(minutes) * time.Minute
	return soakSize{full: true, seed: seed, load: load, baseline: load / 6, waveEvery: time.Minute, waveEvents: 30, poisonWave: 5,
		console: 10 * time.Second, settle: 10 * time.Minute, spec: fullSpec(load)}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// soak is one soak's world: the chaos env (its proxies and simulators),
// a Redis proxy, two workers, the consumer, the console, and what they did.
type soak struct {
	*env
	size       soakSize
	redisProxy *Proxy
	root       string
	consumer   *worker
	console    *worker
	consoleURL string
	batchBin   string
	hours      []hourRooms // the sample's hours: the batch's, then the console's
	start      time.Time

	mu        sync.Mutex
	w         [2]*worker
	published int
	runs      []string
	poison    []string
	waveErrs  []string
	od        onDemand
	applied   []string
	samples   map[string]*procSamples
}

// onDemand counts the console's on-demand reviews.
type onDemand struct{ started, verdict, refused, other int }

// procSamples is one process slot's RSS and goroutines, sampled every
// 10 s.
type procSamples struct {
	series             []sampled
	restarts           int
	restartedAfterBase bool
}

// sampled is one sample, at its offset from the soak's start.
type sampled struct {
	at       time.Duration
	rss, gor float64
}

// median is the median RSS and goroutines of the samples in [from, to),
// and false when there are none. A median over a minute, not one sample,
// is the level: one sample of a garbage-collected heap lands anywhere on
// its sawtooth.
func (p *procSamples) median(from, to time.Duration) (rss, gor float64, ok bool) {
	var rs, gs []float64
	for _, x := range p.series {
		if x.at >= from && x.at < to {
			rs, gs = append(rs, x.rss), append(gs, x.gor)
		}
	}
	if len(rs) == 0 {
		return 0, 0, false
	}
	slices.Sort(rs)
	slices.Sort(gs)
	return rs[len(rs)/2], gs[len(gs)/2], true
}

func (p *procSamples) last() sampled { return p.series[len(p.series)-1] }

func (p *procSamples) peak() float64 {
	m := 0.0
	for _, x := range p.series {
		m = max(m, x.rss)
	}
	return m
}

// TestSoak runs the binaries under load while a seeded nemesis breaks
// their dependencies and kills a worker, then checks that nothing was lost
// and nothing grew. Without CHATGUARD_SOAK=full it is the short form.
func TestSoak(t *testing.T) {
	sz := soakSizes(t)
	began := time.Now()
	s := newSoak(t, sz)
	t.Logf("set up in %s", time.Since(began).Round(time.Second))
	faults := schedule(sz.seed, sz.spec)
	fmt.Print(printSchedule(sz.seed, faults))

	ctx, cancel := context.WithCancel(context.Background())
	var load sync.WaitGroup
	s.start = time.Now()
	load.Go(func() { s.waves(ctx) })
	load.Go(func() { s.onDemandReviews(ctx) })
	s.runNemesis(faults)
	cancel()
	load.Wait()

	s.drain()
	began = time.Now()
	s.report(t)
	t.Logf("report in %s", time.Since(began).Round(time.Second))
}

func newSoak(t *testing.T, sz soakSize) *soak {
	redisProxy, err := NewProxy(stacktest.Get(t, "CHATGUARD_REDIS_ADDR"))
	require.NoError(t, err)
	t.Cleanup(redisProxy.Close)
	ns := stacktest.Unique("soak")
	e := newEnv(t, "CHATGUARD_REDIS_ADDR="+redisProxy.Addr(), "CHATGUARD_STOP_CHANNEL="+ns+"-stop", "CHATGUARD_STOP_KEY_PREFIX="+ns+":stop:",
		"CHATGUARD_FLEET_KEY_PREFIX="+ns+":fleet:", "CHATGUARD_MAX_AGE=0")
	s := &soak{env: e, size: sz, redisProxy: redisProxy, samples: map[string]*procSamples{}}
	_, s.root = newLakeRoot(t)
	// The consumer reaches SQS through the proxy the nemesis cuts; the
	// lake's S3 is spared (the fault suite's own S3 scenario covers it).
	s.consumer = startConsumer(t, e.feedback.URL, s.root, "AWS_ENDPOINT_URL_SQS=http://"+e.sqsProxy.Addr())
	s.w = [2]*worker{e.startWorker(), e.startWorker()}
	s.startConsole(ns)
	s.batchBin = standin.Build(t, "github.com/chatguard/chatguard/cmd/batch")
	s.hours = sampleHours(t)
	require.Greater(t, len(s.hours), consoleHours)
	return s
}

// startConsole runs the console binary on the same dependencies as the
// workers, with the development login the soak signs in through.
func (s *soak) startConsole(ns string) {
	t := s.t
	w := &worker{exited: make(chan struct{})}
	w.cmd = exec.Command(standin.Build(t, "github.com/chatguard/chatguard/cmd/console"))
	w.cmd.Env = append(s.depEnv(), "CHATGUARD_LISTEN_ADDR=127.0.0.1:0", "CHATGUARD_DEV_LOGIN=true",
		"CHATGUARD_LIVE_KEY_PREFIX="+ns+":live:", "CHATGUARD_REVIEW_TIMEOUT=90s", "CHATGUARD_CHAT_TIMEOUT=2s",
		"CHATGUARD_ATTEMPT_TIMEOUT=20s", "CHATGUARD_MAX_REVIEWS=4", "CHATGUARD_LOG_LEVEL=info")
	w.cmd.Env = append(w.cmd.Env, s.extraEnv...)
	startProc(t, w)
	t.Cleanup(w.kill)
	m := regexp.MustCompile(`"url":"([^"]+)"`).FindStringSubmatch(w.tail())
	require.NotNil(t, m, "the console logs its URL")
	s.console, s.consoleURL = w, m[1]
}

// elapsed is the time since the soak began.
func (s *soak) elapsed() time.Duration { return time.Since(s.start) }

// logf records a line of the fault log and prints it as it happens.
func (s *soak) logf(format string, args ...any) {
	line := fmt.Sprintf("%s  ", fmtOffset(s.elapsed())) + fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.applied = append(s.applied, line)
	s.mu.Unlock()
	fmt.Println(line)
}

// action is one step of the nemesis: at, do.
type action struct {
	at time.Duration
	do func()
}

// runNemesis walks the schedule (applying and healing each fault at its
// time) and samples every process every 10 s until the load ends.
func (s *soak) runNemesis(faults []fault) {
	var acts []action
	for _, f := range faults {
		set := s.faultSetter(f.Kind)
		on, off := fmt.Sprintf("%s for %s", f.Kind, f.For.Round(time.Second)), string(f.Kind)+" healed"
		if f.Kind == killWorker {
			on, off = fmt.Sprintf("SIGKILL worker-2, restarted %s later", f.For.Round(time.Second)), "worker-2 restarted"
		}
		acts = append(acts, action{f.At, func() { s.logf("%s", on); set(true) }},
			action{f.At + f.For, func() { set(false); s.logf("%s", off) }})
	}
	sort.SliceStable(acts, func(i, j int) bool { return acts[i].at < acts[j].at })
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for len(acts) > 0 || s.elapsed() < s.size.load {
		next := s.size.load
		if len(acts) > 0 {
			next = acts[0].at
		}
		timer := time.NewTimer(max(next-s.elapsed(), 0))
		select {
		case <-tick.C:
			timer.Stop()
			s.sample()
			continue
		case <-timer.C:
		}
		if len(acts) == 0 {
			return
		}
		acts[0].do()
		acts = acts[1:]
	}
}

// faultSetter returns what applies (true) and heals (false) a fault.
func (s *soak) faultSetter(k faultKind) func(bool) {
	pools := func(both bool) func(bool) {
		return func(on bool) {
			cfg := fastSim
			if on {
				cfg = `{"faults":{"500":1}}`
			}
			s.prim.Configure(s.t, cfg)
			if both {
				s.fb.Configure(s.t, cfg)
			}
		}
	}
	switch k {
	case cutMySQL:
		return s.mysqlProxy.SetDown
	case cutRedis:
		return s.redisProxy.SetDown
	case cutChat:
		return s.chatProxy.SetDown
	case cutSQS:
		return s.sqsProxy.SetDown
	case cutPrimary:
		return pools(false)
	case cutPools:
		return pools(true)
	case killWorker:
		return s.killSecond
	}
	panic("unknown fault " + string(k))
}

// killSecond SIGKILLs the second worker (on) and starts its replacement
// (off). The first worker lives the whole soak, so that its memory and
// goroutines are compared over the whole run.
func (s *soak) killSecond(on bool) {
	s.mu.Lock()
	w := s.w[1]
	s.mu.Unlock()
	if on {
		w.kill()
		return
	}
	nw := s.startWorker()
	s.mu.Lock()
	s.w[1] = nw
	if p := s.samples["worker-2"]; p != nil {
		p.restarts++
		p.restartedAfterBase = p.restartedAfterBase || s.elapsed() > s.size.baseline
	}
	s.mu.Unlock()
}

// procs are the process slots the soak watches, by name.
func (s *soak) procs() map[string]*worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]*worker{"worker-1": s.w[0], "worker-2": s.w[1], "consumer": s.consumer, "console": s.console}
}

// sample reads every process's RSS and goroutines.
func (s *soak) sample() {
	at := s.elapsed()
	for name, w := range s.procs() {
		select {
		case <-w.exited:
			continue
		default:
		}
		rss, g := w.rss(), w.metric("go_goroutines ")
		if rss == 0 || g == 0 {
			continue // the process is between a kill and its restart, or busy
		}
		s.mu.Lock()
		p := s.samples[name]
		if p == nil {
			p = &procSamples{}
			s.samples[name] = p
		}
		p.series = append(p.series, sampled{at, rss, g})
		s.mu.Unlock()
	}
}

// sampleHours are the sample's UTC hours with their rooms, in order.
func sampleHours(t *testing.T) []hourRooms {
	f, err := os.Open(filepath.Join(stacktest.TruthDir(t), "groundtruth.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	by := map[time.Time][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct {
			RoomID string    `json:"room_id"`
			First  time.Time `json:"first_message_at"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		h := r.First.UTC().Truncate(time.Hour)
		by[h] = append(by[h], r.RoomID)
	}
	var out []hourRooms
	for h, rooms := range by {
		out = append(out, hourRooms{h, rooms})
	}
	slices.SortFunc(out, func(a, b hourRooms) int { return a.hour.Compare(b.hour) })
	return out
}

type hourRooms struct {
	hour  time.Time
	rooms []string
}

// consoleHours is how many of the sample's last hours are the console's:
// batch waves never publish them, so its on-demand reviews and the batch's
// never share a review key.
const consoleHours = 6

// waves runs the batch binary every waveEvery over the next hour of the
// sample (at most waveEvents rooms), adding a poison message every
// poisonWave-th wave, until ctx ends.
func (s *soak) waves(ctx context.Context) {
	hours := s.hours[:len(s.hours)-consoleHours]
	tick := time.NewTicker(s.size.waveEvery)
	defer tick.Stop()
	for n := 1; ; n++ {
		h := hours[(n-1)%len(hours)].hour
		s.wave(n, h)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// wave runs one batch over hour and sends its poison message, if it has
// one. A wave that began finishes (bounded) even when the load ends.
func (s *soak) wave(n int, hour time.Time) {
	run := fmt.Sprintf("soak-%s-%03d", s.root, n)
	wctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(wctx, s.batchBin, "--window-start", hour.Format(time.RFC3339), "--window-end", hour.Add(time.Hour).Format(time.RFC3339),
		"--max-events", strconv.Itoa(s.size.waveEvents), "--run-id", run)
	cmd.Env = append(os.Environ(), "CHATGUARD_REVIEW_QUEUE_URL="+s.queue.URL, "CHATGUARD_MYSQL_DSN="+s.directDSN,
		"CHATGUARD_ATHENA_POLL_MAX=200ms", "CHATGUARD_LOG_LEVEL=warn")
	out, err := cmd.Output()
	var sum batchrun.Summary
	if jerr := json.Unmarshal(out, &sum); err != nil || jerr != nil || sum.Failed > 0 {
		s.mu.Lock()
		s.waveErrs = append(s.waveErrs, fmt.Sprintf("wave %d: %v %s", n, err, strings.TrimSpace(string(out))))
		s.mu.Unlock()
	}
	var poison string
	if n%s.size.poisonWave == 0 {
		poison = fmt.Sprintf("poison-%02d", n/s.size.poisonWave)
		_, perr := s.sqs.SendMessage(wctx, &sqs.SendMessageInput{QueueUrl: aws.String(s.queue.URL), MessageBody: aws.String(poison + ": not a review event")})
		if perr != nil {
			poison = ""
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.published += int(sum.Published)
	s.runs = append(s.runs, run)
	if poison != "" {
		s.poison = append(s.poison, poison)
	}
}

// onDemandReviews starts one review through the console every console
// interval, each over a room of the console's hours, until ctx ends.
func (s *soak) onDemandReviews(ctx context.Context) {
	var rooms []hourRooms
	for _, h := range s.hours[len(s.hours)-consoleHours:] {
		for _, r := range h.rooms {
			rooms = append(rooms, hourRooms{h.hour, []string{r}})
		}
	}
	c, csrf, err := s.consoleSession()
	if err != nil {
		s.mu.Lock()
		s.waveErrs = append(s.waveErrs, "console login: "+err.Error())
		s.mu.Unlock()
		return
	}
	var running sync.WaitGroup
	defer running.Wait()
	tick := time.NewTicker(s.size.console)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r := rooms[n%len(rooms)]
		running.Go(func() { s.review(c, csrf, r.rooms[0], r.hour) })
	}
}

// consoleSession signs in through the development login and returns a
// client holding the session and the page's CSRF token.
func (s *soak) consoleSession() (*http.Client, string, error) {
	c := &http.Client{Timeout: 2 * time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(s.consoleURL+"/login", url.Values{"email": {"soak@example.com"}, "next": {"/queue"}})
	if err != nil {
		return nil, "", err
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "chatguard_session" {
			cookie = ck
		}
	}
	if cookie == nil {
		return nil, "", fmt.Errorf("no session cookie (%s)", resp.Status)
	}
	c.Jar = &oneCookie{cookie}
	resp, err = c.Get(s.consoleURL + "/queue")
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var page strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&page)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.String())
	if m == nil {
		return nil, "", fmt.Errorf("no CSRF token on /queue (%s)", resp.Status)
	}
	return c, m[1], nil
}

// oneCookie is a cookie jar of one session cookie.
type oneCookie struct{ c *http.Cookie }

func (j *oneCookie) SetCookies(*url.URL, []*http.Cookie) {}
func (j *oneCookie) Cookies(*url.URL) []*http.Cookie     { return []*http.Cookie{j.c} }

// review runs one on-demand review to its end and counts how it ended.
func (s *soak) review(c *http.Client, csrf, room string, hour time.Time) {
	body, _ := json.Marshal(map[string]string{"room_id": room, "window_start": hour.Format(time.RFC3339), "window_end": hour.Add(time.Hour).Format(time.RFC3339)})
	req, _ := http.NewRequest(http.MethodPost, s.consoleURL+"/v1/reviews", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", csrf)
	count := func(f func(*onDemand)) {
		s.mu.Lock()
		defer s.mu.Unlock()
		f(&s.od)
	}
	resp, err := c.Do(req)
	if err != nil {
		count(func(o *onDemand) { o.other++ })
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		count(func(o *onDemand) { o.refused++ })
		return
	}
	count(func(o *onDemand) { o.started++ })
	if resp.StatusCode != http.StatusOK {
		count(func(o *onDemand) { o.other++ })
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if sc.Text() == "event: verdict" {
			count(func(o *onDemand) { o.verdict++ })
			return
		}
	}
	count(func(o *onDemand) { o.other++ })
}

// batchDone is how many of the batch's reviews have a done verdict.
func (s *soak) batchDone() int {
	return s.count("SELECT COUNT(*) FROM verdicts WHERE status = 'done' AND run_id LIKE 'soak-%'")
}

// drain waits, bounded by the size's settle, until every published review
// is done and the review queue is empty, then until the consumer has
// written every lake event; it samples the processes on the way and once
// more at the end.
func (s *soak) drain() {
	deadline := time.Now().Add(s.size.settle)
	last := time.Now()
	for time.Now().Before(deadline) {
		if s.batchDone() >= s.published && s.depth(s.queue.URL) == 0 {
			break
		}
		if time.Since(last) >= 10*time.Second {
			s.sample()
			last = time.Now()
		}
		time.Sleep(time.Second) // watching real processes drain
	}
	for time.Now().Before(deadline) {
		if s.depth(s.feedback.URL) == 0 && s.consumer.metric("chatguard_consumer_buffered_events ") == 0 {
			break
		}
		time.Sleep(time.Second) // watching the consumer drain
	}
	s.logf("drained")
	s.sample()
}

// deadLetters receives every message of the review DLQ (bounded) and
// splits them into the poison ones, named, and the rest.
func (s *soak) deadLetters() (poison []string, other int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seen := map[string]bool{}
	for empty := 0; empty < 3 && ctx.Err() == nil; {
		out, err := s.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.queue.DLQURL), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, VisibilityTimeout: 300})
		if err != nil || len(out.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range out.Messages {
			if seen[*m.MessageId] {
				continue
			}
			seen[*m.MessageId] = true
			if name, _, ok := strings.Cut(*m.Body, ": not a review event"); ok && strings.HasPrefix(name, "poison-") {
				poison = append(poison, name)
			} else {
				other++
			}
		}
	}
	slices.Sort(poison)
	return poison, other
}

// lakeFigures are what the lake holds of the soak.
type lakeFigures struct {
	rows, distinct map[string]int // by table, through its _dedup view
	raw            map[string]int // by table, the raw copies
	verdictWant    int            // done batch verdicts, each owing one verdict event
	verdictMissing int            // of them, absent from verdict_dedup
}

// lake reads the consumer's output through the Athena stand-in and the
// analysts' _dedup views.
func (s *soak) lake() lakeFigures {
	t := s.t
	tables := map[string]string{}
	for _, tb := range []string{"verdict", "inference_log"} {
		tables[tb] = s.root + "/events/event_type=" + tb + "/dt=*/hour=*/*.parquet"
	}
	q := newLakeQuerier(t, stacktest.LakeDir(t), tables)
	f := lakeFigures{rows: map[string]int{}, distinct: map[string]int{}, raw: map[string]int{}}
	for tb := range tables {
		r := q.dedup(t, tb, "SELECT count(*), count(DISTINCT event_id) FROM "+tb+"_dedup")
		f.rows[tb], _ = strconv.Atoi(r[0][0])
		f.distinct[tb], _ = strconv.Atoi(r[0][1])
		f.raw[tb], _ = strconv.Atoi(q.dedup(t, tb, "SELECT count(*) FROM "+tb)[0][0])
	}
	present := map[string]bool{}
	for _, r := range q.dedup(t, "verdict", "SELECT event_id FROM verdict_dedup") {
		present[r[0]] = true
	}
	rows, err := s.db.Query("SELECT room_id, window_start, window_end, pipeline_version FROM verdicts WHERE status = 'done' AND run_id LIKE 'soak-%'")
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var k pipeline.ReviewKey
		require.NoError(t, rows.Scan(&k.RoomID, &k.WindowStart, &k.WindowEnd, &k.PipelineVersion))
		f.verdictWant++
		if !present[pipeline.VerdictEventID(k, pipeline.StatusDone)] {
			f.verdictMissing++
		}
	}
	require.NoError(t, rows.Err())
	return f
}

// report prints the soak's table, its fault log and its processes, and
// asserts the pass criteria.
func (s *soak) report(t *testing.T) {
	poison, deadOther := s.deadLetters()
	done := s.batchDone()
	notDone := s.count("SELECT COUNT(*) FROM verdicts WHERE status <> 'done' AND run_id LIKE 'soak-%'")
	dupRows := s.count("SELECT COUNT(*) - COUNT(DISTINCT room_id, window_start, window_end, pipeline_version) FROM verdicts")
	calls, recorded := s.modelCalls(), s.recordedCalls()
	lk := s.lake()
	s.mu.Lock()
	defer s.mu.Unlock()
	mode := "short form"
	if s.size.full {
		mode = "make soak"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nsoak (%s): seed %d, load %s, %d waves, 2 workers, consumer, console\n\n", mode, s.size.seed, s.size.load, len(s.runs))
	b.WriteString("| figure | value |\n| --- | --- |\n")
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(format, args...)) }
	row("events published (batch waves)", "%d, and %d poison", s.published, len(s.poison))
	row("done verdicts", "%d of %d (other statuses %d)", done, s.published, notDone)
	row("dead-lettered", "%d: poison %d (%s), other %d", len(poison)+deadOther, len(poison), strings.Join(poison, ", "), deadOther)
	row("lake events (verdict, inference_log) after _dedup", "%d, %d rows; %d, %d distinct; raw copies %d, %d",
		lk.rows["verdict"], lk.rows["inference_log"], lk.distinct["verdict"], lk.distinct["inference_log"], lk.raw["verdict"], lk.raw["inference_log"])
	row("verdict events expected (one per done verdict) / present", "%d / %d", lk.verdictWant, lk.verdictWant-lk.verdictMissing)
	row("duplicate verdict rows", "%d", dupRows)
	row("extra model calls (beyond the stored verdicts' attempts)", "%d of %d", calls-recorded, calls)
	row("on-demand reviews started / ended with a verdict / refused / other", "%d / %d / %d / %d", s.od.started, s.od.verdict, s.od.refused, s.od.other)
	win := max(s.size.load/30, 10*time.Second) // minute 5 is [05:00, 06:00) of 30
	baseFrom, endFrom := s.size.baseline, s.size.load-win
	fmt.Fprintf(&b, "\n| process | RSS %s–%s (median) | RSS %s–%s (median) | growth | RSS after drain | RSS peak | goroutines %s–%s (median) | goroutines after drain | restarts |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
		fmtOffset(baseFrom), fmtOffset(baseFrom+win), fmtOffset(endFrom), fmtOffset(s.size.load), fmtOffset(baseFrom), fmtOffset(baseFrom+win))
	names := slices.Sorted(maps.Keys(s.samples))
	type level struct{ baseRSS, baseG, endRSS float64 }
	levels := map[string]level{}
	for _, n := range names {
		p := s.samples[n]
		var l level
		l.baseRSS, l.baseG, _ = p.median(baseFrom, baseFrom+win)
		l.endRSS, _, _ = p.median(endFrom, s.size.load)
		levels[n] = l
		fmt.Fprintf(&b, "| %s | %.1f MiB | %.1f MiB | %+.1f %% | %.1f MiB | %.1f MiB | %.0f | %.0f | %d |\n", n, l.baseRSS/(1<<20), l.endRSS/(1<<20),
			100*(l.endRSS/max(l.baseRSS, 1)-1), p.last().rss/(1<<20), p.peak()/(1<<20), l.baseG, p.last().gor, p.restarts)
	}
	b.WriteString("\nRSS (MiB) / goroutines, every sixth of the load:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-9s", n)
		for i := range 7 {
			if r, g, ok := s.samples[n].median(time.Duration(i)*s.size.load/6, time.Duration(i)*s.size.load/6+win); ok {
				fmt.Fprintf(&b, "  %s %.1f/%.0f", fmtOffset(time.Duration(i)*s.size.load/6), r/(1<<20), g)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\nfaults applied:\n")
	for _, l := range s.applied {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Print(b.String())
	if p := os.Getenv("CHATGUARD_SOAK_OUT"); p != "" {
		_ = os.WriteFile(p, []byte(b.String()), 0o644)
	}

	require.Empty(t, s.waveErrs, "every wave and the console sign-in ran")
	require.Positive(t, s.published)
	require.Equal(t, s.published, done, "every non-poison event ends with a done verdict")
	require.Zero(t, notDone)
	require.Zero(t, deadOther, "no non-poison event dead-lettered")
	require.Equal(t, s.poison, poison, "every poison message dead-lettered, by name")
	require.Zero(t, dupRows)
	for tb, n := range lk.rows {
		require.Equal(t, lk.distinct[tb], n, "%s_dedup holds each event once", tb)
	}
	require.Zero(t, lk.verdictMissing, "every done verdict's event in the lake")
	if !s.size.full {
		// The short form's baseline falls in its processes' first seconds,
		// before their connection pools fill: it shows the figures, and
		// make soak, whose baseline is minute 5, holds them to a bound.
		return
	}
	for _, n := range names {
		p, l := s.samples[n], levels[n]
		if l.baseRSS == 0 || p.restartedAfterBase {
			continue // a process started after the baseline has none to compare with
		}
		// A few goroutines of slack: an idle keep-alive connection more
		// than at the baseline is two (its read and write loops), not a
		// leak; a leak grows with the faults, and a soak has dozens.
		require.LessOrEqual(t, p.last().gor, l.baseG+max(goroutineSlack, l.baseG/10), "%s: goroutines back to their minute-5 level", n)
		require.Less(t, l.endRSS, l.baseRSS*1.10, "%s: RSS grew under 10 %% from minute 5 to the last minute", n)
	}
}

// lakeQuerier is a private Athena stand-in over the soak's part of the
// lake.
type lakeQuerier struct{ client *awsathena.Client }

func newLakeQuerier(t *testing.T, lakeDir string, tables map[string]string) lakeQuerier {
	sim := standin.StartAthena(t, standin.AthenaOptions{LakeDir: lakeDir, Tables: tables})
	return lakeQuerier{awsathena.New(awsathena.Options{Region: "us-east-1", BaseEndpoint: aws.String(sim.URL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})}
}

// dedup runs sql, in which <table>_dedup is the analysts' dedup view of
// table (given as a common table expression: the stand-in runs reads only),
// and returns its rows without the header.
func (q lakeQuerier) dedup(t *testing.T, table, sql string) [][]string {
	t.Helper()
	view, err := lake.ViewSelect(table)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src, err := athenasrc.New(q.client, athenasrc.DefaultConfig())
	require.NoError(t, err)
	rows, err := src.Rows(ctx, "WITH "+table+"_dedup AS (\n"+view+"\n)\n"+sql, nil)
	require.NoError(t, err)
	return rows[1:]
}
