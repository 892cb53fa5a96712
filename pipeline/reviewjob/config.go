package reviewjob

import (
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatcontext"
)

// Review defaults (DefaultConfig).
const (
	DefaultMaxAge      = 6 * time.Hour
	DefaultBusyRetry   = 10 * time.Second
	DefaultSaveTimeout = 10 * time.Second
	// minClaimTTL keeps a claim's renewals, every third of it, apart.
	minClaimTTL = 3 * time.Second
	// maxClockSkew bounds how far ahead a producer's clock may be set.
	maxClockSkew = time.Hour
)

// DefaultConfig returns the review job's settings' defaults; the
// collaborators (Stops, Claims, Owner, Health) are left for the caller.
func DefaultConfig() Config {
	return Config{
		MaxAge: DefaultMaxAge, SaveTimeout: DefaultSaveTimeout, BusyRetry: DefaultBusyRetry,
		Limits: pipeline.DefaultEventLimits(), ClaimTTL: DefaultClaimTTL, ClaimPoll: DefaultClaimPoll,
		Context: chatcontext.DefaultConfig(),
	}
}

// Validate reports every problem with the settings at once (the
// collaborators are not checked). It holds a configuration to what
// DefaultConfig starts from: every duration set, none negative.
// (New still gives zero durations their defaults, for
// callers that build a Config by hand and skip Validate.)
func (c Config) Validate() error {
	var errs []error
	if c.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("max age %s must not be negative", c.MaxAge))
	}
	if c.SaveTimeout <= 0 {
		errs = append(errs, fmt.Errorf("save timeout %s must be positive", c.SaveTimeout))
	}
	if c.BusyRetry <= 0 {
		errs = append(errs, fmt.Errorf("busy retry %s must be positive", c.BusyRetry))
	}
	if c.Limits.MaxWindow <= 0 {
		errs = append(errs, fmt.Errorf("max window %s must be positive", c.Limits.MaxWindow))
	}
	if c.Limits.MaxClockSkew <= 0 || c.Limits.MaxClockSkew > maxClockSkew {
		errs = append(errs, fmt.Errorf("max clock skew %s must be in (0, %s]", c.Limits.MaxClockSkew, maxClockSkew))
	}
	if c.ClaimTTL < minClaimTTL {
		errs = append(errs, fmt.Errorf("claim ttl %s must be at least %s", c.ClaimTTL, minClaimTTL))
	}
	if c.ClaimPoll <= 0 || c.ClaimPoll > c.ClaimTTL {
		errs = append(errs, fmt.Errorf("claim poll %s must be positive and at most the claim ttl %s", c.ClaimPoll, c.ClaimTTL))
	}
	return errors.Join(append(errs, c.Context.Validate())...)
}
