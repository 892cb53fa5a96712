package pipeline

import (
	"context"
	"time"
)

// CampaignKind says what a campaign mark marks.
type CampaignKind string

// The campaign mark kinds (the kind column of verdict_campaigns).
const (
	// CampaignScript marks a near-duplicate fingerprint of a risky
	// message's normalised text (one LSH band of it).
	CampaignScript CampaignKind = "script"
	// CampaignContact marks a contact value a risky message carried: a
	// messenger id, phone number, account number, e-mail address or
	// look-alike payment host.
	CampaignContact CampaignKind = "contact"
)

// CampaignSighting is one mark one room's review saw: Mark and Sender are
// keyed pseudonyms ('hmac:<24 hex>'), never text, contact values or ids.
type CampaignSighting struct {
	Kind      CampaignKind
	Mark      string
	MessageID string
	Sender    string
}

// CampaignCount is a mark with how far it has spread fleet-wide: the
// distinct rooms and senders that carried it in the sliding window when
// the review counted it (exact up to the counter's cap, estimated above).
type CampaignCount struct {
	Kind      CampaignKind `json:"kind"`
	Mark      string       `json:"mark"`
	MessageID string       `json:"message_id"`
	Rooms     int          `json:"rooms"`
	Senders   int          `json:"senders"`
}

// MaxCampaigns bounds the campaign signals a verdict records.
const MaxCampaigns = 16

// CampaignCounter counts campaign marks fleet-wide. Observe records that
// room (a keyed pseudonym) carried the sightings at time at, and returns
// each sighting's counts including this room, in the order given. One
// call is one round trip; it honours ctx, and an error means no counts
// (the review goes on without campaign signals). Errors are wrapped with
// the adapter's prefix.
type CampaignCounter interface {
	Observe(ctx context.Context, room string, sightings []CampaignSighting, at time.Time) ([]CampaignCount, error)
}
