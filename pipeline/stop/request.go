package stop

import (
	"errors"
	"fmt"
	"time"
)

// DefaultTTL is how long a stop lives when the operator gives no TTL: long
// enough to outlast the redeliveries of an hourly batch's messages.
const DefaultTTL = 24 * time.Hour

// Request is an operator's stop as typed on the command line or posted to
// the worker's admin port (POST /v1/stop). Exactly one of RoomID (with or
// without a window) and RunID names the scope.
type Request struct {
	RoomID      string    `json:"room_id,omitempty"`
	WindowStart time.Time `json:"window_start,omitzero"`
	WindowEnd   time.Time `json:"window_end,omitzero"`
	RunID       string    `json:"run_id,omitempty"`
	// TTL is a Go duration string ("30m"); empty means DefaultTTL.
	TTL    string `json:"ttl,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Signal turns the request into a validated signal published at now. It
// reports every problem at once.
func (r Request) Signal(now time.Time) (Signal, error) {
	now = now.UTC()
	ttl := DefaultTTL
	var errs []error
	if r.TTL != "" {
		d, err := time.ParseDuration(r.TTL)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("ttl %q is not a positive duration", r.TTL))
		} else {
			ttl = d
		}
	}
	s := Signal{Reason: r.Reason, PublishedAt: now, ExpiresAt: now.Add(ttl)}
	switch {
	case r.RunID != "" && r.RoomID != "":
		errs = append(errs, errors.New("give a run id or a room, not both"))
	case r.RunID != "":
		s.Scope, s.RunID = ScopeRun, r.RunID
	case r.RoomID != "" && (!r.WindowStart.IsZero() || !r.WindowEnd.IsZero()):
		s.Scope, s.RoomID, s.WindowStart, s.WindowEnd = ScopeReview, r.RoomID, r.WindowStart.UTC(), r.WindowEnd.UTC()
	case r.RoomID != "":
		s.Scope, s.RoomID = ScopeRoom, r.RoomID
	default:
		errs = append(errs, errors.New("name a room (optionally with a window) or a run id"))
	}
	if len(errs) == 0 {
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Signal{}, fmt.Errorf("stop: %w", err)
	}
	return s, nil
}
