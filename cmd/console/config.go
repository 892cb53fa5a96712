package main

import (
	"errors"
	"fmt"
	"net"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/cmd/internal/reviewers"
	"github.com/chatguard/chatguard/console"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/storage/chatapi"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/redislive"
	"github.com/chatguard/chatguard/storage/redisstop"
	"github.com/chatguard/chatguard/storage/sqs"
)

// Config is every setting of the console; each is a flag and a CHATGUARD_
// environment variable (see --help). The web app's own settings are
// package console's Config, embedded: its fields are bound here, never
// copied.
type Config struct {
	// Config: sign-in, on-demand reviews, their streams and drain, the
	// stop button and the feedback outbox (package console).
	console.Config

	ListenAddr string
	AdminAddr  string
	PublicURL  string

	MySQL mysql.Config
	Chat  chatapi.Config

	// Feedback is the feedback queue's: --feedback-queue-url (the
	// inference logs' publisher sends to the same queue).
	Feedback sqs.Config

	cli.RedisOptions
	// Stop is the stop signals': --stop-channel, --stop-key-prefix and
	// --stop-check-timeout.
	Stop redisstop.Config
	// Live is the on-demand reviews' event streams': --live-key-prefix,
	// --live-max-len and --live-ttl.
	Live redislive.Config

	depflags.Pools
	// Options: the stage engine's privacy, price and fleet settings,
	// the workers' own (cmd/internal/reviewers): give the console the
	// same values, so that on-demand verdicts share the workers' pipeline
	// version and chat data is kept in the same bounds.
	reviewers.Options
	// Actions are the protective actions' (--actions-queue-url,
	// --actions-policy), the workers' own: with a queue URL, an on-demand
	// verdict's actions are decided by the policy and written with it, and
	// the workers' outbox relay publishes them.
	Actions depflags.Actions
	// CampaignJoin is the campaign join's (--campaign-join-*): the
	// periodic job that joins a script's marks into one campaign and
	// links its first rooms.
	CampaignJoin campaign.JoinConfig

	LogLevel string
}

// consoleMySQL is the store's configuration with the console's smaller
// pool: page loads and decisions, not a worker's jobs.
func consoleMySQL() mysql.Config {
	m := mysql.DefaultConfig()
	m.MaxOpenConns = 16
	return m
}

// DefaultConfig returns the defaults shown by --help.
func DefaultConfig() Config {
	pools := depflags.DefaultPools(8, 8)
	return Config{
		Config:       console.DefaultConfig(),
		Options:      reviewers.DefaultOptions(),
		ListenAddr:   ":8080",
		AdminAddr:    ":9091",
		MySQL:        consoleMySQL(),
		Chat:         chatapi.DefaultConfig(),
		Feedback:     feedbackQueue(),
		Stop:         redisstop.DefaultConfig(),
		Live:         redislive.DefaultConfig(),
		Pools:        pools,
		CampaignJoin: campaign.DefaultJoinConfig(),
		Actions:      depflags.DefaultActions(),
		LogLevel:     "info",
	}
}

func (c *Config) flags() *cli.FlagSet {
	fs := cli.NewFlagSet("console", "The moderators' console: the review queue, room pages with live chat history, confirm/overturn\n"+
		"(moderator_feedback events), on-demand reviews streamed over SSE (POST /v1/reviews) and the stop button.")
	fs.StringVar(&c.ListenAddr, "listen-addr", "listen address of the console pages and POST /v1/reviews (behind the auth proxy)")
	fs.StringVar(&c.AdminAddr, "admin-addr", "listen address of /healthz, /readyz and /metrics")
	fs.StringVar(&c.PublicURL, "public-url", "the console's URL as moderators open it (printed at start; empty: derived from --listen-addr)")
	depflags.BindMySQL(fs, &c.MySQL)
	depflags.BindChatHistory(fs, &c.Chat, "chat-history API base URL (the room page fetches history live; the console stores no chat text)")
	fs.StringVar(&c.Feedback.URL, "feedback-queue-url", "SQS feedback queue URL for moderator_feedback and inference-log events")
	outboxFlags(fs, &c.Outbox)
	joinFlags(fs, &c.CampaignJoin)
	c.RedisOptions.Flags(fs, "Redis host:port: stop signals and the live event streams (resume)")
	depflags.BindStops(fs, &c.Stop)
	liveFlags(fs, &c.Live)
	c.Pools.FleetFlags(fs)
	c.Pools.Flags(fs, "primary model id (the same as the workers', so verdicts share a pipeline version)",
		"interactive calls in flight to the %s pool at most from this pod")
	c.Options.Flags(fs, &c.Pools)
	fs.IntVar(&c.MaxReviews, "max-reviews", "on-demand reviews running at once on this pod; one more is refused with 429 and Retry-After")
	fs.DurationVar(&c.ReviewTimeout, "review-timeout", "deadline of one on-demand review")
	fs.DurationVar(&c.MaxWindow, "max-window", "longest window an on-demand review may ask for")
	reviewers.ContextFlags(fs, &c.Config.Context)
	fs.IntVar(&c.ClientBuffer, "client-buffer", "events an SSE client may fall behind before it is dropped (it may resume)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", "on SIGTERM, how long running reviews may finish after clients were told to reconnect")
	fs.DurationVar(&c.RetryAfter, "retry-after", "Retry-After of a refused on-demand review")
	fs.StringVar(&c.OperatorURL, "operator-url", "base URL of the worker's operator API (POST /v1/stop); empty hides the stop button")
	fs.StringVar(&c.OperatorTokenFile, "operator-token-file", "file holding the operator API's bearer token (sent as Authorization: Bearer)")
	fs.DurationVar(&c.StopTTL, "stop-ttl", "how long the stop button's room stop lasts")
	c.Actions.Flags(fs)
	fs.DurationVar(&c.ActionsClearedFor, "actions-cleared-for", "how long an overturn clears the verdict's accounts for the policy rules that acted on them (the workers' policy's cleared_for)")
	fs.DurationVar(&c.TakeTimeout, "take-timeout", "how long a taken queue item stays its moderator's after their last action on it; then anyone may take it")
	shiftFlags(fs, &c.Shift)
	fs.Float64Var(&c.AuditShare, "audit-share", "share (0..1) of clean verdicts sampled, by a hash of the review key, as audit items: mixed into the queue, marked audit, their decisions the labelled sets' clean stratum (0: no audit)")
	fs.DurationVar(&c.UndoWindow, "undo-window", "how long after a decision its moderator may undo it (recorded as a reversing decision, audited; never a delete); 0: no undo")
	fs.ListVar(&c.DecisionReasons, "decision-reasons", "comma-separated canned reasons the decision forms offer beside the free note (the one chosen leads the stored note)")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", "comma-separated CIDRs of the auth proxy; --identity-header is trusted only from them")
	fs.StringVar(&c.IdentityHeader, "identity-header", "the one request header naming the signed-in moderator's e-mail, set by the auth proxy (oauth2-proxy: X-Forwarded-Email; nginx auth_request: X-Auth-Request-Email); no other header is read")
	fs.BoolVar(&c.DevLogin, "dev-login", "allow a password-less development login at /login (never in production)")
	fs.StringVar(&c.SessionKeyFile, "session-key-file", "file holding the key that signs sessions and CSRF tokens (empty: a random key per process; pods behind one Service need a shared file)")
	fs.StringVar(&c.LogLevel, "log-level", "debug|info|warn|error")
	return fs
}

// Validate reports every problem at once, each once, naming the flags:
// the web app's (console.Config.Validate) and the rest.
func (c Config) Validate() error {
	var errs []error
	req := func(v, name string) {
		if v == "" {
			errs = append(errs, fmt.Errorf("--%s is required", name))
		}
	}
	req(c.MySQL.DSN, "mysql-dsn")
	req(c.Chat.BaseURL, "chat-api-url")
	req(c.RedisAddr, "redis-addr")
	for _, a := range []struct{ v, name string }{{c.ListenAddr, "listen-addr"}, {c.AdminAddr, "admin-addr"}} {
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: %v", a.name, a.v, err))
		}
	}
	if c.ReviewTimeout <= c.LLM.AttemptTimeout {
		errs = append(errs, errors.New("--review-timeout must be above --attempt-timeout"))
	}
	errs = append(errs, c.Pools.Validate(c.RedisAddr))
	if _, err := cli.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.MySQL.MaxOpenConns < 1 {
		errs = append(errs, errors.New("--mysql-max-open-conns must be positive"))
	}
	errs = append(errs, c.Config.Validate(), c.Feedback.Validate(), c.RedisOptions.Validate(), c.Live.Validate(), c.Stop.Validate(), c.Options.Validate(), c.Options.ValidateCampaign(c.RedisAddr),
		c.CampaignJoin.Validate(), c.Actions.Validate())
	return errors.Join(errs...)
}

// feedbackQueue is the queue client's defaults, named so that its
// problems say which queue they are about.
func feedbackQueue() sqs.Config {
	q := sqs.DefaultConfig()
	q.Name = "feedback"
	return q
}

// joinFlags binds the campaign join's settings (campaign.JoinConfig).
func joinFlags(fs *cli.FlagSet, c *campaign.JoinConfig) {
	fs.DurationVar(&c.Every, "campaign-join-every", "time between runs of the campaign join, which joins marks sharing a room or an account into one campaign and links the rooms reviewed before their mark became one (0: off); every replica may run it, the runs are idempotent")
	fs.DurationVar(&c.Window, "campaign-join-window", "how far back the campaign join reads recorded marks")
	fs.IntVar(&c.MaxRows, "campaign-join-max-rows", "recorded marks one run of the campaign join reads at most (the newest)")
	fs.IntVar(&c.MaxMarks, "campaign-join-max-marks", "most marks one campaign holds; a join past it is refused (counted)")
	fs.IntVar(&c.MaxLinks, "campaign-join-max-links", "earlier rooms one run links to one campaign at most")
	fs.IntVar(&c.MaxSenders, "campaign-join-max-senders", "most fleet-wide senders a mark may have and still join others (above it, a phrase many people write)")
	fs.IntVar(&c.ReReviewMax, "campaign-rereview-max", "rooms of one campaign each run of the campaign join re-reviews at most, among those it just linked whose verdicts are not flagged: a new revision reviewed with the campaign signal as source campaign, which takes no protective action beyond escalate (0: off)")
	fs.IntVar(&c.ReReviewMaxRun, "campaign-rereview-max-run", "campaign re-reviews one run of the campaign join makes at most, all campaigns together")
}

// liveFlags binds the live event streams' settings (redislive.Config).
func liveFlags(fs *cli.FlagSet, c *redislive.Config) {
	fs.StringVar(&c.KeyPrefix, "live-key-prefix", "prefix of the Redis Streams keeping on-demand reviews' events")
	fs.Int64Var(&c.MaxLen, "live-max-len", "events kept per on-demand review (approximate MAXLEN)")
	fs.DurationVar(&c.TTL, "live-ttl", "how long an on-demand review's events are kept for resume after its last event")
}

// shiftFlags binds the shift's settings (console.ShiftConfig).
func shiftFlags(fs *cli.FlagSet, c *console.ShiftConfig) {
	fs.StringVar(&c.TimeZone, "time-zone", "IANA time zone the pages show times in (Asia/Seoul for a Korean team)")
	fs.StringVar(&c.Deadlines, "deadlines", "how long an item may wait in the queue before it is overdue, by category: comma-separated category=duration, * for the rest")
	fs.IntVar(&c.ShiftHours, "shift-hours", "the shift page's default window, in hours ending now")
	fs.StringVar(&c.Teams, "teams", "the shift page's teams: semicolon-separated name=moderator id,… (the pseudonymous ids the page header shows); empty: one team")
}

// outboxFlags binds the feedback outbox's settings (console.OutboxConfig).
func outboxFlags(fs *cli.FlagSet, c *console.OutboxConfig) {
	fs.DurationVar(&c.FeedbackGrace, "feedback-grace", "a decision whose moderator_feedback event SQS has not accepted this long after it was made is resent by the sweeper")
	fs.DurationVar(&c.FeedbackSweepEvery, "feedback-sweep-every", "time between sweeps of unsent moderator feedback")
	fs.IntVar(&c.FeedbackSweepBatch, "feedback-sweep-batch", "decisions resent per SQS call (1..10)")
	fs.IntVar(&c.FeedbackSweepMaxBatches, "feedback-sweep-max-batches", "batches one sweep sends at most (a larger backlog drains over several sweeps)")
	fs.DurationVar(&c.FeedbackSendTimeout, "feedback-send-timeout", "deadline of one sweep batch: its SQS send and its marks")
	fs.DurationVar(&c.FeedbackRetryInitial, "feedback-retry-initial", "ceiling of the first backoff of a decision whose feedback send failed transiently (doubling per failure, full jitter)")
	fs.DurationVar(&c.FeedbackRetryMax, "feedback-retry-max", "cap of the per-decision feedback resend backoff")
}
