//go:build verdictdump

package llmsim_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/llm"
	"github.com/chatguard/chatguard/pipeline/review"
)

// TestDumpVerdicts writes the verdict of every labelled sample room (seed
// 7, 600 rooms) to $VERDICT_DUMP, one line per room, so that two trees
// (before and after a prompt change) can be diffed (docs/performance.md,
// "Shared-prefix prompts"). A tool rather than a test, it is built only
// with -tags verdictdump, and needs VERDICT_DUMP set.
func TestDumpVerdicts(t *testing.T) {
	out := os.Getenv("VERDICT_DUMP")
	require.NotEmpty(t, out, "set VERDICT_DUMP to the file to write")
	dir := t.TempDir()
	_, err := sampledata.Generate(t.Context(), sampledata.Options{LakeDir: filepath.Join(dir, "l"), TruthDir: filepath.Join(dir, "t"), Seed: 7, Rooms: 600})
	require.NoError(t, err)
	rooms, err := sampledata.LoadMessages(filepath.Join(dir, "l"))
	require.NoError(t, err)
	truth, err := sampledata.LoadTruth(filepath.Join(dir, "t"))
	require.NoError(t, err)
	cfg := llmsim.DefaultConfig()
	cfg.TTFT, cfg.ITL, cfg.Jitter = 0, 0, 0
	sim, err := llmsim.Start(t.Context(), "127.0.0.1:0", cfg)
	require.NoError(t, err)
	defer func() { c, cl := context.WithTimeout(context.Background(), time.Second); defer cl(); _ = sim.Stop(c) }()
	router, err := llm.New(llm.Config{Primary: llm.PoolConfig{BaseURL: sim.URL, Model: llmsim.DefaultModel}}, nil)
	require.NoError(t, err)
	rv, err := review.New(review.Config{}, router, nil, nil, nil)
	require.NoError(t, err)
	var ids []string
	for id := range rooms {
		if _, ok := truth[id]; ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var b strings.Builder
	for _, id := range ids {
		msgs := rooms[id]
		ev := pipeline.ReviewEvent{RoomID: id, WindowStart: msgs[0].SentAt.Truncate(time.Second), WindowEnd: msgs[len(msgs)-1].SentAt.Add(time.Second).Truncate(time.Second), RunID: "x", PublishedAt: time.Now(), SchemaVersion: 1}
		v, err := rv.Review(t.Context(), ev, msgs, 1)
		require.NoError(t, err)
		fmt.Fprintf(&b, "%s %s %s %d %s %.2f %v %v %s\n", id, v.Label, v.Category, v.Severity, v.Action, v.Confidence, v.EvidenceIDs, v.EarlyExit, truth[id].Label)
	}
	require.NoError(t, os.WriteFile(out, []byte(b.String()), 0o644))
}
