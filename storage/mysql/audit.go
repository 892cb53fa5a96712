package mysql

import (
	"context"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/chatguard/chatguard/pipeline"
)

// The audit sample (migration 00019): recall is measured against clean
// verdicts that a moderator looked at, so the console mixes a share of
// clean verdicts into the queue as audit items. Which clean verdicts is
// decided by a hash of the review key, not by anyone's choice: the sample
// is random with respect to the chats, the same on every pod, every page
// and every rerun, and raising the share only adds verdicts to it.
//
// verdicts.audit_bucket holds the hash's first 16 bits (a stored generated
// column, indexed with status and label), so reading audit items is a
// range scan of ix_verdicts_audit in its own order, stopped by LIMIT:
//
//	SELECT v.id, …, t.moderator, t.active_at
//	FROM verdicts v LEFT JOIN queue_takes t ON t.verdict_id = v.id
//	  LEFT JOIN moderator_decisions d ON d.verdict_id = v.id
//	WHERE v.status = 'done' AND v.label = 'clean' AND v.audit_bucket < ?
//	  AND v.revision_slot = 0 AND d.verdict_id IS NULL
//	ORDER BY v.audit_bucket, v.id
//	LIMIT ?

// auditBuckets is the number of audit buckets (16 bits of the hash).
const auditBuckets = 1 << 16

// AuditBucket is the verdict under key's audit bucket, 0..65535: what the
// verdicts.audit_bucket column holds for it (SHA-1 over the key's fields
// joined by "|", the times as MariaDB prints a DATETIME(6)).
func AuditBucket(key pipeline.ReviewKey) int {
	const layout = "2006-01-02 15:04:05.000000"
	sum := sha1.Sum([]byte(strings.Join([]string{key.RoomID, dbTime(key.WindowStart).Format(layout),
		dbTime(key.WindowEnd).Format(layout), key.PipelineVersion}, "|")))
	return int(binary.BigEndian.Uint16(sum[:2]))
}

// auditThreshold is the bucket below which a clean verdict is an audit
// item at share (0..1).
func auditThreshold(share float64) int {
	return int(math.Round(min(max(share, 0), 1) * auditBuckets))
}

// IsAuditItem reports whether a verdict with this key, status and label is
// an audit item at share (0..1): a done clean verdict whose bucket is below
// share of the buckets.
func IsAuditItem(key pipeline.ReviewKey, status pipeline.Status, label pipeline.Label, share float64) bool {
	return status == pipeline.StatusDone && label == pipeline.LabelClean && AuditBucket(key) < auditThreshold(share)
}

// auditSQL reads up to ? undecided audit items below a bucket threshold.
var auditSQL = `SELECT ` + queueCols + `, FALSE, COALESCE(t.moderator, ''), t.active_at
FROM verdicts v LEFT JOIN queue_takes t ON t.verdict_id = v.id
  LEFT JOIN moderator_decisions d ON d.verdict_id = v.id
WHERE v.status = ? AND v.label = ? AND v.audit_bucket < ? AND v.revision_slot = 0 AND d.verdict_id IS NULL
ORDER BY v.audit_bucket, v.id
LIMIT ?`

// ListAudit returns up to limit audit items at share (0..1) that no
// moderator has decided, in bucket order (random with respect to the
// chats, stable between reads), each with Audit set. A share of 0 or a
// limit below 1 reads nothing. It returns an error wrapping ctx's when ctx
// ends, and only reads.
func (s *Store) ListAudit(ctx context.Context, share float64, limit int) ([]QueueItem, error) {
	th := auditThreshold(share)
	if th == 0 || limit < 1 {
		return nil, nil
	}
	items, err := s.queueRows(ctx, auditSQL, []any{string(pipeline.StatusDone), string(pipeline.LabelClean), th, min(limit, MaxQueueLimit)})
	if err != nil {
		return nil, fmt.Errorf("mysql: list audit: %w", err)
	}
	for i := range items {
		items[i].Audit = true
	}
	return items, nil
}
