package pipeline

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// lakeEventNamespace is the UUIDv5 namespace of chatguard's derived lake
// event ids. It must never change: a new namespace would give a rerun of an
// old review new ids, and the dedup views would keep both copies.
var lakeEventNamespace = uuid.MustParse("9b1f6c0e-2d4a-5e8b-a7c3-1f0d2e3c4b5a")

// InferenceLogEventID is the event id of the inference log of one stage
// attempt of a review: derived from the review key (its pipeline version
// included), the stage and the stage's attempt number, so that a retried
// or duplicated review emits the same ids and the lake's _dedup views keep
// one row per attempt. Copies collapse where they share a partition (the
// UTC hour of occurred_at); a rerun in a later hour stays a second row with
// the same id, which count(DISTINCT event_id) still counts once.
func InferenceLogEventID(k ReviewKey, stage StageName, attempt int) string {
	return derivedID(string(EventInferenceLog), k, string(stage), strconv.Itoa(attempt))
}

// VerdictEventID is the event id of the verdict event of a review that ended
// with status: one id per (review key, final status), so that a review
// recorded done twice (a redelivery racing the first delete) is one row in
// verdict_dedup, while a failed attempt and the later done one stay two.
// It is the id of revision 1 (see VerdictRevisionEventID).
func VerdictEventID(k ReviewKey, status Status) string {
	return derivedID(string(EventVerdict), k, string(status))
}

// VerdictRevisionEventID is VerdictEventID for a revision of the key: a
// revision above 1 (an explicit re-review) is part of the id, so that the
// dedup views keep each revision; revision 1, and 0 (unknown, an event
// from before revisions), keep the id VerdictEventID gives.
func VerdictRevisionEventID(k ReviewKey, status Status, revision int) string {
	if revision > 1 {
		return derivedID(string(EventVerdict), k, string(status), "revision", strconv.Itoa(revision))
	}
	return VerdictEventID(k, status)
}

// derivedID is a UUIDv5 over an unambiguous encoding of the parts (a JSON
// array: no separator inside a room id can make two keys collide).
func derivedID(kind string, k ReviewKey, parts ...string) string {
	name := append([]string{kind, k.RoomID, k.WindowStart.UTC().Format(time.RFC3339Nano), k.WindowEnd.UTC().Format(time.RFC3339Nano), k.PipelineVersion}, parts...)
	b, err := json.Marshal(name)
	if err != nil { // a []string always encodes
		panic(err)
	}
	return uuid.NewSHA1(lakeEventNamespace, b).String()
}
