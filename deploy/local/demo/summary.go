package demo

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"

	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline"
)

// VerdictRow is the part of a verdicts row the summary reads.
type VerdictRow struct {
	RoomID    string
	Status    string
	Label     string
	Category  string
	EarlyExit bool
	Fallback  bool
	Attempts  int
	LatencyMs float64
}

// StageRow is one verdict_stages row with its verdict's room.
type StageRow struct {
	RoomID    string
	Stage     string
	Pool      string
	Attempts  int
	TTFTMs    float64
	LatencyMs float64
}

// loadRun reads a run's verdicts and stage rows from MySQL.
func loadRun(ctx context.Context, db *sql.DB, runID string) ([]VerdictRow, []StageRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT room_id, status, label, category, early_exit, fallback_used, attempts, latency_ms
		FROM verdicts WHERE run_id = ? ORDER BY room_id`, runID)
	if err != nil {
		return nil, nil, fmt.Errorf("mysql: verdicts: %w", err)
	}
	var vs []VerdictRow
	for rows.Next() {
		var v VerdictRow
		if err := rows.Scan(&v.RoomID, &v.Status, &v.Label, &v.Category, &v.EarlyExit, &v.Fallback, &v.Attempts, &v.LatencyMs); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("mysql: verdicts: %w", err)
		}
		vs = append(vs, v)
	}
	if err := errorsOf(rows); err != nil {
		return nil, nil, fmt.Errorf("mysql: verdicts: %w", err)
	}
	rows, err = db.QueryContext(ctx, `SELECT v.room_id, s.stage, s.pool, s.attempts, s.ttft_ms, s.latency_ms
		FROM verdict_stages s JOIN verdicts v ON v.id = s.verdict_id WHERE v.run_id = ? ORDER BY v.room_id, s.stage`, runID)
	if err != nil {
		return nil, nil, fmt.Errorf("mysql: stages: %w", err)
	}
	var ss []StageRow
	for rows.Next() {
		var s StageRow
		if err := rows.Scan(&s.RoomID, &s.Stage, &s.Pool, &s.Attempts, &s.TTFTMs, &s.LatencyMs); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("mysql: stages: %w", err)
		}
		ss = append(ss, s)
	}
	if err := errorsOf(rows); err != nil {
		return nil, nil, fmt.Errorf("mysql: stages: %w", err)
	}
	return vs, ss, nil
}

func errorsOf(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// Count is one group of a breakdown.
type Count struct {
	Label, Category string
	N               int
}

// StageStats are the latencies of one stage over the run's stage rows, in
// milliseconds: Latency is the whole stage (every attempt), TTFT the first
// token of the answering attempt (rows without a token are left out).
type StageStats struct {
	Stage                    string
	Rows, Attempts, Fallback int
	LatencyP50, LatencyP95   float64
	TTFTP50, TTFTP95         float64
	TTFTSamples              int
}

// Agreement compares done verdicts with the sample's ground truth. On the
// local stack the model is a rule-based simulator, so this measures its
// rules against the generator's labels, not a model.
type Agreement struct {
	// Compared counts done verdicts whose room has a ground-truth row.
	Compared      int
	LabelMatch    int
	CategoryMatch int
	// Flagged means a label other than clean.
	TruePositive, FalsePositive, FalseNegative, TrueNegative int
	// HardNegatives are clean rooms built to look abusive; HardNegativesClean
	// of them were judged clean.
	HardNegatives, HardNegativesClean int
	// Confusion counts [truth label][verdict label].
	Confusion map[string]map[string]int
}

// Summary is the run's outcome, computed from MySQL, the lake and the
// ground truth.
type Summary struct {
	Verdicts   int
	ByStatus   map[string]int
	ByLabel    []Count
	EarlyExits int
	// NoModelCall counts verdicts without any stage row.
	NoModelCall int
	// FallbackVerdicts have at least one stage answered by the fallback pool.
	FallbackVerdicts int
	Stages           []StageStats
	// StageCalls is the sum of attempts over the stage rows: one model call
	// each, and one inference-log row each.
	StageCalls int
	// LogsByOutcome and LogsByPool break the lake's inference-log rows down.
	LogsByOutcome map[string]int
	LogsByPool    map[string]int
	Agreement     Agreement
}

// Summarize computes the summary of a run.
func Summarize(vs []VerdictRow, ss []StageRow, view LakeView, truth map[string]sampledata.Truth) Summary {
	s := Summary{Verdicts: len(vs), ByStatus: map[string]int{}, LogsByOutcome: map[string]int{}, LogsByPool: map[string]int{}}
	groups := map[[2]string]int{}
	called := map[string]bool{}
	for _, r := range ss {
		called[r.RoomID] = true
	}
	a := Agreement{Confusion: map[string]map[string]int{}}
	for _, v := range vs {
		s.ByStatus[v.Status]++
		if v.EarlyExit {
			s.EarlyExits++
		}
		if v.Fallback {
			s.FallbackVerdicts++
		}
		if !called[v.RoomID] {
			s.NoModelCall++
		}
		if v.Status != string(pipeline.StatusDone) {
			continue
		}
		groups[[2]string{v.Label, v.Category}]++
		t, ok := truth[v.RoomID]
		if !ok {
			continue
		}
		a.Compared++
		if string(t.Label) == v.Label {
			a.LabelMatch++
		}
		if string(t.Category) == v.Category {
			a.CategoryMatch++
		}
		if a.Confusion[string(t.Label)] == nil {
			a.Confusion[string(t.Label)] = map[string]int{}
		}
		a.Confusion[string(t.Label)][v.Label]++
		tf, vf := t.Label != pipeline.LabelClean, v.Label != string(pipeline.LabelClean)
		switch {
		case tf && vf:
			a.TruePositive++
		case !tf && vf:
			a.FalsePositive++
		case tf && !vf:
			a.FalseNegative++
		default:
			a.TrueNegative++
		}
		if t.HardNegative {
			a.HardNegatives++
			if !vf {
				a.HardNegativesClean++
			}
		}
	}
	s.Agreement = a
	for k, n := range groups {
		s.ByLabel = append(s.ByLabel, Count{Label: k[0], Category: k[1], N: n})
	}
	slices.SortFunc(s.ByLabel, func(x, y Count) int {
		return cmp.Or(cmp.Compare(labelRank(x.Label), labelRank(y.Label)), cmp.Compare(y.N, x.N), cmp.Compare(x.Category, y.Category))
	})

	byStage := map[string]*struct {
		st       StageStats
		lat, ttf []float64
	}{}
	for _, r := range ss {
		b := byStage[r.Stage]
		if b == nil {
			b = &struct {
				st       StageStats
				lat, ttf []float64
			}{st: StageStats{Stage: r.Stage}}
			byStage[r.Stage] = b
		}
		b.st.Rows++
		b.st.Attempts += r.Attempts
		s.StageCalls += r.Attempts
		if r.Pool == string(pipeline.PoolFallback) {
			b.st.Fallback++
		}
		b.lat = append(b.lat, r.LatencyMs)
		if r.TTFTMs > 0 {
			b.ttf = append(b.ttf, r.TTFTMs)
		}
	}
	for _, name := range pipeline.Stages {
		b := byStage[string(name)]
		if b == nil {
			continue
		}
		b.st.LatencyP50, b.st.LatencyP95 = Percentile(b.lat, 50), Percentile(b.lat, 95)
		b.st.TTFTP50, b.st.TTFTP95 = Percentile(b.ttf, 50), Percentile(b.ttf, 95)
		b.st.TTFTSamples = len(b.ttf)
		s.Stages = append(s.Stages, b.st)
	}
	for _, r := range view.Logs {
		s.LogsByOutcome[r.Outcome]++
		s.LogsByPool[r.Pool]++
	}
	return s
}

func labelRank(l string) int {
	switch pipeline.Label(l) {
	case pipeline.LabelAbusive:
		return 0
	case pipeline.LabelSuspicious:
		return 1
	case pipeline.LabelClean:
		return 2
	}
	return 3
}

// Percentile returns the nearest-rank p-th percentile of xs (0 for none);
// xs is not modified.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}
