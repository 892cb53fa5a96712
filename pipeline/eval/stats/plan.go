package stats

import "math"

// PlanInput is what a pilot run says about a comparison, and what the next
// set must be able to decide.
type PlanInput struct {
	// Psi is the pilot's discordant share: positives the two endpoints
	// scored differently, over positives.
	Psi float64
	// Deff is the pilot's design effect (clustered variance over
	// independent, per positive; 0 is taken as 1), PerCluster its
	// positives per cluster.
	Deff, PerCluster float64
	// Loss is the recall loss the set must detect; Margin the margin it
	// must rule out when there is no loss. Alpha is the decision's level.
	Loss, Margin, Alpha float64
}

// PlanRow is the set a power needs.
type PlanRow struct {
	Power float64
	// DetectPositives (DetectClusters) are the positives (clusters) that
	// detect a true loss of Loss with the power; NoLossPositives
	// (NoLossClusters) those that show "no loss beyond the margin" with
	// the power when the true loss is zero. 0: the input does not ask.
	DetectPositives, DetectClusters int
	NoLossPositives, NoLossClusters int
}

// Plan sizes a set for each power: Connor's paired sample size at the
// pilot's discordance, inflated by its design effect (the decisions are
// clustered, so n/deff is what counts), and turned into clusters at its
// positives per cluster.
func Plan(in PlanInput, powers ...float64) []PlanRow {
	deff := in.Deff
	if deff <= 0 {
		deff = 1
	}
	per := max(in.PerCluster, 1)
	out := make([]PlanRow, 0, len(powers))
	for _, pw := range powers {
		r := PlanRow{Power: pw}
		if in.Loss > 0 {
			r.DetectPositives = int(math.Ceil(float64(PairedN(in.Loss, in.Psi, in.Alpha, pw)) * deff))
			r.DetectClusters = int(math.Ceil(float64(r.DetectPositives) / per))
		}
		if in.Margin > 0 {
			// At no true loss the interval is centred on 0 with standard
			// error √(ψ/n): its upper bound z(1-α/2)·se falls below the
			// margin with the power when n = (z(1-α/2) + z(power))²·ψ/δ².
			// ψ is at least the margin, as PairedN takes it: a pilot
			// without discordance promises nothing smaller.
			psi := max(in.Psi, in.Margin)
			s := Z(1-in.Alpha/2) + Z(pw)
			r.NoLossPositives = int(math.Ceil(s * s * psi / (in.Margin * in.Margin) * deff))
			r.NoLossClusters = int(math.Ceil(float64(r.NoLossPositives) / per))
		}
		out = append(out, r)
	}
	return out
}
