package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/imagecdn"
)

// privacyOptions are the settings that keep chat data where it belongs:
// which image URLs reach a model server and how, the key of
// stored quote digests, and which pools get contact details pseudonymized.
type privacyOptions struct {
	ImageHosts           string
	ImageInline          bool
	ImageMaxBytes        int64
	ImageFetchTimeout    time.Duration
	QuoteDigestKey       string
	PrimaryPseudonymize  bool
	FallbackPseudonymize bool
}

func defaultPrivacy() privacyOptions {
	ic := imagecdn.DefaultConfig()
	return privacyOptions{ImageMaxBytes: ic.MaxBytes, ImageFetchTimeout: ic.Timeout, FallbackPseudonymize: true}
}

func (o *privacyOptions) flags(fs *cli.FlagSet) {
	fs.StringVar(&o.ImageHosts, "image-hosts", "comma-separated image hosts (the marketplace CDN; .suffix allows subdomains) whose https URLs may reach a model; empty sends no image")
	fs.BoolVar(&o.ImageInline, "image-inline", "fetch allowed images here (size-limited, type-checked, public addresses only) and send them as data: URLs, so model servers never fetch")
	fs.Int64Var(&o.ImageMaxBytes, "image-max-bytes", "largest image --image-inline fetches")
	fs.DurationVar(&o.ImageFetchTimeout, "image-fetch-timeout", "deadline of one --image-inline fetch")
	fs.StringVar(&o.QuoteDigestKey, "quote-digest-key", "HMAC key (32+ bytes, from a Secret; prefer the environment variable) of stored evidence-quote digests; empty uses a dev-only key, labelled hmac-dev")
	fs.BoolVar(&o.PrimaryPseudonymize, "primary-pseudonymize", "replace contact details with placeholders (<PHONE_1>) in requests to the primary pool")
	fs.BoolVar(&o.FallbackPseudonymize, "fallback-pseudonymize", "replace contact details with placeholders (<PHONE_1>) in requests to the fallback (third-party) pool")
}

func (o privacyOptions) validate() error {
	var errs []error
	if o.QuoteDigestKey != "" && len(o.QuoteDigestKey) < 32 {
		errs = append(errs, errors.New("--quote-digest-key must be at least 32 bytes"))
	}
	if err := o.images().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--image-*: %w", err))
	}
	return errors.Join(errs...)
}

func (o privacyOptions) images() imagecdn.Config {
	c := imagecdn.DefaultConfig()
	for _, h := range strings.Split(o.ImageHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			c.Hosts = append(c.Hosts, h)
		}
	}
	c.Inline, c.MaxBytes, c.Timeout = o.ImageInline, o.ImageMaxBytes, o.ImageFetchTimeout
	return c
}

// imageGate builds the gate every image URL passes before a model sees it.
func (o privacyOptions) imageGate() (pipeline.ImageGate, error) {
	return imagecdn.New(o.images())
}
