package demo

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-sql-driver/mysql"

	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/storage/s3lake"
)

// BatchSummary is the part of batch's one-line JSON summary the demo reads.
type BatchSummary struct {
	RunID     string `json:"run_id"`
	Status    string `json:"status"`
	Rows      int64  `json:"rows"`
	Published int64  `json:"published"`
	Failed    int64  `json:"failed"`
	Error     string `json:"error"`
}

// Queues names the run's queues by URL.
type Queues struct {
	Review, ReviewDLQ, Feedback, FeedbackDLQ string
}

// Report is what one run did and found: the summary and what a test
// asserts on.
type Report struct {
	RunID                  string
	WindowStart, WindowEnd time.Time
	// StackPID is the stack used; StackStarted says the demo started it,
	// StackStopped that it stopped it again.
	StackPID                   int
	StackStarted, StackStopped bool
	EnvFile                    string
	// Database and MySQLDSN are the run's database.
	Database, MySQLDSN string
	MySQLAddr          string
	Queues             Queues
	LakeBucket         string
	LakePrefix         string
	ErrorsPrefix       string
	// LakeDir is the local folder behind the lake bucket.
	LakeDir string
	LogDir  string
	Batch   BatchSummary
	// Verdicts and Stages are the run's rows in MySQL after the drain.
	Verdicts []VerdictRow
	Stages   []StageRow
	// Lake is the run's rows in the lake after the consumer's final flush.
	Lake LakeView
	// Missing are stage calls without an inference-log row (empty on success).
	Missing []StageCall
	// Extra are inference-log rows beyond one per recorded stage call (see
	// ExtraLogs).
	Extra []StageCall
	// FinalDepths are the four queues after every process stopped, by URL.
	FinalDepths map[string]Depth
	// Children are every process the demo started, batch included.
	Children []Child
	Summary  Summary
	// DrainedAfter is the time from the batch's start to the drain.
	DrainedAfter time.Duration
	Elapsed      time.Duration
	// Realtime is a real-time run's figures (nil for a batch run).
	Realtime *RealtimeReport
	// Campaigns is what the campaign signals and the campaign join found
	// (a batch run).
	Campaigns Campaigns
	// Trace is one review's spans (Config.Trace), for the span tree.
	Trace []TraceSpan
}

// runner holds one run's state; its cleanup stops whatever it started.
type runner struct {
	cfg    Config
	rep    *Report
	out    io.Writer
	env    StackEnv
	sqs    *sqs.Client
	lake   *s3lake.Store
	db     *sql.DB
	procs  []*proc
	queues []queuePair
	began  time.Time
	// rt is a real-time run's own state (nil for a batch run).
	rt *realtimeRun
	// traces receives the binaries' spans (nil unless Config.Trace).
	traces *traceSink
}

// Run performs one demo run as described in the package comment, printing
// progress and, on success, the summary to cfg.Out. It returns the report
// (partial on failure) and an error when any step fails, the run exceeds
// cfg.Timeout, or ctx ends; whatever it started is stopped before it
// returns (a stack it started is left running only with KeepStack).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	began := time.Now()
	cfg = cfg.WithDefaults(began)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("demo: config: %w", err)
	}
	r := &runner{cfg: cfg, out: cfg.Out, began: began, rep: &Report{RunID: cfg.RunID, EnvFile: cfg.EnvFile, LogDir: cfg.LogDir,
		Database: cfg.Database, LakePrefix: cfg.LakePrefix, ErrorsPrefix: cfg.ErrorsPrefix, FinalDepths: map[string]Depth{}}}
	tctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout, fmt.Errorf("the demo did not finish within its timeout of %s", cfg.Timeout))
	defer cancel()
	err := r.run(tctx)
	if err != nil {
		err = fmt.Errorf("demo: %w", err)
	}
	err = errors.Join(err, r.cleanup())
	r.rep.Elapsed = time.Since(began)
	if err == nil {
		r.rep.Print(r.out)
	} else if cfg.LogDir != "" {
		fmt.Fprintf(r.out, "\nthe demo failed; the processes' logs are in %s\n", cfg.LogDir)
	}
	return r.rep, err
}

func (r *runner) step(format string, args ...any) {
	fmt.Fprintf(r.out, "==> "+format+"\n", args...)
}

func (r *runner) run(ctx context.Context) error {
	if err := os.MkdirAll(r.cfg.LogDir, 0o755); err != nil {
		return err
	}
	if err := r.stack(ctx); err != nil {
		return err
	}
	if err := r.clients(); err != nil {
		return err
	}
	if err := r.build(ctx); err != nil {
		return err
	}
	if err := r.database(ctx); err != nil {
		return err
	}
	if err := r.createQueues(ctx); err != nil {
		return err
	}
	if r.cfg.Realtime {
		return r.runRealtime(ctx)
	}
	if r.cfg.Trace {
		var err error
		if r.traces, err = startTraceSink(); err != nil {
			return err
		}
		r.step("tracing every review: spans go to %s", r.traces.url)
	}
	if err := r.startServices(nil); err != nil {
		return err
	}
	batch, err := r.startBatch()
	if err != nil {
		return err
	}
	if err := r.watch(ctx, batch); err != nil {
		return err
	}
	if err := r.stopServices(); err != nil {
		return err
	}
	if err := r.joinCampaigns(ctx); err != nil {
		return err
	}
	return r.finish(ctx)
}

// stack reuses a running stack or starts one.
func (r *runner) stack(ctx context.Context) error {
	env, err := ReadStackEnv(r.cfg.EnvFile)
	if err == nil && env.Alive() {
		r.env = env
		r.rep.StackPID, _ = strconv.Atoi(env["CHATGUARD_STACK_PID"])
		r.step("using the running stack (pid %d, %s); it stays up afterwards", r.rep.StackPID, r.cfg.EnvFile)
		return nil
	}
	if !r.cfg.StartStack {
		return fmt.Errorf("no local stack is running (%s): start it with `make stack-up`", r.cfg.EnvFile)
	}
	stackBin := filepath.Join(r.cfg.Root, "bin", "stack")
	if _, err := os.Stat(stackBin); err != nil {
		r.step("building bin/stack")
		if _, err := runCmd(ctx, r.cfg.Root, os.Environ(), "go", "build", "-o", stackBin, "./deploy/local/cmd/stack"); err != nil {
			return err
		}
	}
	stateDir := filepath.Dir(r.cfg.EnvFile)
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(stateDir, "stack.log")
	logF, err := os.Create(logPath)
	if err != nil {
		return err
	}
	r.step("starting the local stack (first start installs Node and fauxqs and writes the sample lake; log %s)", logPath)
	cmd := execStack(stackBin, r.cfg.Root, r.cfg.StackArgs, logF)
	err = cmd.Start()
	logF.Close()
	if err != nil {
		return fmt.Errorf("start the stack: %w", err)
	}
	// The stack runs in its own session so that it can outlive the demo
	// (--keep-stack); reaping it keeps a zombie from looking alive.
	go func() { _ = cmd.Wait() }()
	r.rep.StackStarted = true
	r.rep.StackPID = cmd.Process.Pid
	wctx, cancel := context.WithTimeout(ctx, r.cfg.StackWait+10*time.Second)
	defer cancel()
	if _, err := runCmd(wctx, r.cfg.Root, os.Environ(), stackBin,
		append([]string{"wait", "--pid", strconv.Itoa(cmd.Process.Pid), "--timeout", r.cfg.StackWait.String()}, r.cfg.StackArgs...)...); err != nil {
		return fmt.Errorf("the stack did not become ready: %w\nlast lines of %s:\n%s", err, logPath, tail(logPath, 20))
	}
	if r.env, err = ReadStackEnv(r.cfg.EnvFile); err != nil {
		return err
	}
	r.step("stack ready (pid %d)", r.rep.StackPID)
	return nil
}

// clients builds the SQS and S3 clients from the stack's variables.
func (r *runner) clients() error {
	v, err := r.env.Require("AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3",
		"CHATGUARD_LAKE_BUCKET", "CHATGUARD_MYSQL_DSN", "CHATGUARD_TRUTH_DIR", "CHATGUARD_LAKE_DIR")
	if err != nil {
		return err
	}
	awsCfg := aws.Config{Region: v[0], Credentials: credentials.NewStaticCredentialsProvider(v[1], v[2], "")}
	r.sqs = sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(v[3]) })
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(v[4]), true })
	r.lake = s3lake.NewStore(s3c, v[5], s3lake.DefaultPartSize)
	r.rep.LakeBucket, r.rep.LakeDir = v[5], v[8]
	return nil
}

// build compiles the three binaries into BinDir in one go invocation.
func (r *runner) build(ctx context.Context) error {
	r.step("building batch, worker, consumer and trigger into %s", r.cfg.BinDir)
	if err := os.MkdirAll(r.cfg.BinDir, 0o755); err != nil {
		return err
	}
	args := append([]string{"build"}, r.cfg.BuildFlags...)
	args = append(args, "-o", r.cfg.BinDir+string(filepath.Separator), "./cmd/batch", "./cmd/worker", "./cmd/consumer", "./cmd/trigger")
	if r.cfg.Fault == "flush" {
		// The flush row's sweep reads a lake of the run's own through an
		// Athena stand-in of its own (see flush.go).
		args = append(args, "./deploy/local/athenasim/cmd/athenasim")
	}
	_, err := runCmd(ctx, r.cfg.Root, os.Environ(), "go", args...)
	return err
}

func (r *runner) bin(name string) string { return filepath.Join(r.cfg.BinDir, name) }

// database drops and recreates the run's database and applies the
// migrations with `worker migrate`.
func (r *runner) database(ctx context.Context) error {
	base, err := mysql.ParseDSN(r.env["CHATGUARD_MYSQL_DSN"])
	if err != nil {
		return fmt.Errorf("CHATGUARD_MYSQL_DSN: %w", err)
	}
	admin := base.Clone()
	admin.DBName = ""
	adb, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	defer adb.Close()
	for _, stmt := range []string{"DROP DATABASE IF EXISTS " + r.cfg.Database, "CREATE DATABASE " + r.cfg.Database} {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := adb.ExecContext(sctx, stmt)
		cancel()
		if err != nil {
			return fmt.Errorf("mysql: %s: %w", stmt, err)
		}
	}
	cfg := base.Clone()
	cfg.DBName, cfg.ParseTime = r.cfg.Database, true
	r.rep.MySQLDSN, r.rep.MySQLAddr = cfg.FormatDSN(), cfg.Addr
	out, err := runCmd(ctx, r.cfg.Root, r.childEnv(map[string]string{"CHATGUARD_MYSQL_DSN": r.rep.MySQLDSN}), r.bin("worker"), "migrate")
	if err != nil {
		return err
	}
	r.step("MySQL database %s created fresh; worker migrate: %s", r.cfg.Database, lastLine(out))
	if r.db, err = sql.Open("mysql", r.rep.MySQLDSN); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	r.db.SetMaxOpenConns(2)
	return nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// createQueues creates review and feedback queues of the run's own, each
// with its DLQ, so that a shared stack's queues are left alone.
func (r *runner) createQueues(ctx context.Context) error {
	maxReceive := 5
	if n, err := strconv.Atoi(r.env["CHATGUARD_MAX_RECEIVE_COUNT"]); err == nil && n > 0 {
		maxReceive = n
	}
	prefix := unsafeName.ReplaceAllString(r.cfg.RunID, "-")
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	review, err := createQueuePair(qctx, r.sqs, prefix+"-review", maxReceive)
	if err != nil {
		return err
	}
	r.queues = append(r.queues, review)
	feedback, err := createQueuePair(qctx, r.sqs, prefix+"-feedback", maxReceive)
	if err != nil {
		return err
	}
	r.queues = append(r.queues, feedback)
	r.rep.Queues = Queues{Review: review.URL, ReviewDLQ: review.DLQURL, Feedback: feedback.URL, FeedbackDLQ: feedback.DLQURL}
	r.step("queues %s and %s created, each with a -dlq (maxReceiveCount %d)", review.Name, feedback.Name, maxReceive)
	return nil
}

// childEnv is the environment of a child: the stack's variables and the
// run's own queues and database, then overrides.
func (r *runner) childEnv(overrides map[string]string) []string {
	o := map[string]string{
		"CHATGUARD_LOG_LEVEL": "info",
		// A development stack: the public dev pseudonym keys (the stack's
		// env says so too; a stack started before the switch existed
		// does not).
		"CHATGUARD_DEV_INSECURE_KEYS": "true",
	}
	if r.rep.MySQLDSN != "" {
		o["CHATGUARD_MYSQL_DSN"] = r.rep.MySQLDSN
	}
	if q := r.rep.Queues; q.Review != "" {
		o["CHATGUARD_REVIEW_QUEUE_URL"], o["CHATGUARD_REVIEW_DLQ_URL"] = q.Review, q.ReviewDLQ
		o["CHATGUARD_FEEDBACK_QUEUE_URL"], o["CHATGUARD_FEEDBACK_DLQ_URL"] = q.Feedback, q.FeedbackDLQ
	}
	if r.traces != nil {
		maps.Copy(o, r.traces.env())
	}
	for k, v := range overrides {
		o[k] = v
	}
	return childEnv(os.Environ(), r.env, o)
}

// startServices starts the consumer and the workers. Admin ports are
// picked by the kernel so that a demo never collides with another process
// on the machine; the logs name them.
func (r *runner) startServices(extra map[string]string) error {
	consumer, err := startProc("consumer", r.bin("consumer"), nil, r.childEnv(map[string]string{
		"CHATGUARD_LAKE_PREFIX":   r.cfg.LakePrefix,
		"CHATGUARD_ERRORS_PREFIX": r.cfg.ErrorsPrefix,
		"CHATGUARD_FLUSH_AGE":     r.cfg.FlushAge.String(),
		"CHATGUARD_WAIT_TIME":     "5s",
		"CHATGUARD_ADMIN_ADDR":    "127.0.0.1:0",
	}), r.cfg.Root, r.cfg.LogDir, false)
	if err != nil {
		return err
	}
	r.procs = append(r.procs, consumer)
	// Campaign signals on, with the sample lake's shop verified, so that
	// the sample window shows a campaign (its scam ring) and a repeat
	// sender (its shop) (docs/campaigns.md). The counts are the run's own
	// (a key prefix of its own, expiring with the window), so that every
	// run shows the same: the ring's first rooms below the threshold,
	// linked by the campaign join afterwards. A loaded laptop runs Redis,
	// the workers and the models at once: the counter gets a second.
	verified := filepath.Join(r.cfg.LogDir, "verified-accounts.txt")
	if err := os.WriteFile(verified, []byte(sampledata.VerifiedAccounts), 0o644); err != nil {
		return err
	}
	for i := 1; i <= r.cfg.Workers; i++ {
		env := map[string]string{
			"CHATGUARD_ADMIN_ADDR":                 "127.0.0.1:0",
			"CHATGUARD_WAIT_TIME":                  "5s",
			"CHATGUARD_DRAIN_TIMEOUT":              "20s",
			"CHATGUARD_CAMPAIGN_SIGNALS":           "true",
			"CHATGUARD_CAMPAIGN_VERIFIED_ACCOUNTS": verified,
			"CHATGUARD_CAMPAIGN_KEY_PREFIX":        "chatguard:cm:" + r.cfg.RunID + ":",
			"CHATGUARD_CAMPAIGN_TIMEOUT":           "1s",
		}
		maps.Copy(env, extra)
		w, err := startProc(fmt.Sprintf("worker-%d", i), r.bin("worker"), nil, r.childEnv(env), r.cfg.Root, r.cfg.LogDir, false)
		if err != nil {
			return err
		}
		r.procs = append(r.procs, w)
	}
	names := make([]string, 0, len(r.procs))
	for _, p := range r.procs {
		names = append(names, fmt.Sprintf("%s (pid %d)", p.Name, p.PID))
	}
	r.step("started %s; logs in %s", strings.Join(names, ", "), r.cfg.LogDir)
	return nil
}

// startBatch publishes the window with the run's id.
func (r *runner) startBatch() (*proc, error) {
	start, end := r.cfg.WindowStart, r.cfg.WindowEnd
	if start.IsZero() {
		v, err := r.env.Require("CHATGUARD_SAMPLE_WINDOW_START", "CHATGUARD_SAMPLE_WINDOW_END")
		if err != nil {
			return nil, err
		}
		if start, err = time.Parse(time.RFC3339, v[0]); err != nil {
			return nil, fmt.Errorf("CHATGUARD_SAMPLE_WINDOW_START: %w", err)
		}
		if end, err = time.Parse(time.RFC3339, v[1]); err != nil {
			return nil, fmt.Errorf("CHATGUARD_SAMPLE_WINDOW_END: %w", err)
		}
	}
	r.rep.WindowStart, r.rep.WindowEnd = start.UTC(), end.UTC()
	args := []string{"--window-start", start.UTC().Format(time.RFC3339), "--window-end", end.UTC().Format(time.RFC3339), "--run-id", r.cfg.RunID}
	p, err := startProc("batch", r.bin("batch"), args, r.childEnv(map[string]string{"CHATGUARD_PROGRESS_INTERVAL": "2s"}), r.cfg.Root, r.cfg.LogDir, true)
	if err != nil {
		return nil, err
	}
	r.procs = append(r.procs, p)
	r.step("batch (pid %d): window %s to %s, run id %s", p.PID, r.rep.WindowStart.Format(time.RFC3339), r.rep.WindowEnd.Format(time.RFC3339), r.cfg.RunID)
	return p, nil
}

// progress is one look at the run.
type progress struct {
	review, feedback Depth
	verdicts         []VerdictRow
	stages           []StageRow
	missing          int
	verdictRooms     int
}

func (r *runner) look(ctx context.Context, lr *lakeReader) (progress, error) {
	var p progress
	var err error
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if p.review, err = depth(lctx, r.sqs, r.rep.Queues.Review); err != nil {
		return p, err
	}
	if p.feedback, err = depth(lctx, r.sqs, r.rep.Queues.Feedback); err != nil {
		return p, err
	}
	if p.verdicts, p.stages, err = loadRun(lctx, r.db, r.cfg.RunID); err != nil {
		return p, err
	}
	if err := lr.refresh(lctx, time.Now()); err != nil {
		return p, err
	}
	p.missing = len(MissingLogs(p.stages, lr.view))
	rooms := map[string]bool{}
	for _, v := range lr.view.Verdicts {
		rooms[v.RoomID] = true
	}
	p.verdictRooms = len(rooms)
	return p, nil
}

// watch prints progress until the run is drained: the batch succeeded,
// every published room has a verdict, the review queue is empty, and the
// lake holds every stage call's inference log and every verdict event.
func (r *runner) watch(ctx context.Context, batch *proc) error {
	lr := newLakeReader(r.lake, r.cfg.LakePrefix, r.cfg.RunID, r.began.Add(-time.Minute))
	batchDone := false
	published := int64(-1)
	tick := time.NewTicker(r.cfg.Progress)
	defer tick.Stop()
	batchStart := time.Now()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the drain: %w", context.Cause(ctx))
		case <-tick.C:
		}
		if !batchDone && batch.exited() {
			if err := batch.result(); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(lastLine(batch.stdout.String())), &r.rep.Batch); err != nil {
				return fmt.Errorf("batch summary %q: %w", batch.stdout.String(), err)
			}
			if r.rep.Batch.Status != "succeeded" {
				return fmt.Errorf("batch run %s: %s %s", r.rep.Batch.RunID, r.rep.Batch.Status, r.rep.Batch.Error)
			}
			batchDone, published = true, r.rep.Batch.Published
			r.step("batch published %d review events (%d rooms read, %d failed)", r.rep.Batch.Published, r.rep.Batch.Rows, r.rep.Batch.Failed)
		}
		for _, p := range r.procs {
			if p != batch && p.exited() {
				if err := p.result(); err != nil {
					return fmt.Errorf("stopped on its own: %w", err)
				}
				return fmt.Errorf("%s (pid %d) exited 0 before it was asked to stop; log %s", p.Name, p.PID, p.Log)
			}
		}
		p, err := r.look(ctx, lr)
		if err != nil {
			return err
		}
		total := "?"
		if batchDone {
			total = strconv.FormatInt(published, 10)
		}
		calls := 0
		for _, s := range p.stages {
			calls += s.Attempts
		}
		fmt.Fprintf(r.out, "[%4ds] review queue: %s | verdicts %d/%s | feedback queue: %s | lake: %d objects, %d/%d inference logs, %d verdict events\n",
			int(time.Since(batchStart).Seconds()), p.review, len(p.verdicts), total, p.feedback, len(lr.view.Objects), calls-p.missing, calls, p.verdictRooms)
		if batchDone && int64(len(p.verdicts)) == published && p.review.Total() == 0 && p.missing == 0 &&
			int64(p.verdictRooms) == published && p.feedback.Total() == 0 {
			r.rep.DrainedAfter = time.Since(batchStart)
			r.step("drained after %s: every room has a verdict and the lake has every inference log", r.rep.DrainedAfter.Round(time.Second))
			return nil
		}
	}
}

// stopServices sends SIGTERM to the workers and the consumer at once and
// waits for each to exit 0 within the grace.
func (r *runner) stopServices() error {
	r.step("stopping the workers and the consumer (SIGTERM; they drain and flush)")
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, p := range r.procs {
		if p.oneShot() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.stop(r.cfg.StopGrace); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// finish reads the final state: MySQL, the lake after the consumer's last
// flush, every queue, and the ground truth.
func (r *runner) finish(ctx context.Context) error {
	lr := newLakeReader(r.lake, r.cfg.LakePrefix, r.cfg.RunID, r.began.Add(-time.Minute))
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := lr.refresh(fctx, time.Now()); err != nil {
		return err
	}
	r.rep.Lake = lr.view
	var err error
	if r.rep.Verdicts, r.rep.Stages, err = loadRun(fctx, r.db, r.cfg.RunID); err != nil {
		return err
	}
	r.rep.Missing = MissingLogs(r.rep.Stages, lr.view)
	r.rep.Extra = ExtraLogs(r.rep.Stages, lr.view)
	for _, u := range []string{r.rep.Queues.Review, r.rep.Queues.ReviewDLQ, r.rep.Queues.Feedback, r.rep.Queues.FeedbackDLQ} {
		d, err := depth(fctx, r.sqs, u)
		if err != nil {
			return err
		}
		r.rep.FinalDepths[u] = d
	}
	truth, err := sampledata.LoadTruth(r.env["CHATGUARD_TRUTH_DIR"])
	if err != nil {
		return err
	}
	r.rep.Summary = Summarize(r.rep.Verdicts, r.rep.Stages, lr.view, truth)
	if r.traces != nil {
		// The processes flushed their spans as they stopped.
		r.rep.Trace = OneReview(r.traces.all())
	}
	return r.loadCampaigns(fctx)
}

// cleanup stops every child still running, deletes the run's queues and
// stops a stack the run started (unless KeepStack). It runs on every path.
func (r *runner) cleanup() error {
	if r.traces != nil {
		defer r.traces.close()
	}
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, p := range r.procs {
		if p.exited() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.stop(r.cfg.StopGrace); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("cleanup: %w", err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if r.rt != nil {
		r.rt.close()
	}
	for _, p := range r.procs {
		r.rep.Children = append(r.rep.Children, p.snapshot())
	}
	if r.db != nil {
		_ = r.db.Close()
	}
	if len(r.queues) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for _, q := range r.queues {
			if err := deleteQueuePair(ctx, r.sqs, q); err != nil {
				errs = append(errs, fmt.Errorf("cleanup: %w", err))
			}
		}
		cancel()
	}
	if r.rep.StackStarted && !r.cfg.KeepStack {
		r.step("stopping the stack the demo started")
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		_, err := runCmd(ctx, r.cfg.Root, os.Environ(), filepath.Join(r.cfg.Root, "bin", "stack"),
			append([]string{"down", "--timeout", "60s"}, r.cfg.StackArgs...)...)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("cleanup: %w", err))
		} else {
			r.rep.StackStopped = true
		}
	}
	return errors.Join(errs...)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// execStack prepares `stack up` in a session of its own: it must survive
// the demo with KeepStack and must not get the terminal's Ctrl-C, which
// the demo handles by stopping it in order.
func execStack(bin, root string, args []string, log *os.File) *exec.Cmd {
	cmd := exec.Command(bin, append([]string{"up"}, args...)...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}
