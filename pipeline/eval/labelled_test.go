package eval

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

func TestDecisionStrata(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		verdict, decided pipeline.Label
		cat              pipeline.Category
		audit            bool
		want             string
	}{
		{pipeline.LabelAbusive, pipeline.LabelAbusive, pipeline.CategoryPhishingLink, false, "phishing_link"},
		{pipeline.LabelClean, pipeline.LabelSuspicious, pipeline.CategoryOffPlatform, false, "off_platform"},
		{pipeline.LabelSuspicious, pipeline.LabelClean, pipeline.CategoryClean, false, StratumHardNegative},
		{pipeline.LabelClean, pipeline.LabelClean, pipeline.CategoryClean, true, StratumClean},
		{pipeline.LabelClean, pipeline.LabelAbusive, pipeline.CategorySpam, true, StratumClean},
		{pipeline.LabelClean, pipeline.LabelClean, pipeline.CategoryClean, false, StratumCleanUnaudited},
		{pipeline.LabelAbusive, pipeline.LabelAbusive, "", false, "uncategorised"},
	} {
		d := Decision{VerdictLabel: tc.verdict, DecidedLabel: tc.decided, DecidedCategory: tc.cat, Audit: tc.audit}
		require.Equal(t, tc.want, d.Stratum(), "%+v", tc)
	}
}

func TestParseDecisionsNamesTheProblem(t *testing.T) {
	t.Parallel()
	_, err := ParseDecisions([][]string{{"room_id"}})
	require.ErrorContains(t, err, "want the columns")
	row := []string{"r1", "2026-11-01 10:00:00.000", "2026-11-01 11:00:00.000", "v1", "abusive", "spam", "clean", "clean", "2026-11-02 09:00:00.123", "2", "true",
		"hmac:bbbbbbbbbbbbbbbbbbbbbbbb,hmac:aaaaaaaaaaaaaaaaaaaaaaaa", `[{"kind":"phone","mark":"hmac:cccccccccccccccccccccccc","rooms":3,"senders":2}]`}
	ds, err := ParseDecisions([][]string{decisionColumns, row})
	require.NoError(t, err)
	require.Equal(t, 2, ds[0].Decisions)
	require.Equal(t, "hmac:aaaaaaaaaaaaaaaaaaaaaaaa", ds[0].Account, "the smallest subject")
	require.Equal(t, "hmac:cccccccccccccccccccccccc", ds[0].Campaign)
	raw := append([]string{}, row...)
	raw[11], raw[12] = "user-123", ""
	ds, err = ParseDecisions([][]string{decisionColumns, raw})
	require.NoError(t, err)
	require.Empty(t, ds[0].Account, "a raw id is not a cluster key")
	require.Empty(t, ds[0].Campaign)
	require.True(t, ds[0].Audit)
	require.Equal(t, 123e6, float64(ds[0].DecidedAt.Nanosecond()))
	bad := append([]string{}, row...)
	bad[1], bad[6], bad[10], bad[12] = "yesterday", "evil", "maybe", "[{"
	_, err = ParseDecisions([][]string{decisionColumns, row, bad})
	require.ErrorContains(t, err, "row 2")
	require.ErrorContains(t, err, `decided_label "evil" is unknown`)
	require.ErrorContains(t, err, `"yesterday"`)
	require.ErrorContains(t, err, `audit "maybe"`)
	require.ErrorContains(t, err, "campaigns:")
}

func TestReportSaysModeratorCasesAreMasked(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	res := Result{Cases: []Case{{ID: "a", Source: SourceSample}}, Config: Config{Concurrency: []int{1}}}
	writeHeader(&b, res, Summary{}, ReportOptions{})
	require.NotContains(t, b.String(), "masked")
	res.Cases = append(res.Cases, Case{ID: "b", Source: SourceModerators}, Case{ID: "c", Source: SourceModerators})
	b.Reset()
	writeHeader(&b, res, Summary{}, ReportOptions{})
	require.Contains(t, b.String(), "2 cases are labelled by moderators' decisions")
	require.Contains(t, b.String(), "the models were evaluated on masked text")
}
