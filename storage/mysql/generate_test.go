package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/chatguard/chatguard/pipeline"
)

// genSpec describes a generated verdict history: Verdicts rows created
// evenly over the Days before End (ids ascending with created_at, as
// AUTO_INCREMENT gives them), with their stage rows and, for a share of the
// abusive and suspicious ones, a moderator decision. The mix: 95% done
// (85% clean, 10% suspicious, 5% abusive), 2% expired, 1.5% stopped, 1.5%
// failed; 70% of clean verdicts end at triage; vision runs for 40% of the
// rest; 10% of stages are answered by the fallback pool.
type genSpec struct {
	Verdicts     int
	Days         int
	End          time.Time
	Seed         uint64
	DecidedShare float64
	// Workers is how many connections insert at once.
	Workers int
	// Accounts, when above 0, also writes verdict_subjects and
	// verdict_campaigns rows as the pipeline would (see genSubjects): the
	// subjects are drawn from this many accounts. 0 writes neither, for
	// tests that add their own.
	Accounts int
}

// genStats counts what generate wrote.
type genStats struct {
	Verdicts, Stages, Decisions int
	// Subjects and Campaigns count the verdict_subjects and
	// verdict_campaigns rows (0 unless spec.Accounts is set).
	Subjects, Campaigns int
	// RunIDs holds one run id per generated hour, oldest first.
	RunIDs []string
}

const (
	genVerdictBatch = 500
	genStageBatch   = 1000
)

// generate bulk-inserts spec's history into db's (migrated, empty) schema
// with multi-row INSERTs on Workers connections, then ANALYZEs the tables
// so that the optimizer sees the real distribution.
func generate(ctx context.Context, db *sql.DB, spec genSpec) (genStats, error) {
	if spec.Workers < 1 {
		spec.Workers = 1
	}
	start := spec.End.Add(-time.Duration(spec.Days) * 24 * time.Hour)
	step := time.Duration(spec.Days) * 24 * time.Hour / time.Duration(spec.Verdicts)
	var st genStats
	for h := start.Truncate(time.Hour); h.Before(spec.End); h = h.Add(time.Hour) {
		st.RunIDs = append(st.RunIDs, runIDFor(h))
	}
	chunks := (spec.Verdicts + genVerdictBatch - 1) / genVerdictBatch
	results := make([]chunkCounts, chunks)
	g, gctx := errgroup.WithContext(ctx)
	next := make(chan int)
	g.Go(func() error {
		defer close(next)
		for c := range chunks {
			select {
			case next <- c:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range spec.Workers {
		g.Go(func() error {
			conn, err := db.Conn(gctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			// The generator writes consistent rows itself; skipping the
			// checks only speeds the load.
			if _, err := conn.ExecContext(gctx, "SET SESSION foreign_key_checks = 0, unique_checks = 0"); err != nil {
				return err
			}
			for c := range next {
				lo := c * genVerdictBatch
				hi := min(lo+genVerdictBatch, spec.Verdicts)
				n, err := genChunk(gctx, conn, spec, start, step, lo, hi)
				if err != nil {
					return fmt.Errorf("generate rows %d..%d: %w", lo, hi, err)
				}
				results[c] = n
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return genStats{}, err
	}
	st.Verdicts = spec.Verdicts
	for _, r := range results {
		st.Stages += r.stages
		st.Decisions += r.decisions
		st.Subjects += r.subjects
		st.Campaigns += r.campaigns
	}
	for _, t := range []string{"verdicts", "verdict_stages", "moderator_decisions", "verdict_subjects", "verdict_campaigns"} {
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+t); err != nil {
			return genStats{}, fmt.Errorf("analyze %s: %w", t, err)
		}
	}
	return st, nil
}

func runIDFor(h time.Time) string { return "run-" + h.UTC().Format("2006010215") }

var genCategories = []pipeline.Category{
	pipeline.CategoryExternalPayment, pipeline.CategoryExternalPayment, pipeline.CategoryOffPlatform,
	pipeline.CategoryOffPlatform, pipeline.CategoryPhishingLink, pipeline.CategorySpam, pipeline.CategorySpam,
	pipeline.CategoryHarassment, pipeline.CategoryPersonalInfo, pipeline.CategoryTriangleFraud,
	pipeline.CategoryFakeProof, pipeline.CategoryProhibitedItem,
}

const genRationale = "판매자가 안전결제 대신 개인 계좌로 선입금을 요구하고, 카카오톡 오픈채팅으로 대화를 옮기자고 함. " +
	"Seller asks for a transfer to a personal account outside safe payment."

// chunkCounts counts the rows one genChunk wrote besides its verdicts.
type chunkCounts struct{ stages, decisions, subjects, campaigns int }

// genChunk writes verdicts lo..hi-1 (ids lo+1..hi) with their stage and
// decision rows (and, with spec.Accounts, their subject and campaign rows),
// in one transaction.
func genChunk(ctx context.Context, conn *sql.Conn, spec genSpec, start time.Time, step time.Duration, lo, hi int) (chunkCounts, error) {
	rng := rand.New(rand.NewPCG(spec.Seed, uint64(lo)))
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return chunkCounts{}, err
	}
	var (
		stages, decisions int
		sides             genSides
	)
	defer func() { _ = tx.Rollback() }()
	var (
		vb, sb, db strings.Builder
		vargs      = make([]any, 0, (hi-lo)*19)
		sargs      []any
		dargs      []any
		nStage     int
	)
	vb.WriteString(`INSERT INTO verdicts (id, room_id, window_start, window_end, pipeline_version, run_id, status,
		label, category, severity, confidence, action, rationale, early_exit, error, attempts, pools_used,
		fallback_used, tokens_in, tokens_out, latency_ms, published_at, started_at, finished_at, created_at,
		updated_at) VALUES `)
	flushStages := func() error {
		if nStage == 0 {
			return nil
		}
		q := `INSERT INTO verdict_stages (verdict_id, stage, pool, model, attempts, ttft_ms, latency_ms,
			tokens_in, tokens_out, output, error) VALUES ` + sb.String()
		if _, err := tx.ExecContext(ctx, q, sargs...); err != nil {
			return err
		}
		sb.Reset()
		sargs, nStage = sargs[:0], 0
		return nil
	}
	for i := lo; i < hi; i++ {
		id := uint64(i + 1)
		created := start.Add(time.Duration(i) * step)
		ws := created.Truncate(time.Hour).Add(-time.Hour)
		finished := created.Add(time.Duration(2+rng.IntN(40)) * time.Second)
		status, label, cat, action := pipeline.StatusDone, pipeline.LabelClean, pipeline.CategoryClean, pipeline.ActionNone
		severity, conf := 1, 0.5+rng.Float64()/2
		var rationale, errText any
		switch p := rng.Float64(); {
		case p < 0.02:
			status = pipeline.StatusExpired
		case p < 0.035:
			status, errText = pipeline.StatusStopped, "stopped by a moderator"
		case p < 0.05:
			status, errText = pipeline.StatusFailed, "model pools exhausted"
		}
		if status != pipeline.StatusDone {
			label, cat, action, severity, conf = "", "", "", 0, 0
		} else {
			switch p := rng.Float64(); {
			case p < 0.05:
				label, severity, action = pipeline.LabelAbusive, 3+rng.IntN(3), pipeline.ActionRestrict
				cat, rationale = genCategories[rng.IntN(len(genCategories))], genRationale
			case p < 0.15:
				label, severity, action = pipeline.LabelSuspicious, 1+rng.IntN(3), pipeline.ActionWarn
				cat, rationale = genCategories[rng.IntN(len(genCategories))], genRationale
			default:
				rationale = "일반 거래 대화."
			}
		}
		earlyExit := label == pipeline.LabelClean && rng.Float64() < 0.7
		var names []pipeline.StageName
		switch {
		case status == pipeline.StatusExpired || status == pipeline.StatusStopped:
		case status == pipeline.StatusFailed:
			names = []pipeline.StageName{pipeline.StageTriage, pipeline.StageExtract}
		case earlyExit:
			names = []pipeline.StageName{pipeline.StageTriage}
		default:
			names = []pipeline.StageName{pipeline.StageTriage, pipeline.StageExtract}
			if rng.Float64() < 0.4 {
				names = append(names, pipeline.StageVision)
			}
			names = append(names, pipeline.StageJudge)
		}
		var tin, tout int
		var lat float64
		fallback := false
		for k, name := range names {
			pool := pipeline.PoolPrimary
			if rng.Float64() < 0.1 {
				pool, fallback = pipeline.PoolFallback, true
			}
			in, out := 1500+rng.IntN(1500), 80+rng.IntN(200)
			ttft, l := 30+rng.Float64()*200, 300+rng.Float64()*4000
			tin, tout, lat = tin+in, tout+out, lat+l
			var serr any
			if status == pipeline.StatusFailed && k == len(names)-1 {
				serr = "attempts exhausted"
			}
			if nStage > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			sargs = append(sargs, id, string(name), string(pool), "qwen2.5-32b-instruct", 1+rng.IntN(2), ttft, l, in, out,
				fmt.Sprintf(`{"stage":%q,"risk":"low","categories":[%q],"evidence":[{"message_id":"m-%d","span_sha256":"%016x"}]}`,
					name, cat, rng.IntN(40), rng.Uint64()), serr)
			nStage++
			stages++
			if nStage >= genStageBatch {
				if err := flushStages(); err != nil {
					return chunkCounts{}, err
				}
			}
		}
		if i > lo {
			vb.WriteString(", ")
		}
		vb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		pools := "primary"
		if fallback {
			pools = "primary,fallback"
		}
		vargs = append(vargs, id, fmt.Sprintf("room-%07d", i), ws, ws.Add(time.Hour), "v1", runIDFor(ws.Add(time.Hour)),
			string(status), string(label), string(cat), severity, conf, string(action), rationale, earlyExit, errText,
			1, pools, fallback, tin, tout, lat, ws.Add(time.Hour+time.Minute), created, finished, created, finished)
		if (label == pipeline.LabelAbusive || label == pipeline.LabelSuspicious) && rng.Float64() < spec.DecidedShare {
			if decisions > 0 {
				db.WriteString(", ")
			}
			db.WriteString("(?, ?, ?, ?, ?, ?, ?)")
			decision := "confirm"
			if rng.Float64() < 0.2 {
				decision = "overturn"
			}
			dargs = append(dargs, id, fmt.Sprintf("mod-%d", rng.IntN(20)), decision, string(label), string(cat), "확인함", finished.Add(time.Hour))
			decisions++
		}
		if spec.Accounts > 0 && status == pipeline.StatusDone {
			sides.add(rng, spec.Accounts, id, fmt.Sprintf("room-%07d", i), label, cat, finished)
		}
	}
	if _, err := tx.ExecContext(ctx, vb.String(), vargs...); err != nil {
		return chunkCounts{}, err
	}
	if err := flushStages(); err != nil {
		return chunkCounts{}, err
	}
	if decisions > 0 {
		q := "INSERT INTO moderator_decisions (verdict_id, moderator, decision, label, category, note, decided_at) VALUES " + db.String()
		if _, err := tx.ExecContext(ctx, q, dargs...); err != nil {
			return chunkCounts{}, err
		}
	}
	if err := sides.flush(ctx, tx); err != nil {
		return chunkCounts{}, err
	}
	return chunkCounts{stages, decisions, sides.subjects, sides.campaigns}, tx.Commit()
}

// The subject and campaign mix, in the proportions the pipeline gives:
// only a flagged (abusive or suspicious) verdict has subjects, one sender
// in 85 % of them and two in the rest, half of them drawn from the 1 % of
// accounts that are repeat offenders; a campaign signal rides on 40 % of
// abusive and 10 % of suspicious verdicts (about 2.9 % of all verdicts,
// the share of campaign rooms in the campaign corpus), 1 to 5 marks each
// (script bands and contact values) drawn from genMarks marks.
const genMarks = 2000

// genSides collects one chunk's verdict_subjects and verdict_campaigns rows.
type genSides struct {
	sb, cb              strings.Builder
	sargs, cargs        []any
	subjects, campaigns int
}

// add writes verdict id's subject and campaign rows, if its label has any.
func (g *genSides) add(rng *rand.Rand, accounts int, id uint64, room string, label pipeline.Label, cat pipeline.Category, decided time.Time) {
	if label != pipeline.LabelAbusive && label != pipeline.LabelSuspicious {
		return
	}
	role := pipeline.RoleSeller
	if rng.Float64() < 0.3 {
		role = pipeline.RoleBuyer
	}
	n := 1
	if rng.Float64() < 0.15 {
		n = 2
	}
	first := rng.IntN(accounts)
	if rng.Float64() < 0.5 {
		first = rng.IntN(max(accounts/100, 1))
	}
	for k := range n {
		if g.subjects > 0 {
			g.sb.WriteString(", ")
		}
		g.sb.WriteString("(?, ?, ?, ?, ?, ?, ?)")
		g.sargs = append(g.sargs, id, fmt.Sprintf("user-%09d", (first+k*7919)%accounts), string(role), room, string(label), string(cat), decided)
		g.subjects++
	}
	share := 0.1
	if label == pipeline.LabelAbusive {
		share = 0.4
	}
	if rng.Float64() >= share {
		return
	}
	marks, base := 1+rng.IntN(5), rng.IntN(genMarks)
	for k := range marks {
		kind := pipeline.CampaignScript
		if k > 0 && k == marks-1 {
			kind = pipeline.CampaignContact
		}
		if g.campaigns > 0 {
			g.cb.WriteString(", ")
		}
		g.cb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		g.cargs = append(g.cargs, id, string(kind), fmt.Sprintf("hmac:%024x", (base+k)%genMarks), fmt.Sprintf("m-%d", rng.IntN(40)),
			4+rng.IntN(60), 1+rng.IntN(3), room, string(label), string(cat), decided)
		g.campaigns++
	}
}

// flush inserts the collected rows in tx.
func (g *genSides) flush(ctx context.Context, tx *sql.Tx) error {
	if g.subjects > 0 {
		q := "INSERT INTO verdict_subjects (verdict_id, sender_id, role, room_id, label, category, decided_at) VALUES " + g.sb.String()
		if _, err := tx.ExecContext(ctx, q, g.sargs...); err != nil {
			return err
		}
	}
	if g.campaigns > 0 {
		q := "INSERT INTO verdict_campaigns (verdict_id, kind, mark, message_id, rooms, senders, room_id, label, category, decided_at) VALUES " + g.cb.String()
		if _, err := tx.ExecContext(ctx, q, g.cargs...); err != nil {
			return err
		}
	}
	return nil
}
