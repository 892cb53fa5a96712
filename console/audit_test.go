package console

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
)

func TestAuditItemsAreSpreadThroughThePage(t *testing.T) {
	t.Parallel()
	items := func(from, n int, audit bool) []moderation.QueueItem {
		out := make([]moderation.QueueItem, n)
		for i := range out {
			out[i] = moderation.QueueItem{ID: uint64(from + i), Audit: audit}
		}
		return out
	}
	got := mixAudit(items(1, 9, false), items(100, 2, true))
	var ids []uint64
	for _, it := range got {
		ids = append(ids, it.ID)
	}
	require.Equal(t, []uint64{1, 2, 3, 100, 4, 5, 6, 101, 7, 8, 9}, ids, "evenly spaced, flagged order kept")
	require.Equal(t, []uint64{100, 101}, func() []uint64 {
		var out []uint64
		for _, it := range mixAudit(nil, items(100, 2, true)) {
			out = append(out, it.ID)
		}
		return out
	}(), "an empty queue shows its audit items")

	require.Equal(t, 0, auditPerPage(50, 0))
	require.Equal(t, 1, auditPerPage(50, 0.02), "about 2 % of the mixed page")
	require.Equal(t, 1, auditPerPage(3, 0.02), "a short page still gets one")
	require.Equal(t, 50, auditPerPage(50, 0.5))
	require.Equal(t, defaultPage, auditPerPage(50, 1))
}

func TestAuditJoinsOnlyTheDefaultQueuesFirstPage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{"", true},
		{"status=done", true},
		{"cursor=abc", false},
		{"label=abusive", false},
		{"category=spam", false},
		{"severity=3", false},
		{"decided=1", false},
		{"run=r1", false},
		{"status=failed", false},
	} {
		q, err := url.ParseQuery(tc.q)
		require.NoError(t, err)
		f, err := queueFilter(q, Who{})
		require.NoError(t, err)
		require.Equal(t, tc.want, defaultQueue(f, q), tc.q)
	}
}

func TestAuditShareIsValidated(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.DevLogin = true
	require.Equal(t, 0.02, cfg.AuditShare)
	require.NoError(t, cfg.Validate())
	for _, bad := range []float64{-0.1, 1.5} {
		cfg.AuditShare = bad
		require.ErrorContains(t, cfg.Validate(), "--audit-share")
	}
}
