package console

import (
	"context"
	"math"
	"net/url"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// The audit queue: recall can only be measured against clean verdicts
// that a moderator looked at, chosen by chance. Config.AuditShare of the
// clean verdicts are audit items (moderation.IsAuditItem's hash sample); the
// default queue's first page mixes about that share of audit items among
// its flagged ones, evenly spaced and marked "audit", and ?audit=1 lists
// audit items alone. They are taken, confirmed and overturned like any
// item; record marks their decisions as audit decisions.

// listQueue reads the queue page that filter f and the query string q ask
// for: the flagged queue, with audit items mixed into the default queue's
// first page, or (?audit=1) the audit items alone.
func (s *server) listQueue(ctx context.Context, f moderation.QueueFilter, q url.Values) (moderation.QueuePage, error) {
	if q.Get("audit") == "1" {
		items, err := s.store.ListAudit(ctx, s.cfg.AuditShare, defaultPage)
		return moderation.QueuePage{Items: items}, err
	}
	page, err := s.store.ListQueue(ctx, f, q.Get("cursor"))
	if err != nil || !defaultQueue(f, q) {
		return page, err
	}
	n := auditPerPage(len(page.Items), s.cfg.AuditShare)
	if n == 0 {
		return page, nil
	}
	audit, err := s.store.ListAudit(ctx, s.cfg.AuditShare, n)
	if err != nil {
		// The flagged queue is the moderators' work; a failed audit read
		// must not hide it.
		s.log.Warn("console: audit items not read; the queue shows without them", "err", err)
		return page, nil
	}
	page.Items = mixAudit(page.Items, audit)
	return page, nil
}

// defaultPage is the page size the console asks for (the store's default).
const defaultPage = 50

// defaultQueue reports whether f and q are the default queue's first page:
// no filter, no cursor, undecided items only.
func defaultQueue(f moderation.QueueFilter, q url.Values) bool {
	return q.Get("cursor") == "" && (f.Status == "" || f.Status == pipeline.StatusDone) && len(f.Labels) == 0 &&
		f.Category == "" && f.MinSeverity == 0 && f.From.IsZero() && f.To.IsZero() && f.RunID == "" && !f.IncludeDecided
}

// auditPerPage is how many audit items join a page of flagged items at
// share: share of the mixed page, at least one while share is positive
// (a short queue still gets its audit).
func auditPerPage(flagged int, share float64) int {
	if share <= 0 {
		return 0
	}
	if share >= 1 {
		return defaultPage
	}
	return max(1, int(math.Round(float64(max(flagged, defaultPage))*share/(1-share))))
}

// mixAudit spreads audit among flagged, evenly: the i-th audit item goes
// after (i+1)/(len(audit)+1) of the flagged items.
func mixAudit(flagged, audit []moderation.QueueItem) []moderation.QueueItem {
	out := make([]moderation.QueueItem, 0, len(flagged)+len(audit))
	next := 0
	for i, a := range audit {
		at := (i + 1) * len(flagged) / (len(audit) + 1)
		out = append(out, flagged[next:at]...)
		out = append(out, a)
		next = at
	}
	return append(out, flagged[next:]...)
}
