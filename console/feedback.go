package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/internal/retry"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// Feedback that cannot be lost: the moderator_decisions row is the outbox
// of its moderator_feedback event. The request path sends the event after
// committing the row and marks the row once SQS accepts it; the outbox
// sweeper resends rows left unmarked past a grace period (a failed send, a
// pod killed between the commit and the send). Every copy carries the event
// id derived from the row id, so the lake's moderator_feedback_dedup view
// keeps one. An undo is a row of this outbox too: its event tells the lake
// that the undone decision's event no longer counts.

// feedbackEventID is the decision's event id: the same for every send.
func feedbackEventID(decisionID uint64) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("chatguard/moderator_decision/"+strconv.FormatUint(decisionID, 10))).String()
}

// feedbackEvent is the moderator_feedback lake event of decision d (with
// its row id in d.ID) on the verdict under key; an undo's event names the
// event of the decision it reverses.
func feedbackEvent(d moderation.Decision, key pipeline.ReviewKey, verdictLabel pipeline.Label, verdictCategory pipeline.Category, action pipeline.Action) pipeline.LakeEvent {
	decided := d.Category
	if d.Label == pipeline.LabelClean {
		// The row keeps '' for clean (its schema); the lake compares
		// categories, and a clean verdict's category is "clean".
		decided = pipeline.CategoryClean
	}
	p := pipeline.ModeratorFeedback{RoomID: key.RoomID, WindowStart: key.WindowStart, WindowEnd: key.WindowEnd,
		PipelineVersion: key.PipelineVersion, ModeratorID: d.Moderator, VerdictLabel: verdictLabel, VerdictCategory: verdictCategory,
		DecidedLabel: d.Label, DecidedCategory: decided, ActionTaken: action, Audit: d.Audit}
	if d.Decision == moderation.DecisionUndo {
		// The lake leaves out an undo and the event it names: the undone
		// decision's event id is derived from its row id, as it was sent.
		p.Decision, p.ReversesEventID = pipeline.FeedbackUndo, feedbackEventID(d.Reverses)
	}
	return pipeline.LakeEvent{
		EventID:   feedbackEventID(d.ID),
		EventType: pipeline.EventModeratorFeedback, OccurredAt: d.DecidedAt, SchemaVersion: pipeline.LakeEventSchemaVersion,
		Payload: p,
	}
}

// feedbackBody is ev as the feedback queue carries it.
func feedbackBody(ev pipeline.LakeEvent) []byte {
	body, _ := json.Marshal(ev) // plain fields: cannot fail
	return body
}

// feedbackMetrics counts feedback sends by path ("decide": the request;
// "sweep": the outbox sweeper), the events SQS refused, and the backlog.
type feedbackMetrics struct {
	sent, failed *prometheus.CounterVec
	rejected     prometheus.Counter
	unsent       prometheus.Gauge
	oldest       prometheus.Gauge
	rejectedRows prometheus.Gauge
	sweeps       *prometheus.CounterVec
}

// newFeedbackMetrics registers the feedback metrics on reg (nil: kept
// unregistered, for tests).
func newFeedbackMetrics(reg prometheus.Registerer) *feedbackMetrics {
	m := &feedbackMetrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_console_feedback_sent_total",
			Help: "moderator_feedback events SQS accepted, by path (decide: the moderator's request; sweep: a resend of the outbox)."}, []string{"path"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_console_feedback_send_failures_total",
			Help: "moderator_feedback events SQS did not accept, by path; each stays in the outbox for the sweeper (refusals: chatguard_console_feedback_rejected_total)."}, []string{"path"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "chatguard_console_feedback_rejected_total",
			Help: "moderator_feedback events SQS refused as the sender's fault (invalid contents, too large): marked rejected on their decision row with the reason, never resent."}),
		rejectedRows: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chatguard_console_feedback_rejected_rows",
			Help: "Decisions whose moderator_feedback event SQS refused, waiting for an operator (all pods; read at each sweep)."}),
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
		reg.MustRegister(m.sent, m.failed, m.rejected, m.unsent, m.oldest, m.rejectedRows, m.sweeps)
	}
	return m
}

// OutboxConfig tunes the feedback outbox sweeper (the console's
// --feedback-* flags).
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
	// FeedbackRetryInitial and FeedbackRetryMax shape the per-row backoff
	// (internal/retry, full jitter) after a send SQS failed transiently:
	// such a row is not taken again before it, so a row that keeps
	// failing does not hold the oldest places of every sweep.
	FeedbackRetryInitial, FeedbackRetryMax time.Duration
}

// DefaultOutboxConfig returns the sweeper's defaults (the console's --help).
func DefaultOutboxConfig() OutboxConfig {
	return OutboxConfig{FeedbackGrace: time.Minute, FeedbackSweepEvery: 15 * time.Second, FeedbackSweepBatch: 10,
		FeedbackSweepMaxBatches: 20, FeedbackSendTimeout: 15 * time.Second,
		FeedbackRetryInitial: 30 * time.Second, FeedbackRetryMax: 10 * time.Minute}
}

// retryPolicy is the per-row backoff after a transient failure.
func (c OutboxConfig) retryPolicy() retry.Policy {
	return retry.Policy{Initial: c.FeedbackRetryInitial, Max: c.FeedbackRetryMax}
}

// Validate reports every problem of the sweeper's settings at once.
func (c OutboxConfig) Validate() error {
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
	if err := c.retryPolicy().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--feedback-retry-initial/--feedback-retry-max: %w", err))
	}
	return errors.Join(errs...)
}

// outbox resends the moderator_feedback events of decisions whose
// feedback_sent_at is still NULL past the grace period. Its owner is the
// App's RunOutbox; it stops in two phases: ctx ending stops new sweeps,
// and the batch in flight finishes within FeedbackSendTimeout (its rows
// marked) before Run returns.
type outbox struct {
	cfg     OutboxConfig
	store   moderation.FeedbackOutbox
	send    FeedbackSender
	metrics *feedbackMetrics
	log     *slog.Logger
	clock   clock.Clock
	// backoff is the wait before a row's next send after its n-th
	// transient failure (the retry policy's full-jitter Delay).
	backoff func(n int) time.Duration
}

// sweepResult is what one sweep did: events sent, failed (to be retried
// after their backoff) and rejected (marked, never resent).
type sweepResult struct {
	Sent, Failed, Rejected int
	Err                    error
}

// newOutbox returns a sweeper timed by c (nil: the wall clock).
func newOutbox(cfg OutboxConfig, st moderation.FeedbackOutbox, send FeedbackSender, m *feedbackMetrics, log *slog.Logger, c clock.Clock) *outbox {
	return &outbox{cfg: cfg, store: st, send: send, metrics: m, log: log, clock: clock.Or(c), backoff: cfg.retryPolicy().Delay}
}

// Run sweeps every cfg.FeedbackSweepEvery until ctx ends. It returns nil
// once the batch in flight at cancellation has finished.
func (o *outbox) Run(ctx context.Context) error {
	tick := o.clock.NewTicker(o.cfg.FeedbackSweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.Chan():
		}
		o.sweep(ctx)
	}
}

// sweep resends up to MaxBatches batches, then reads the backlog for the
// gauges. Errors are logged here, once per sweep. A batch of which SQS
// accepted nothing and failed some transiently ends the sweep (the queue
// is likely unreachable: the rows back off); refusals do not, so rows SQS
// will never accept cannot hold newer feedback back.
func (o *outbox) sweep(ctx context.Context) sweepResult {
	var r sweepResult
	for range o.cfg.FeedbackSweepMaxBatches {
		if ctx.Err() != nil {
			break
		}
		// Detached and bounded: a batch begun before a stop finishes and
		// marks its rows instead of leaving them for a duplicate resend.
		// The bound is on real time: it caps waits on SQS and MySQL.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.cfg.FeedbackSendTimeout)
		sw, err := o.store.SweepUnsentFeedback(bctx, o.clock.Now(), o.cfg.FeedbackGrace, o.cfg.FeedbackSweepBatch, o.sendBatch)
		cancel()
		r.Sent += sw.Sent
		r.Rejected += sw.Rejected
		r.Failed += sw.Taken - sw.Sent - sw.Rejected
		if err != nil {
			r.Err = err
		}
		if sw.Taken < o.cfg.FeedbackSweepBatch || (sw.Sent == 0 && sw.Taken > sw.Rejected) {
			break
		}
	}
	o.metrics.rejected.Add(float64(r.Rejected))
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.cfg.FeedbackSendTimeout)
	b, err := o.store.FeedbackBacklog(bctx)
	cancel()
	if err == nil {
		o.metrics.unsent.Set(float64(b.Unsent))
		o.metrics.rejectedRows.Set(float64(b.Rejected))
		age := 0.0
		if !b.Oldest.IsZero() {
			age = max(o.clock.Now().Sub(b.Oldest).Seconds(), 0)
		}
		o.metrics.oldest.Set(age)
	} else if r.Err == nil {
		r.Err = err
	}
	if r.Rejected > 0 {
		o.log.Error("console: feedback rejected by SQS; marked on the decisions, not resent", "rejected", r.Rejected)
	}
	if r.Err != nil {
		o.metrics.sweeps.WithLabelValues("error").Inc()
		o.log.Warn("console: feedback sweep", "resent", r.Sent, "failed", r.Failed, "rejected", r.Rejected, "err", r.Err)
	} else {
		o.metrics.sweeps.WithLabelValues("ok").Inc()
		if r.Sent > 0 {
			o.log.Info("console: feedback resent", "events", r.Sent)
		}
	}
	return r
}

// sendBatch sends rows' events and says what became of each: sent,
// rejected by SQS as the event's own fault (a *pipeline.PermanentError:
// resending cannot help), or failed, to be retried after the row's
// backoff. Its error is the send's when some entry failed transiently.
func (o *outbox) sendBatch(ctx context.Context, rows []moderation.UnsentFeedback) ([]moderation.FeedbackSend, error) {
	msgs := make([]pipeline.OutMessage, len(rows))
	for i, u := range rows {
		msgs[i] = pipeline.OutMessage{Body: feedbackBody(feedbackEvent(u.Decision, u.Key, u.VerdictLabel, u.VerdictCategory, u.Action))}
	}
	err := o.send.Send(ctx, msgs)
	now := o.clock.Now()
	out := make([]moderation.FeedbackSend, len(rows))
	sent, failed := 0, 0
	for i, e := range pipeline.EntryErrors(err, len(rows)) {
		var perm *pipeline.PermanentError
		switch {
		case e == nil:
			out[i].Sent = true
			sent++
		case errors.As(e, &perm) && entryRejected(err):
			out[i].Rejected = e.Error()
		default:
			out[i].RetryAt = now.Add(o.backoff(rows[i].Attempts + 1))
			failed++
		}
	}
	o.metrics.sent.WithLabelValues("sweep").Add(float64(sent))
	o.metrics.failed.WithLabelValues("sweep").Add(float64(failed))
	if failed == 0 {
		// Every entry was sent or rejected: the refusals are handled
		// (marked, counted, logged by sweep), not a failed send.
		return out, nil
	}
	return out, err
}

// entryRejected reports whether a send's error names its entries (a
// *pipeline.BatchError): only then is a permanent error an entry's own. A
// permanent error of the whole call (the queue does not exist, access is
// denied) is no row's fault; its rows back off like any failure.
func entryRejected(err error) bool {
	var be *pipeline.BatchError
	return errors.As(err, &be)
}
