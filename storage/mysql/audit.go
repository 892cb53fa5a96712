package mysql

import (
	"context"
	"fmt"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// The audit sample (migration 00019; moderation.IsAuditItem says which
// clean verdicts are audit items, by a hash of the review key).
//
// verdicts.audit_bucket holds the hash's first 16 bits
// (moderation.AuditBucket) (a stored generated
// column, indexed with status and label), so reading audit items is a
// range scan of ix_verdicts_audit in its own order, stopped by LIMIT:
//
//	SELECT v.id, …, t.moderator, t.active_at
//	FROM verdicts v LEFT JOIN queue_takes t ON t.verdict_id = v.id
//	  LEFT JOIN moderator_decisions d ON d.verdict_id = v.id AND d.reversed_at IS NULL AND d.decision <> 'undo'
//	WHERE v.status = 'done' AND v.label = 'clean' AND v.audit_bucket < ?
//	  AND v.revision_slot = 0 AND d.verdict_id IS NULL
//	ORDER BY v.audit_bucket, v.id
//	LIMIT ?

// auditSQL reads up to ? undecided audit items below a bucket threshold.
var auditSQL = `SELECT ` + queueCols + `, FALSE, COALESCE(t.moderator, ''), t.active_at
FROM verdicts v LEFT JOIN queue_takes t ON t.verdict_id = v.id
  LEFT JOIN moderator_decisions d ON d.verdict_id = v.id AND d.reversed_at IS NULL AND d.decision <> 'undo'
WHERE v.status = ? AND v.label = ? AND v.audit_bucket < ? AND v.revision_slot = 0 AND d.verdict_id IS NULL
ORDER BY v.audit_bucket, v.id
LIMIT ?`

// ListAudit returns up to limit audit items at share (0..1) that no
// moderator has decided, in bucket order (random with respect to the
// chats, stable between reads), each with Audit set. A share of 0 or a
// limit below 1 reads nothing. It returns an error wrapping ctx's when ctx
// ends, and only reads.
func (s *Store) ListAudit(ctx context.Context, share float64, limit int) ([]moderation.QueueItem, error) {
	th := moderation.AuditThreshold(share)
	if th == 0 || limit < 1 {
		return nil, nil
	}
	items, err := s.queueRows(ctx, auditSQL, []any{string(pipeline.StatusDone), string(pipeline.LabelClean), th, min(limit, moderation.MaxQueueLimit)})
	if err != nil {
		return nil, fmt.Errorf("mysql: list audit: %w", err)
	}
	for i := range items {
		items[i].Audit = true
	}
	return items, nil
}
