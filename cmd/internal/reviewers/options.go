// Package reviewers builds the stage engine of every binary that reviews
// chats (the worker's queue jobs, the console's on-demand reviews): the LLM
// router over the two pools with its fleet-wide limits, and the reviewer
// with the privacy controls (image gate, quote-digest key,
// pseudonymisation). Its options are flags declared, defaulted and
// validated here, so every such binary has the same ones and the same
// pipeline version for the same values; only the traffic class differs
// between binaries. A new binary that reviews embeds Options and calls New:
// it copies nothing.
package reviewers

import (
	"errors"
	"fmt"
	"strings"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/storage/imagecdn"
)

// Options are the stage engine's settings beyond the pools themselves
// (depflags.Pools): what keeps chat data where it belongs, what each
// pool's calls cost, and the limits every replica shares through Redis.
// A binary embeds it in its Config; its fields are then that Config's.
type Options struct {
	// Images is the image gate's own configuration (--image-hosts,
	// --image-inline, --image-max-bytes, --image-fetch-timeout): which
	// image URLs reach a model server, and how.
	Images imagecdn.Config
	// QuoteDigestKey keys the stored evidence-quote digests; empty uses
	// the dev-only key.
	QuoteDigestKey string
	// PrimaryPseudonymize and FallbackPseudonymize replace contact
	// details with placeholders in requests to that pool.
	PrimaryPseudonymize  bool
	FallbackPseudonymize bool
	// PrimaryPrice and FallbackPrice are llm.ParsePrice texts: what each
	// pool's calls cost, recorded per stage (empty: free).
	PrimaryPrice  string
	FallbackPrice string
	// The fleet-wide limits (Redis leases and budgets); 0 leaves one off.
	FleetPrimaryLimit    int
	FleetPrimaryReserved int
	// FleetPrimaryReservedRealtime is of --fleet-primary-limit what batch
	// may not take, kept for real-time reviews.
	FleetPrimaryReservedRealtime int
	FleetFallbackRPM             int
	FleetFallbackTPM             int
	FleetReplicas                int
	FleetKeyPrefix               string
}

// DefaultOptions returns the defaults shown by --help: no image host
// trusted, the third-party fallback pseudonymized, no fleet limit.
func DefaultOptions() Options {
	return Options{Images: imagecdn.DefaultConfig(), FallbackPseudonymize: true,
		FleetReplicas: 1, FleetKeyPrefix: "chatguard:fleet:"}
}

// Flags declares the privacy flags (--image-*, --quote-digest-key,
// --primary-pseudonymize, --fallback-pseudonymize) and the prices
// (--primary-price, --fallback-price).
func (o *Options) Flags(fs *cli.FlagSet) {
	fs.StringVar(&o.PrimaryPrice, "primary-price", "what a primary call costs, recorded per stage: gpu_hour=USD,shared_by=N (self-hosted) and/or prompt=,cached=,completion= USD per 1M tokens; empty: free")
	fs.StringVar(&o.FallbackPrice, "fallback-price", "what a fallback call costs: prompt=,cached=,completion= USD per 1M tokens (managed API) and/or gpu_hour=,shared_by=; empty: free")
	o.ImageFlags(fs)
	fs.StringVar(&o.QuoteDigestKey, "quote-digest-key", "HMAC key (32+ bytes, from a Secret; prefer the environment variable) of stored evidence-quote digests; empty uses a dev-only key, labelled hmac-dev")
	fs.BoolVar(&o.PrimaryPseudonymize, "primary-pseudonymize", "replace contact details with placeholders (<PHONE_1>) in requests to the primary pool")
	fs.BoolVar(&o.FallbackPseudonymize, "fallback-pseudonymize", "replace contact details with placeholders (<PHONE_1>) in requests to the fallback (third-party) pool")
}

// ImageFlags declares the image gate's flags (--image-*), which `worker
// eval` shares so that it vets and fetches images as the worker does.
func (o *Options) ImageFlags(fs *cli.FlagSet) {
	fs.ListVar(&o.Images.Hosts, "image-hosts", "comma-separated image hosts (the marketplace CDN; .suffix allows subdomains) whose https URLs may reach a model; empty sends no image")
	fs.BoolVar(&o.Images.Inline, "image-inline", "fetch allowed images here (size-limited, type-checked, public addresses only) and send them as data: URLs, so model servers never fetch")
	fs.Int64Var(&o.Images.MaxBytes, "image-max-bytes", "largest image --image-inline fetches")
	fs.DurationVar(&o.Images.Timeout, "image-fetch-timeout", "deadline of one --image-inline fetch")
}

// ImageGate is the image gate of these options, with inlining as asked
// (whatever --image-inline says): the gate New builds, for a binary that
// wants it without a reviewer. It fails on settings Validate refuses.
func (o Options) ImageGate(inline bool) (*imagecdn.Gate, error) {
	c := o.Images
	c.Inline = inline
	g, err := imagecdn.New(c)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	return g, nil
}

// FleetFlags declares the --fleet-* flags. They are apart from Flags so
// that a binary lists them with its other capacity settings.
func (o *Options) FleetFlags(fs *cli.FlagSet) {
	fs.IntVar(&o.FleetPrimaryLimit, "fleet-primary-limit", "primary calls in flight across every replica (Redis leases); 0: no fleet limit")
	fs.IntVar(&o.FleetPrimaryReserved, "fleet-primary-reserved", "of --fleet-primary-limit, leases only interactive calls may take")
	fs.IntVar(&o.FleetPrimaryReservedRealtime, "fleet-primary-reserved-realtime", "of --fleet-primary-limit, leases only real-time (and interactive) calls may take; batch holds at most limit - reserved - this; 0: real time shares batch's leases")
	fs.IntVar(&o.FleetFallbackRPM, "fleet-fallback-rpm", "fallback requests per minute across every replica (Redis GCRA); 0: unlimited")
	fs.IntVar(&o.FleetFallbackTPM, "fleet-fallback-tpm", "fallback tokens per minute across every replica (Redis GCRA); 0: unlimited")
	fs.IntVar(&o.FleetReplicas, "fleet-replicas", "replicas the fleet limits are divided by while Redis is unreachable (each pod's static share)")
	fs.StringVar(&o.FleetKeyPrefix, "fleet-key-prefix", "Redis key prefix of the fleet limits; every replica of one deployment uses the same")
}

// Validate reports every problem at once, naming the flags. redisAddr is
// the binary's --redis-addr, which the fleet limits need.
func (o Options) Validate(redisAddr string) error {
	var errs []error
	if o.QuoteDigestKey != "" && len(o.QuoteDigestKey) < 32 {
		errs = append(errs, errors.New("--quote-digest-key must be at least 32 bytes"))
	}
	if err := o.Images.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--image-*: %w", err))
	}
	for _, pr := range []struct{ flag, v string }{{"primary-price", o.PrimaryPrice}, {"fallback-price", o.FallbackPrice}} {
		if _, err := llm.ParsePrice(pr.v); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", pr.flag, err))
		}
	}
	if o.FleetPrimaryLimit < 0 || o.FleetPrimaryReserved < 0 || (o.FleetPrimaryLimit > 0 && o.FleetPrimaryReserved >= o.FleetPrimaryLimit) {
		errs = append(errs, errors.New("--fleet-primary-reserved must be in 0..--fleet-primary-limit-1"))
	}
	if o.FleetPrimaryReservedRealtime < 0 || (o.FleetPrimaryLimit > 0 && o.FleetPrimaryReserved+o.FleetPrimaryReservedRealtime >= o.FleetPrimaryLimit) {
		errs = append(errs, errors.New("--fleet-primary-reserved plus --fleet-primary-reserved-realtime must stay below --fleet-primary-limit"))
	}
	if o.FleetFallbackRPM < 0 || o.FleetFallbackTPM < 0 || o.FleetReplicas < 1 {
		errs = append(errs, errors.New("--fleet-fallback-rpm and --fleet-fallback-tpm must not be negative, --fleet-replicas at least 1"))
	}
	if o.fleetShared() && redisAddr == "" {
		errs = append(errs, errors.New("--fleet-* limits need --redis-addr"))
	}
	return errors.Join(errs...)
}

// fleetShared says whether any limit is shared through Redis.
func (o Options) fleetShared() bool {
	return o.FleetPrimaryLimit > 0 || o.FleetFallbackRPM > 0 || o.FleetFallbackTPM > 0
}

// Router adds the options to rc (the pools' configuration): prices,
// pseudonymisation and the fleet limits, whose store is leases (nil when
// no limit is set; see New). Validate has checked the prices.
func (o Options) Router(rc llm.Config, leases FleetStore) llm.Config {
	pp, _ := llm.ParsePrice(o.PrimaryPrice)
	fp, _ := llm.ParsePrice(o.FallbackPrice)
	rc.Primary.Price, rc.Primary.Pseudonymize = pp, o.PrimaryPseudonymize
	rc.Fallback.Price, rc.Fallback.Pseudonymize = fp, o.FallbackPseudonymize
	rc.Fleet = llm.FleetConfig{
		PrimaryLimit: o.FleetPrimaryLimit, PrimaryReserved: o.FleetPrimaryReserved, PrimaryReservedRealtime: o.FleetPrimaryReservedRealtime,
		FallbackRPM: o.FleetFallbackRPM, FallbackTPM: o.FleetFallbackTPM, Replicas: o.FleetReplicas,
		Name: strings.TrimSuffix(o.FleetKeyPrefix, ":"),
	}
	if leases != nil {
		rc.Fleet.Leases, rc.Fleet.Budget = leases, leases
	}
	return rc
}
