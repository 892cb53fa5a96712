package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

func TestActionsReportReplaysTheShippedPolicy(t *testing.T) {
	t.Parallel()
	db, dsn := stacktest.MySQL(t)
	ctx := context.Background()
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	v := storetest.SampleVerdict("room-report")
	v.Subjects, v.OffenderRole = []string{"seller-1"}, "seller"
	storetest.MustSave(t, ctx, mysql.New(db), v)
	var out, errb bytes.Buffer
	args := []string{"actions", "report", "--mysql-dsn", dsn,
		"--from", v.FinishedAt.Add(-time.Hour).UTC().Format(time.RFC3339), "--to", v.FinishedAt.Add(time.Hour).UTC().Format(time.RFC3339)}
	code := run(ctx, args, func(string) string { return "" }, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Contains(t, out.String(), "verdicts finished in")
	require.Regexp(t, `payment_scam_notice\s+escalate:on=1 warn_counterpart:dry_run=1 warn_sender:dry_run=1\s+1\s+1\s+0\s+0\s+-`, out.String())
}

func TestActionsReportRefusesBadUsage(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"actions", "report", "--from", "2026-12-07T00:00:00Z"}, func(string) string { return "" }, &out, &errb)
	require.Equal(t, 2, code)
	require.Contains(t, errb.String(), "--mysql-dsn is required")
	require.Contains(t, errb.String(), "--to after --from")
	code = run(context.Background(), []string{"actions", "nope"}, func(string) string { return "" }, &out, &errb)
	require.Equal(t, 2, code)
}
