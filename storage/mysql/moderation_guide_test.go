package mysql_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/moderation/moderationtest"
	"github.com/chatguard/chatguard/pipeline"
)

var sqlBlockRe = regexp.MustCompile("(?s)```sql\n(.*?)```")

// TestModerationGuideQueriesReturnRows runs every query of
// docs/analysts-moderation.md on a dated sample, as the demo's is (three
// November days of verdicts, decisions, takes and a reveal, long before
// the test runs): each returns rows, so none counts back from the wall
// clock.
func TestModerationGuideQueriesReturnRows(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "analysts-moderation.md"))
	require.NoError(t, err)
	queries := sqlBlockRe.FindAllStringSubmatch(string(guide), -1)
	require.GreaterOrEqual(t, len(queries), 5, "the guide's queries")
	s := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	day0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	cats := []pipeline.Category{pipeline.CategoryExternalPayment, pipeline.CategoryPhishingLink, pipeline.CategoryOffPlatform}
	for i := range 30 {
		v := moderationtest.Verdict(fmt.Sprintf("room-guide-%d", i%12))
		at := day0.Add(time.Duration(i/10)*24*time.Hour + time.Duration(i%10)*time.Hour)
		v.Key.WindowStart, v.Key.WindowEnd, v.FinishedAt, v.Category = at, at.Add(time.Hour), at.Add(time.Hour+time.Minute), cats[i%3]
		if i%4 == 0 {
			v.Label, v.Category = pipeline.LabelClean, pipeline.CategoryClean
		}
		id := moderationtest.Seed(t, s, v)
		mod := fmt.Sprintf("mod-%d", i%2)
		took := v.FinishedAt.Add(time.Duration(i) * time.Minute)
		require.NoError(t, s.RecordTake(ctx, moderation.TakeRecord{At: took, VerdictID: id, Moderator: mod, Event: moderation.TakeStarted}))
		d := moderation.Decision{VerdictID: id, Moderator: mod, Decision: moderation.DecisionConfirm, Label: v.Label, Category: v.Category,
			DecidedAt: took.Add(40 * time.Second)}
		if v.Label == pipeline.LabelClean {
			d.Category = ""
		}
		if i%5 == 0 {
			d.Decision, d.Label, d.Category = moderation.DecisionOverturn, pipeline.LabelSuspicious, pipeline.CategorySpam
		}
		_, err := s.AddDecision(ctx, d)
		require.NoError(t, err)
		require.NoError(t, s.RecordTake(ctx, moderation.TakeRecord{At: d.DecidedAt, VerdictID: id, Moderator: mod, Event: moderation.TakeReleased}))
		if i == 3 {
			_, err := s.RecordAction(ctx, moderation.AuditRecord{At: d.DecidedAt, Moderator: mod, Action: moderation.ActionReveal, VerdictID: id,
				RoomID: v.Key.RoomID, Detail: "message m1 value 0: " + moderation.RevealReasons[0]})
			require.NoError(t, err)
		}
	}
	for i, q := range queries {
		rows, err := s.DB().QueryContext(ctx, q[1])
		require.NoError(t, err, "query %d:\n%s", i+1, q[1])
		n := 0
		for rows.Next() {
			n++
		}
		require.NoError(t, rows.Err())
		rows.Close()
		require.Positive(t, n, "query %d returns rows on the dated sample:\n%s", i+1, q[1])
	}
}
