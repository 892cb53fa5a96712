// Package chatcontext reads a review window with what came just before it:
// a pipeline.ChatSource that answers a window's messages and, ahead of
// them, the room's newest messages of a lookback before its start, marked
// Context (the reviewer shows them as already reviewed and never as
// evidence). Every binary that reviews (the worker's queue jobs, the
// console's on-demand reviews) reads its windows through it, so a window
// is judged on the same transcript whoever reviews it.
package chatcontext

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
)

// The defaults: an hour before the window, at most 30 messages of it.
const (
	DefaultLookback = time.Hour
	DefaultMessages = 30
	// maxLookback and maxMessages bound what an operator can ask for:
	// context is read with every review, and every message of it is
	// prompt tokens.
	maxLookback = 24 * time.Hour
	maxMessages = 500
)

// Config is the context a window is read with: the room's newest Messages
// messages of the Lookback before the window start. Either zero reviews
// the window alone.
type Config struct {
	Lookback time.Duration
	Messages int
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{Lookback: DefaultLookback, Messages: DefaultMessages} }

// Enabled reports whether windows are read with context.
func (c Config) Enabled() bool { return c.Lookback > 0 && c.Messages > 0 }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Lookback < 0 || c.Lookback > maxLookback {
		errs = append(errs, fmt.Errorf("context lookback %s must be in [0, %s] (0 disables context)", c.Lookback, maxLookback))
	}
	if c.Messages < 0 || c.Messages > maxMessages {
		errs = append(errs, fmt.Errorf("context messages %d must be in [0, %d]", c.Messages, maxMessages))
	}
	return errors.Join(errs...)
}

// FetchesHelp is the help of each binary's counter of context fetches,
// which it names after itself (chatguard_<binary>_context_fetches_total)
// with one label, outcome: ok or failed.
const FetchesHelp = "Fetches of the room's messages before a review's window, by outcome (ok, failed); a failed one is reviewed without context."

// Source is a window's chat with its context. It is safe for concurrent
// use when its chat source is.
type Source struct {
	cfg     Config
	chat    pipeline.ChatSource
	fetches *prometheus.CounterVec
	log     *slog.Logger
}

var _ pipeline.ChatSource = (*Source)(nil)

// New returns the source over chat. fetches (an outcome-labelled counter,
// see FetchesHelp) and log may be nil.
func New(cfg Config, chat pipeline.ChatSource, fetches *prometheus.CounterVec, log *slog.Logger) *Source {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{cfg: cfg, chat: chat, fetches: fetches, log: log}
}

// History returns the messages of [from, to) and, when context is on,
// the room's newest Messages messages of the Lookback before from, ahead
// of them, marked Context. The two fetches run at once, through the same
// chat source and its bounds. The window's failure is the caller's (its
// error, unwrapped); the context's is counted and logged, and the window
// is returned without it. A cancelled ctx ends both fetches.
func (s *Source) History(ctx context.Context, roomID string, from, to time.Time) ([]pipeline.ChatMessage, error) {
	if !s.cfg.Enabled() {
		return s.chat.History(ctx, roomID, from, to)
	}
	since := from.Add(-s.cfg.Lookback)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type fetched struct {
		msgs []pipeline.ChatMessage
		err  error
	}
	before := make(chan fetched, 1)
	go func() {
		msgs, err := s.chat.History(cctx, roomID, since, from)
		before <- fetched{msgs, err}
	}()
	msgs, err := s.chat.History(ctx, roomID, from, to)
	if err != nil {
		cancel()
		<-before
		return nil, err
	}
	b := <-before
	if b.err != nil {
		s.count("failed")
		s.log.Warn("review: context fetch failed; the window is reviewed without it", "room_id", roomID, "err", b.err)
		return msgs, nil
	}
	s.count("ok")
	return append(newest(b.msgs, since, from, s.cfg.Messages), msgs...), nil
}

func (s *Source) count(outcome string) {
	if s.fetches != nil {
		s.fetches.WithLabelValues(outcome).Inc()
	}
}

// newest keeps the n newest messages sent in [from, to), oldest first,
// marked Context: a chat source's trim notice and anything outside the
// span (a source that does not honour it) are left out, so nothing of the
// window is counted as context.
func newest(msgs []pipeline.ChatMessage, from, to time.Time, n int) []pipeline.ChatMessage {
	out := make([]pipeline.ChatMessage, 0, min(len(msgs), n))
	for _, m := range msgs {
		if m.MessageID == pipeline.TrimNoticeID || m.SentAt.Before(from) || !m.SentAt.Before(to) {
			continue
		}
		m.Context = true
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b pipeline.ChatMessage) int {
		if c := a.SentAt.Compare(b.SentAt); c != 0 {
			return c
		}
		return cmp.Compare(a.MessageID, b.MessageID)
	})
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
