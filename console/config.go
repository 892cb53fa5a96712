package console

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatcontext"
	"github.com/chatguard/chatguard/pipeline/live"
)

// Config is the web app's own settings: sign-in, on-demand reviews and
// their streams, the drain, the stop button and the feedback outbox. Its
// fields are the console binary's flags of the same names (cmd/console
// binds them; this package touches no flags), and Validate's messages name
// those flags.
type Config struct {
	// Outbox: the resend of unsent moderator feedback (feedback.go).
	Outbox OutboxConfig
	// Shift: the time zone, the items' deadlines, the shift page
	// (shift.go).
	Shift ShiftConfig

	// MaxReviews is the admission gate: on-demand reviews running at once
	// on this pod; one more is refused with 429 and Retry-After.
	MaxReviews int
	// ReviewTimeout is the deadline of one on-demand review.
	ReviewTimeout time.Duration
	// MaxWindow is the longest window an on-demand review may ask for.
	MaxWindow time.Duration
	// Context is the context an on-demand review reads its window with,
	// as the workers' reviews do (package chatcontext).
	Context chatcontext.Config
	// ClientBuffer is how many events an SSE client may fall behind before
	// it is dropped (it may resume): the live hub's subscriber buffer.
	ClientBuffer int
	// DrainTimeout is how long running reviews may finish, at a stop,
	// after clients were told to reconnect.
	DrainTimeout time.Duration
	// RetryAfter is the Retry-After of a refused on-demand review.
	RetryAfter time.Duration

	// OperatorURL is the worker's operator API (POST /v1/stop); empty
	// hides the stop button. OperatorTokenFile holds its bearer token,
	// read at every stop so that a rotated Secret needs no restart.
	OperatorURL       string
	OperatorTokenFile string
	// StopTTL is how long the stop button's room stop lasts.
	StopTTL time.Duration
	// TakeTimeout is how long a taken queue item stays its taker's after
	// their last action on it; then it shows as free and anyone may take it.
	TakeTimeout time.Duration
	// AuditShare is the share (0..1) of clean verdicts that are audit
	// items: sampled by a hash of the review key (storage/mysql's audit
	// sample), mixed into the queue at about this share of its page, and
	// recorded as audit decisions, which make a labelled set's clean
	// stratum. 0 turns the audit off.
	AuditShare float64
	// UndoWindow is how long after a decision its moderator may undo it
	// (a reversing decision row, audited); 0 turns undo off.
	UndoWindow time.Duration
	// DecisionReasons are the canned reasons a decision form offers
	// beside the free note; the one chosen leads the stored note.
	DecisionReasons []string

	// TrustedProxies are the comma-separated CIDRs of the auth proxy;
	// IdentityHeader is trusted only from them.
	TrustedProxies string
	// IdentityHeader is the one request header that names the signed-in
	// moderator, trusted only from TrustedProxies.
	IdentityHeader string
	// DevLogin allows a password-less development login at /login.
	DevLogin bool
	// SessionKeyFile holds the key that signs sessions and CSRF tokens
	// (empty: a random key per process).
	SessionKeyFile string
}

// DefaultConfig returns the web app's defaults (the console's --help).
func DefaultConfig() Config {
	return Config{
		Outbox:        DefaultOutboxConfig(),
		Shift:         DefaultShiftConfig(),
		MaxReviews:    8,
		ReviewTimeout: 5 * time.Minute,
		MaxWindow:     pipeline.DefaultMaxWindow,
		Context:       chatcontext.DefaultConfig(),
		ClientBuffer:  live.DefaultConfig().SubscriberBuffer,
		DrainTimeout:  25 * time.Second,
		RetryAfter:    5 * time.Second,
		StopTTL:       10 * time.Minute,
		TakeTimeout:   10 * time.Minute,
		AuditShare:    0.02,
		UndoWindow:    2 * time.Minute,
		DecisionReasons: []string{"known scam script", "contact or payment outside the app", "evidence does not support the label",
			"ordinary trade talk", "not enough context"},
		// oauth2-proxy's header in reverse-proxy mode.
		IdentityHeader: "X-Forwarded-Email",
	}
}

// Validate reports every problem of the web app's settings at once, each
// once, naming the console's flags.
func (c Config) Validate() error {
	var errs []error
	if _, err := c.proxies(); err != nil {
		errs = append(errs, err)
	}
	if !validHeaderName(c.IdentityHeader) {
		errs = append(errs, fmt.Errorf("--identity-header %q is not a header name", c.IdentityHeader))
	}
	if c.TrustedProxies == "" && !c.DevLogin {
		errs = append(errs, errors.New("give --trusted-proxies (the auth proxy) or --dev-login, or nobody can sign in"))
	}
	if c.OperatorURL != "" && c.OperatorTokenFile == "" {
		errs = append(errs, errors.New("--operator-token-file is required with --operator-url"))
	}
	if c.MaxReviews < 1 || c.MaxReviews > 10000 {
		errs = append(errs, errors.New("--max-reviews must be in 1..10000"))
	}
	if c.MaxWindow <= 0 || c.DrainTimeout <= 0 || c.RetryAfter < time.Second || c.StopTTL <= 0 {
		errs = append(errs, errors.New("--max-window, --drain-timeout and --stop-ttl must be positive, --retry-after at least 1s"))
	}
	if c.TakeTimeout < time.Minute || c.TakeTimeout > 24*time.Hour {
		errs = append(errs, errors.New("--take-timeout must be in 1m..24h"))
	}
	if !(c.AuditShare >= 0 && c.AuditShare <= 1) { // NaN too
		errs = append(errs, fmt.Errorf("--audit-share %v is not in 0..1", c.AuditShare))
	}
	if c.UndoWindow < 0 || c.UndoWindow > time.Hour {
		errs = append(errs, errors.New("--undo-window must be in 0..1h (0: no undo)"))
	}
	if err := validReasons(c.DecisionReasons); err != nil {
		errs = append(errs, err)
	}
	if err := c.Context.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--context-lookback/--context-messages: %w", err))
	}
	errs = append(errs, c.Hub().Validate(), c.Outbox.Validate(), c.Shift.Validate())
	return errors.Join(errs...)
}

// Hub is the live hub's configuration that follows from the console's:
// its subscriber buffer is ClientBuffer.
func (c Config) Hub() live.Config {
	h := live.DefaultConfig()
	h.SubscriberBuffer = c.ClientBuffer
	return h
}

func (c Config) proxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(c.TrustedProxies, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxies: %q is not a CIDR", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// validReasons checks the canned reasons: at most 30, each 1..100
// characters and named once.
func validReasons(rs []string) error {
	if len(rs) > 30 {
		return errors.New("--decision-reasons: at most 30 reasons")
	}
	for i, r := range rs {
		if n := len([]rune(r)); n == 0 || n > 100 || strings.TrimSpace(r) != r {
			return fmt.Errorf("--decision-reasons: %q must be 1..100 characters, without surrounding spaces", r)
		}
		for _, o := range rs[:i] {
			if o == r {
				return fmt.Errorf("--decision-reasons: %q is given twice", r)
			}
		}
	}
	return nil
}
