package pipeline

import (
	"encoding/json"
	"time"
)

// ReviewSource names the publisher of a review event: the hourly batch, the
// batch in sweep mode (only what real time did not cover), the real-time
// trigger, or a re-review of an earlier room its campaign's mark linked
// later. It lets verdicts and freshness figures be split by where the
// review came from; workers review every source the same way, but the
// policy takes no protective action beyond escalate on a campaign
// re-review (pipeline/policy).
type ReviewSource string

// The review sources. The empty source is an event from a publisher that
// predates the field.
const (
	SourceBatch    ReviewSource = "batch"
	SourceSweep    ReviewSource = "sweep"
	SourceRealtime ReviewSource = "realtime"
	// SourceCampaign is a re-review, with the campaign signal, of a room
	// reviewed before its mark became a campaign: an old chat, whose
	// verdict may escalate the room to moderators and do nothing else.
	SourceCampaign ReviewSource = "campaign"
)

// Known reports whether s is empty or one of the sources above.
func (s ReviewSource) Known() bool {
	switch s {
	case "", SourceBatch, SourceSweep, SourceRealtime, SourceCampaign:
		return true
	}
	return false
}

// UnmarshalJSON is the tolerant reader of the field: a value that is not a
// known source string (a newer source, an object some producer puts there)
// reads as empty instead of dead-lettering the review, because the source
// changes nothing about how the window is reviewed.
func (s *ReviewSource) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil || !ReviewSource(v).Known() {
		*s = ""
		return nil
	}
	*s = ReviewSource(v)
	return nil
}

// realtimeRunLayout formats the hour of a real-time run id the way the
// batch formats its window bounds.
const realtimeRunLayout = "20060102T150405Z"

// RealtimeRunID is the run id of a real-time review whose window ends at
// windowEnd: "rt-" and the UTC hour the window ends in, so that one
// `worker stop --run rt-20261202T040000Z` stops every real-time review of
// that hour, as a batch run id stops one batch.
func RealtimeRunID(windowEnd time.Time) string {
	return "rt-" + windowEnd.UTC().Truncate(time.Hour).Format(realtimeRunLayout)
}
