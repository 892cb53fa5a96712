package moderation

import (
	"crypto/sha1"
	"encoding/binary"
	"math"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// The audit sample: recall is measured against clean verdicts that a
// moderator looked at, so the console mixes a share of clean verdicts into
// the queue as audit items. Which clean verdicts is decided by a hash of
// the review key, not by anyone's choice: the sample is random with
// respect to the chats, the same on every pod, every page and every rerun,
// and raising the share only adds verdicts to it. A store may keep the
// bucket beside the verdict (storage/mysql's verdicts.audit_bucket, a
// generated column that must equal AuditBucket).

// AuditBuckets is the number of audit buckets (16 bits of the hash).
const AuditBuckets = 1 << 16

// AuditBucket is the verdict under key's audit bucket, 0..AuditBuckets-1:
// SHA-1 over the key's fields joined by "|", the times in UTC at
// microsecond precision as MariaDB prints a DATETIME(6).
func AuditBucket(key pipeline.ReviewKey) int {
	const layout = "2006-01-02 15:04:05.000000"
	at := func(t time.Time) string { return t.UTC().Truncate(time.Microsecond).Format(layout) }
	sum := sha1.Sum([]byte(strings.Join([]string{key.RoomID, at(key.WindowStart), at(key.WindowEnd), key.PipelineVersion}, "|")))
	return int(binary.BigEndian.Uint16(sum[:2]))
}

// AuditThreshold is the bucket below which a clean verdict is an audit
// item at share (clamped to 0..1).
func AuditThreshold(share float64) int {
	return int(math.Round(min(max(share, 0), 1) * AuditBuckets))
}

// IsAuditItem reports whether a verdict with this key, status and label is
// an audit item at share (0..1): a done clean verdict whose bucket is below
// share of the buckets.
func IsAuditItem(key pipeline.ReviewKey, status pipeline.Status, label pipeline.Label, share float64) bool {
	return status == pipeline.StatusDone && label == pipeline.LabelClean && AuditBucket(key) < AuditThreshold(share)
}
