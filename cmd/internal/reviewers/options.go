// Package reviewers builds the stage engine of every binary that reviews
// chats (the worker's queue jobs, the console's on-demand reviews): the LLM
// router over the two pools with its fleet-wide limits, and the reviewer
// with the privacy controls (image gate, quote-digest key,
// pseudonymisation). Its options are flags declared, defaulted and
// validated here, or on the router's own configuration (depflags.Pools:
// prices, pseudonymisation, fleet limits), so every such binary has the
// same ones and the same pipeline version for the same values; only the
// traffic class differs between binaries. A new binary that reviews embeds Options and calls New:
// it copies nothing.
package reviewers

import (
	"errors"
	"fmt"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/pipeline/accounthistory"
	"github.com/chatguard/chatguard/pipeline/campaign"
	"github.com/chatguard/chatguard/pipeline/chatcontext"
	"github.com/chatguard/chatguard/pipeline/pseudonym"
	"github.com/chatguard/chatguard/storage/imagecdn"
	"github.com/chatguard/chatguard/storage/rediscampaign"
)

// Options are the stage engine's settings beyond the router's own
// (depflags.Pools, which holds the pools' prices, pseudonymisation and
// the fleet-wide limits): what keeps chat data where it belongs. A binary
// embeds it in its Config; its fields are then that Config's.
type Options struct {
	// Images is the image gate's own configuration (--image-hosts,
	// --image-inline, --image-max-bytes, --image-fetch-timeout): which
	// image URLs reach a model server, and how.
	Images imagecdn.Config
	// QuoteDigestKey is the one secret every keyed pseudonym is derived
	// from (package pseudonym: quote digests, subjects, campaign marks,
	// moderator ids, each under a key of its own); empty is refused unless
	// DevInsecureKeys.
	QuoteDigestKey string
	// DevInsecureKeys allows an empty QuoteDigestKey: the public dev keys,
	// labelled "-dev", for the local stack and tests only.
	DevInsecureKeys bool
	// LegacyPseudonyms also computes the forms made before per-purpose
	// keys, so that values stored in them keep matching (campaign counts
	// in both forms, legacy-to-current pairs recorded, stored marks and
	// moderator ids re-keyed); turn it off once the transition is over
	// (docs/privacy.md, "Pseudonym keys").
	LegacyPseudonyms bool
	// History is the account-history lookup's own configuration
	// (--account-history, --account-history-ttl,
	// --account-history-timeout): earlier verdicts about a room's
	// participants, given to the stages.
	History accounthistory.Config
	// Campaign is when a mark is a campaign signal (--campaign-signals,
	// --campaign-min-rooms, --campaign-rooms-per-sender,
	// --campaign-max-senders, --campaign-timeout, and who is a repeat
	// sender: --campaign-min-senders, --campaign-established-clean-rooms,
	// --campaign-established-overturned, --campaign-verified-accounts).
	Campaign campaign.Config
	// CampaignStore is where marks are counted (--campaign-key-prefix,
	// --campaign-shards, --campaign-max-marks, --campaign-exact-cap).
	CampaignStore rediscampaign.Config
}

// DefaultOptions returns the defaults shown by --help: no image host
// trusted (the pools' defaults are depflags.DefaultPools').
func DefaultOptions() Options {
	return Options{Images: imagecdn.DefaultConfig(), History: accounthistory.DefaultConfig(), Campaign: campaign.DefaultConfig(), CampaignStore: rediscampaign.DefaultConfig(),
		LegacyPseudonyms: true}
}

// Flags declares the prices (--primary-price, --fallback-price) and the
// privacy flags (--image-*, --quote-digest-key, --primary-pseudonymize,
// --fallback-pseudonymize), in the order --help has always listed them:
// the prices and the pseudonymisation are the pools' own settings, bound
// on pools.
func (o *Options) Flags(fs *cli.FlagSet, pools *depflags.Pools) {
	pools.PriceFlags(fs)
	o.ImageFlags(fs)
	o.KeyFlags(fs)
	pools.PseudonymizeFlags(fs)
	o.HistoryFlags(fs)
	o.CampaignFlags(fs)
}

// KeyFlags declares the pseudonym-key flags (--quote-digest-key,
// --dev-insecure-keys, --legacy-pseudonyms); the console declares them
// for its moderator ids too.
func (o *Options) KeyFlags(fs *cli.FlagSet) {
	fs.StringVar(&o.QuoteDigestKey, "quote-digest-key", "the one secret (32+ bytes, from a Secret; prefer the environment variable) every keyed pseudonym is derived from: "+
		"evidence-quote digests, verdict subjects, campaign marks and moderator ids, each under a key of its own (HKDF); empty is refused unless --dev-insecure-keys")
	fs.BoolVar(&o.DevInsecureKeys, "dev-insecure-keys", "development stacks only: with an empty --quote-digest-key, use the public dev keys (every pseudonym labelled -dev, reversible by anyone with a list of ids)")
	fs.BoolVar(&o.LegacyPseudonyms, "legacy-pseudonyms", "also compute the pseudonyms' pre-HKDF forms so that stored ones keep matching: campaign counts in both forms, "+
		"legacy-to-current pairs recorded in MySQL, stored marks and moderator ids re-keyed; turn off 30 days after the upgrade (docs/operations.md)")
}

// Keys are the pseudonym keys of --quote-digest-key, or the dev keys with
// --dev-insecure-keys and no key; an empty key without it is an error.
func (o Options) Keys() (*pseudonym.Keys, error) {
	k, err := pseudonym.Resolve(o.QuoteDigestKey, o.DevInsecureKeys)
	if errors.Is(err, pseudonym.ErrNoSecret) {
		return nil, errors.New("--quote-digest-key is empty: set CHATGUARD_QUOTE_DIGEST_KEY from a Secret, or --dev-insecure-keys on a development stack")
	}
	if err != nil {
		return nil, errors.New("--quote-digest-key must be at least 32 bytes")
	}
	return k, nil
}

// HistoryFlags declares the account-history flags (--account-history*),
// bound on the lookup's own configuration.
func (o *Options) HistoryFlags(fs *cli.FlagSet) {
	fs.DurationVar(&o.History.Window, "account-history", "how far back the account history reaches: earlier verdicts about the room's participants in other rooms, "+
		"given to every stage as a rule-signal block and recorded with the verdict; 0 turns it off (history informs a judge and can also bias it: see docs/operations.md)")
	fs.DurationVar(&o.History.TTL, "account-history-ttl", "how long this process reuses a room's account history (0: a query every review)")
	fs.DurationVar(&o.History.Timeout, "account-history-timeout", "bound of the account-history query; past it the review goes on without history (counted)")
}

// CampaignFlags declares the campaign signals' flags (--campaign-*).
func (o *Options) CampaignFlags(fs *cli.FlagSet) {
	fs.BoolVar(&o.Campaign.Enabled, "campaign-signals", "count risky messages' script fingerprints and contact values fleet-wide in Redis (keyed with --quote-digest-key) and give a mark seen in many rooms from few senders to the stages as a campaign signal; needs --redis-addr")
	fs.IntVar(&o.Campaign.MinRooms, "campaign-min-rooms", "fewest distinct rooms in 24 h a campaign mark is seen in")
	fs.Float64Var(&o.Campaign.RoomsPerSender, "campaign-rooms-per-sender", "fewest rooms per distinct sender a campaign mark averages (a phrase everyone types averages about 1)")
	fs.IntVar(&o.Campaign.MaxSenders, "campaign-max-senders", "most distinct senders a campaign mark has")
	fs.DurationVar(&o.Campaign.Timeout, "campaign-timeout", "bound of the one Redis call a review makes for campaign counts; past it the review goes on without them (counted)")
	fs.IntVar(&o.Campaign.MinSenders, "campaign-min-senders", "fewest distinct senders that make a mark a campaign whoever they are; below it one account's mark is a repeat sender when the account is verified or established (docs/campaigns.md)")
	fs.IntVar(&o.Campaign.EstablishedCleanRooms, "campaign-established-clean-rooms", "fewest earlier clean rooms (account history) that make a lone sender established, with no flag of its own standing")
	fs.IntVar(&o.Campaign.EstablishedOverturned, "campaign-established-overturned", "fewest earlier flags a moderator overturned that make a lone sender established, with no flag of its own standing")
	fs.StringVar(&o.Campaign.VerifiedFile, "campaign-verified-accounts", "file of verified business accounts, one platform sender id a line ('#' comments): a lone sender on it repeating its greeting or contact is a repeat sender, never a campaign; read at start (empty: none)")
	fs.StringVar(&o.CampaignStore.Prefix, "campaign-key-prefix", "prefix of the Redis keys of the campaign counts")
	fs.IntVar(&o.CampaignStore.Shards, "campaign-shards", "shards (Redis Cluster hash tags) of the campaign counts, at least max marks / 128 so each stays in Redis's compact encoding; fixed per deployment")
	fs.IntVar(&o.CampaignStore.MaxMarks, "campaign-max-marks", "marks kept fleet-wide; above it the least recently seen are evicted (counted); about 65 bytes of Redis each")
	fs.IntVar(&o.CampaignStore.ExactCap, "campaign-exact-cap", "rooms and senders a mark counts exactly; above it, a bottom-k estimate over as many")
}

// ValidateCampaign reports the campaign flags' problems when the signals
// are on; redisAddr is where the counts live (they need one).
func (o Options) ValidateCampaign(redisAddr string) error {
	if !o.Campaign.Enabled {
		return nil
	}
	var errs []error
	if redisAddr == "" {
		errs = append(errs, errors.New("--campaign-signals needs --redis-addr"))
	}
	if err := o.Campaign.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--campaign-*: %w", err))
	}
	if err := o.CampaignStore.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--campaign-*: %w", err))
	}
	return errors.Join(errs...)
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

// Validate reports every problem at once, naming the flags.
func (o Options) Validate() error {
	var errs []error
	if _, err := o.Keys(); err != nil {
		errs = append(errs, err)
	}
	if err := o.Images.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--image-*: %w", err))
	}
	if err := o.History.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--account-history*: %w", err))
	}
	return errors.Join(errs...)
}

// ContextFlags declares the context flags (--context-lookback,
// --context-messages) on c, the context a binary's reviews read their
// windows with (package chatcontext): every binary that reviews declares
// them here, so a window's transcript does not depend on who reviews it.
func ContextFlags(fs *cli.FlagSet, c *chatcontext.Config) {
	fs.DurationVar(&c.Lookback, "context-lookback", "each window is read with the room's messages from this long before its start (one extra chat-API fetch; shown as already reviewed, never evidence); 0 disables")
	fs.IntVar(&c.Messages, "context-messages", "the newest this many messages of --context-lookback are shown (extra prompt tokens; cut first under the token budget)")
}
