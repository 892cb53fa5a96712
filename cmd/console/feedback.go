package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
)

// Feedback that cannot be lost: the moderator_decisions row is the outbox
// of its moderator_feedback event. The request path sends the event after
// committing the row and marks the row once SQS accepts it; the outbox
// sweeper resends rows left unmarked past a grace period (a failed send, a
// pod killed between the commit and the send). Every copy carries the event
// id derived from the row id, so the lake's moderator_feedback_dedup view
// keeps one.

// feedbackEventID is the decision's event id: the same for every send.
func feedbackEventID(decisionID uint64) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("chatguard/moderator_decision/"+strconv.FormatUint(decisionID, 10))).String()
}

// feedbackEvent is the moderator_feedback lake event of decision d (with
// its row id in d.ID) on the verdict under key.
func feedbackEvent(d mysql.Decision, key pipeline.ReviewKey, verdictLabel pipeline.Label, verdictCategory pipeline.Category, action pipeline.Action) pipeline.LakeEvent {
	decided := d.Category
	if d.Label == pipeline.LabelClean {
		// The row keeps '' for clean (its schema); the lake compares
		// categories, and a clean verdict's category is "clean".
		decided = pipeline.CategoryClean
	}
	return pipeline.LakeEvent{
		EventID:   feedbackEventID(d.ID),
		EventType: pipeline.EventModeratorFeedback, OccurredAt: d.DecidedAt, SchemaVersion: pipeline.LakeEventSchemaVersion,
		Payload: pipeline.ModeratorFeedback{RoomID: key.RoomID, WindowStart: key.WindowStart, WindowEnd: key.WindowEnd,
			PipelineVersion: key.PipelineVersion, ModeratorID: d.Moderator, VerdictLabel: verdictLabel, VerdictCategory: verdictCategory,
			DecidedLabel: d.Label, DecidedCategory: decided, ActionTaken: action},
	}
}

// feedbackBody is ev as the feedback queue carries it.
func feedbackBody(ev pipeline.LakeEvent) []byte {
	body, _ := json.Marshal(ev) // plain fields: cannot fail
	return body
}

// feedbackMetrics counts feedback sends by path ("decide": the request;
// "sweep": the outbox sweeper) and the unsent backlog.
type feedbackMetrics struct {
	sent, failed *prometheus.CounterVec
	unsent       prometheus.Gauge
	oldest       prometheus.Gauge
	sweeps       *prometheus.CounterVec
}

// newFeedbackMetrics registers the feedback metrics on reg (nil: kept
// unregistered, for tests).
func newFeedbackMetrics(reg prometheus.Registerer) *feedbackMetrics {
	m := &feedbackMetrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_console_feedback_sent_total",
			Help: "moderator_feedback events SQS accepted, by path (decide: the moderator's request; sweep: a resend of the outbox)."}, []string{"path"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_console_feedback_send_failures_total",
			Help: "moderator_feedback events SQS did not accept, by path; each stays in the outbox for the sweeper."}, []string{"path"}),
		unsent: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chatguard_console_feedback_unsent",
			Help: "Decisions whose moderator_feedback event SQS has not accepted yet (all pods; read at each sweep)."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chatguard_console_feedback_oldest_unsent_age_seconds",
			Help: "Age of the oldest decision whose feedback is unsent, 0 when none (read at each sweep)."}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_console_feedback_sweeps_total",
			Help: "Outbox sweeps by result (ok, error)."}, []string{"result"}),
	}
	for _, p := range []string{"decide", "sweep"} {
		m.sent.WithLabelValues(p)
		m.failed.WithLabelValues(p)
	}
	m.sweeps.WithLabelValues("ok")
	m.sweeps.WithLabelValues("error")
	if reg != nil {
		reg.MustRegister(m.sent, m.failed, m.unsent, m.oldest, m.sweeps)
	}
	return m
}

// outboxStore is what the sweeper needs of MySQL (*mysql.Store).
type outboxStore interface {
	SweepUnsentFeedback(ctx context.Context, now time.Time, grace time.Duration, limit int,
		send func(ctx context.Context, rows []mysql.UnsentFeedback) ([]uint64, error)) (taken, marked int, err error)
	FeedbackBacklog(ctx context.Context) (n int, oldest time.Time, err error)
}

var _ outboxStore = (*mysql.Store)(nil)

// OutboxConfig tunes the feedback outbox sweeper (flags --feedback-*).
type OutboxConfig struct {
	// FeedbackGrace: a decision younger than this is left to its request
	// path (whose send is bounded well below it).
	FeedbackGrace time.Duration
	// FeedbackSweepEvery: the time between sweeps.
	FeedbackSweepEvery time.Duration
	// FeedbackSweepBatch: decisions per send (SQS takes 10 per call).
	FeedbackSweepBatch int
	// FeedbackSweepMaxBatches bounds one sweep, so a large backlog drains
	// over several sweeps without holding the loop.
	FeedbackSweepMaxBatches int
	// FeedbackSendTimeout bounds one batch: its send and its marks.
	FeedbackSendTimeout time.Duration
}

func defaultOutbox() OutboxConfig {
	return OutboxConfig{FeedbackGrace: time.Minute, FeedbackSweepEvery: 15 * time.Second, FeedbackSweepBatch: 10,
		FeedbackSweepMaxBatches: 20, FeedbackSendTimeout: 15 * time.Second}
}

func (c *OutboxConfig) flags(fs *cli.FlagSet) {
	fs.DurationVar(&c.FeedbackGrace, "feedback-grace", "a decision whose moderator_feedback event SQS has not accepted this long after it was made is resent by the sweeper")
	fs.DurationVar(&c.FeedbackSweepEvery, "feedback-sweep-every", "time between sweeps of unsent moderator feedback")
	fs.IntVar(&c.FeedbackSweepBatch, "feedback-sweep-batch", "decisions resent per SQS call (1..10)")
	fs.IntVar(&c.FeedbackSweepMaxBatches, "feedback-sweep-max-batches", "batches one sweep sends at most (a larger backlog drains over several sweeps)")
	fs.DurationVar(&c.FeedbackSendTimeout, "feedback-send-timeout", "deadline of one sweep batch: its SQS send and its marks")
}

func (c OutboxConfig) validate() error {
	var errs []error
	if c.FeedbackSweepBatch < 1 || c.FeedbackSweepBatch > 10 || c.FeedbackSweepMaxBatches < 1 {
		errs = append(errs, errors.New("--feedback-sweep-batch must be in 1..10, --feedback-sweep-max-batches at least 1"))
	}
	if c.FeedbackSweepEvery <= 0 || c.FeedbackSendTimeout <= 0 {
		errs = append(errs, errors.New("--feedback-sweep-every and --feedback-send-timeout must be positive"))
	}
	// The request path's send is bounded by 10 s (decide); a shorter grace
	// would resend events whose first send is still in flight.
	if c.FeedbackGrace < 15*time.Second {
		errs = append(errs, errors.New("--feedback-grace must be at least 15s (above the request path's 10s send)"))
	}
	return errors.Join(errs...)
}

// outbox resends the moderator_feedback events of decisions whose
// feedback_sent_at is still NULL past the grace period. Its owner is the
// console's Run; it stops in two phases: ctx ending stops new sweeps, and
// the batch in flight finishes within FeedbackSendTimeout (its rows marked) before
// Run returns.
type outbox struct {
	cfg     OutboxConfig
	store   outboxStore
	send    feedbackSender
	metrics *feedbackMetrics
	log     *slog.Logger
	now     func() time.Time
	// ticker returns the sweep ticks and their stop (tests tick by hand).
	ticker func(d time.Duration) (<-chan time.Time, func())
	// swept, when set, receives each sweep's result (tests wait on it).
	swept chan<- sweepResult
}

// sweepResult is what one sweep did.
type sweepResult struct {
	Sent, Failed int
	Err          error
}

func newOutbox(cfg OutboxConfig, st outboxStore, send feedbackSender, m *feedbackMetrics, log *slog.Logger) *outbox {
	return &outbox{cfg: cfg, store: st, send: send, metrics: m, log: log, now: time.Now,
		ticker: func(d time.Duration) (<-chan time.Time, func()) { t := time.NewTicker(d); return t.C, t.Stop }}
}

// Run sweeps every cfg.FeedbackSweepEvery until ctx ends. It returns nil once the batch
// in flight at cancellation has finished.
func (o *outbox) Run(ctx context.Context) error {
	tick, stop := o.ticker(o.cfg.FeedbackSweepEvery)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
		r := o.sweep(ctx)
		if o.swept != nil {
			select {
			case o.swept <- r:
			case <-ctx.Done():
			}
		}
	}
}

// sweep resends up to MaxBatches batches, then reads the backlog for the
// gauges. Errors are logged here, once per sweep.
func (o *outbox) sweep(ctx context.Context) sweepResult {
	var r sweepResult
	for range o.cfg.FeedbackSweepMaxBatches {
		if ctx.Err() != nil {
			break
		}
		// Detached and bounded: a batch begun before a stop finishes and
		// marks its rows instead of leaving them for a duplicate resend.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.cfg.FeedbackSendTimeout)
		taken, marked, err := o.store.SweepUnsentFeedback(bctx, o.now(), o.cfg.FeedbackGrace, o.cfg.FeedbackSweepBatch, o.sendBatch)
		cancel()
		r.Sent += marked
		if err != nil {
			r.Failed += taken - marked
			r.Err = err
			break
		}
		if taken < o.cfg.FeedbackSweepBatch {
			break
		}
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.cfg.FeedbackSendTimeout)
	n, oldest, err := o.store.FeedbackBacklog(bctx)
	cancel()
	if err == nil {
		o.metrics.unsent.Set(float64(n))
		age := 0.0
		if !oldest.IsZero() {
			age = max(o.now().Sub(oldest).Seconds(), 0)
		}
		o.metrics.oldest.Set(age)
	} else if r.Err == nil {
		r.Err = err
	}
	if r.Err != nil {
		o.metrics.sweeps.WithLabelValues("error").Inc()
		o.log.Warn("console: feedback sweep", "resent", r.Sent, "failed", r.Failed, "err", r.Err)
	} else {
		o.metrics.sweeps.WithLabelValues("ok").Inc()
		if r.Sent > 0 {
			o.log.Info("console: feedback resent", "events", r.Sent)
		}
	}
	return r
}

// sendBatch sends rows' events and returns the ids SQS accepted (all of
// them, or those a *pipeline.BatchError says succeeded).
func (o *outbox) sendBatch(ctx context.Context, rows []mysql.UnsentFeedback) ([]uint64, error) {
	msgs := make([]pipeline.OutMessage, len(rows))
	for i, u := range rows {
		msgs[i] = pipeline.OutMessage{Body: feedbackBody(feedbackEvent(u.Decision, u.Key, u.VerdictLabel, u.VerdictCategory, u.Action))}
	}
	err := o.send.Send(ctx, msgs)
	var sent []uint64
	var be *pipeline.BatchError
	switch {
	case err == nil:
		for _, u := range rows {
			sent = append(sent, u.Decision.ID)
		}
	case errors.As(err, &be) && len(be.Errs) == len(rows):
		for i, u := range rows {
			if be.Errs[i] == nil {
				sent = append(sent, u.Decision.ID)
			}
		}
	}
	o.metrics.sent.WithLabelValues("sweep").Add(float64(len(sent)))
	o.metrics.failed.WithLabelValues("sweep").Add(float64(len(rows) - len(sent)))
	return sent, err
}
