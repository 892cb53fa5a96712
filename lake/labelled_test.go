package lake_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsathena "github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/standin"
	"github.com/chatguard/chatguard/lake"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/pipeline/eval"
	athenasrc "github.com/chatguard/chatguard/storage/athena"
	"github.com/chatguard/chatguard/storage/chatapi"
	"github.com/chatguard/chatguard/storage/s3lake"
	"github.com/chatguard/chatguard/storage/s3lake/s3laketest"
)

// writeEvents writes evs into lakeDir as the consumer lays them out, one
// object per partition.
func writeEvents(t *testing.T, lakeDir string, evs []pipeline.LakeEvent, received time.Time) {
	t.Helper()
	parts := map[string][]pipeline.LakeRecord{}
	for _, ev := range evs {
		d, err := pipeline.DecodeLakeEvent(s3laketest.Body(t, ev), received)
		require.NoError(t, err)
		p := s3lake.PartitionPath(d.EventType, pipeline.LakeHour(d.OccurredAt))
		parts[p] = append(parts[p], d)
	}
	for p, recs := range parts {
		dir := filepath.Join(lakeDir, "events", filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		var buf bytes.Buffer
		require.NoError(t, s3lake.EncodeParquet(&buf, recs[0].EventType, recs))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "part-a.parquet"), buf.Bytes(), 0o644))
	}
}

// decisionLake is a sample lake's rooms with a done verdict each and
// moderators' decisions on them, and what labelled_decisions must return.
type decisionLake struct {
	events []pipeline.LakeEvent
	want   map[string]eval.Decision // by room
}

// decide makes the events: every room's verdict agrees with its truth,
// except every fourth clean room, which the pipeline flagged (a hard
// negative once a moderator says clean), and every fifth abusive or
// suspicious room, which it called clean (a missed positive once an audit
// overturns it). Decisions on clean verdicts are audit decisions, but for
// the first clean room's (decided from elsewhere); every third room gets a wrong
// decision first and the right one an hour later (the latest wins); one
// decision has no verdict and one verdict failed, and neither is a row.
func decide(rooms []standin.Truth) decisionLake {
	dl := decisionLake{want: map[string]eval.Decision{}}
	add := func(typ pipeline.EventType, id string, at time.Time, p any) {
		dl.events = append(dl.events, pipeline.LakeEvent{EventID: id, EventType: typ, OccurredAt: at.UTC().Truncate(time.Millisecond),
			SchemaVersion: pipeline.LakeEventSchemaVersion, Payload: p})
	}
	cleanSeen, flaggedSeen := 0, 0
	for i, r := range rooms {
		k := pipeline.ReviewKey{RoomID: r.RoomID, WindowStart: r.FirstMessageAt.UTC().Truncate(time.Second),
			WindowEnd: r.LastMessageAt.UTC().Truncate(time.Second).Add(2 * time.Second), PipelineVersion: "pv-set"}
		label, cat := r.Label, r.Category
		if label == pipeline.LabelClean {
			cleanSeen++
			if cleanSeen%4 == 0 {
				label, cat = pipeline.LabelAbusive, pipeline.CategoryPhishingLink
			}
		} else {
			flaggedSeen++
			if flaggedSeen%5 == 0 {
				label, cat = pipeline.LabelClean, pipeline.CategoryClean
			}
		}
		audit := label == pipeline.LabelClean && !(r.Label == pipeline.LabelClean && cleanSeen == 1)
		status := pipeline.StatusDone
		if i == 1 {
			status = pipeline.StatusFailed
		}
		at := k.WindowEnd.Add(time.Hour)
		if i != 2 { // room 2's decision has no verdict
			add(pipeline.EventVerdict, pipeline.VerdictEventID(k, status), at, pipeline.VerdictEvent{RoomID: k.RoomID, WindowStart: k.WindowStart,
				WindowEnd: k.WindowEnd, PipelineVersion: k.PipelineVersion, RunID: "run", Status: status, Label: label, Category: cat, Attempts: 1})
		}
		fb := func(at time.Time, l pipeline.Label, c pipeline.Category) {
			add(pipeline.EventModeratorFeedback, uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(k, at))).String(), at, pipeline.ModeratorFeedback{
				RoomID: k.RoomID, WindowStart: k.WindowStart, WindowEnd: k.WindowEnd, PipelineVersion: k.PipelineVersion, ModeratorID: "mod-1",
				VerdictLabel: label, VerdictCategory: cat, DecidedLabel: l, DecidedCategory: c, ActionTaken: pipeline.ActionNone, Audit: audit})
		}
		n := 1
		decidedAt := at.Add(time.Hour)
		if i%3 == 0 {
			fb(decidedAt.Add(-30*time.Minute), pipeline.LabelSuspicious, pipeline.CategorySpam)
			n = 2
		}
		fb(decidedAt, r.Label, r.Category)
		if i == 1 || i == 2 {
			continue
		}
		dl.want[r.RoomID] = eval.Decision{Key: k, VerdictLabel: label, VerdictCategory: cat, DecidedLabel: r.Label, DecidedCategory: r.Category,
			DecidedAt: decidedAt.UTC().Truncate(time.Millisecond), Decisions: n, Audit: audit}
	}
	return dl
}

func TestLabelledSetFromModeratorsDecisions(t *testing.T) {
	t.Parallel()
	lakeDir, truthDir := standin.SampleLake(t, 5, 80, 1)
	rooms := standin.ReadTruth(t, truthDir)
	dl := decide(rooms)
	writeEvents(t, lakeDir, dl.events, time.Now())
	sim := standin.StartAthena(t, standin.AthenaOptions{LakeDir: lakeDir})
	client := awsathena.New(awsathena.Options{Region: "us-east-1", BaseEndpoint: aws.String(sim.URL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	q, err := lake.Query("labelled_decisions")
	require.NoError(t, err)
	sql, err := lake.WithDedupViews(q)
	require.NoError(t, err)
	first, last := rooms[0].FirstMessageAt.AddDate(0, 0, -1).Format(time.DateOnly), rooms[0].FirstMessageAt.AddDate(0, 0, 3).Format(time.DateOnly)
	src, err := athenasrc.New(client, athenasrc.DefaultConfig())
	require.NoError(t, err)
	rows, err := src.Rows(ctx, sql, []string{"'" + first + "'", "'" + last + "'"})
	require.NoError(t, err)
	decisions, err := eval.ParseDecisions(rows)
	require.NoError(t, err)
	got := map[string]eval.Decision{}
	for _, d := range decisions {
		got[d.Key.RoomID] = d
	}
	require.Equal(t, dl.want, got, "the latest decision per verdict, done verdicts only")

	chat, err := chatapi.New(func() chatapi.Config {
		c := chatapi.DefaultConfig()
		c.BaseURL = standin.StartChatAPILake(t, lakeDir)
		return c
	}())
	require.NoError(t, err)
	cfg := eval.SetConfig{Size: 3, Sizes: map[string]int{eval.StratumClean: 6}, Seed: 7}
	cases, strata, err := eval.BuildSet(ctx, decisions, chat, cfg)
	require.NoError(t, err)
	perStratum := map[string]int{}
	for _, d := range decisions {
		perStratum[d.Stratum()]++
	}
	require.Contains(t, perStratum, eval.StratumHardNegative)
	require.Contains(t, perStratum, eval.StratumClean)
	require.Contains(t, perStratum, eval.StratumCleanUnaudited)
	require.Greater(t, len(perStratum), 3, "abuse categories too")
	written := 0
	for _, s := range strata {
		require.Equal(t, perStratum[s.Stratum], s.Available, s.Stratum)
		require.Zero(t, s.Unavailable, s.Stratum)
		require.Equal(t, min(s.Wanted, s.Available), s.Written, s.Stratum)
		written += s.Written
	}
	require.Len(t, cases, written)
	masked, missed := 0, 0
	for _, c := range cases {
		d := got[strings.Split(c.ID, "|")[0]]
		if d.Stratum() == eval.StratumClean && d.DecidedLabel != pipeline.LabelClean {
			missed++
		}
		require.Equal(t, eval.Truth{Label: d.DecidedLabel, Category: d.DecidedCategory}, *c.Truth, "labelled by the decision")
		raw, err := chat.History(ctx, d.Key.RoomID, d.Key.WindowStart, d.Key.WindowEnd)
		require.NoError(t, err)
		require.Len(t, c.Messages, len(raw))
		for i, m := range c.Messages {
			require.Equal(t, chatprep.Redact(raw[i].Text), m.Text, "stored as the system masks text")
			if m.Text != raw[i].Text {
				masked++
			}
		}
	}
	require.Positive(t, masked, "the sample's contact details were masked")
	for _, s := range strata {
		if s.Stratum == eval.StratumClean {
			require.Equal(t, missed, s.MissedPositives, "overturned audit items are the clean stratum's missed positives")
		} else {
			require.Zero(t, s.MissedPositives, s.Stratum)
		}
	}
	require.Positive(t, missed, "the sample holds an overturned audit item")

	again, _, err := eval.BuildSet(ctx, decisions, chat, cfg)
	require.NoError(t, err)
	require.Equal(t, cases, again, "the same seed builds the same set")
	cfg.Seed = 8
	other, _, err := eval.BuildSet(ctx, decisions, chat, cfg)
	require.NoError(t, err)
	require.NotEqual(t, cases, other, "another seed draws other windows")

	m := eval.NewManifest(time.Now(), first, last, q, cfg, len(decisions), cases, strata)
	require.Equal(t, len(cases), m.Cases)
	require.Contains(t, m.Text, "evaluated on masked text")
}
