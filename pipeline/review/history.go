package review

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

// HistoryLookup gives a review the account history of its room's
// participants (*accounthistory.Lookup: cached, bounded by a timeout). It
// never fails: a lookup that could not answer says so in the status, and
// the review goes on without history.
type HistoryLookup interface {
	Lookup(ctx context.Context, room string, accounts []pipeline.HistoryAccount) pipeline.HistorySeen
}

// participants are the buyer and seller accounts that wrote in the
// window, those with the most messages first (a lookup asks about a
// bounded number). Context messages (from before the window) name no one:
// who spoke only then took no part in what the verdict is about. System
// lines and messages without a sender id name no one either.
func participants(msgs []pipeline.ChatMessage) []pipeline.HistoryAccount {
	count := map[pipeline.HistoryAccount]int{}
	for _, m := range msgs {
		if m.Context || m.SenderID == "" || (m.SenderRole != pipeline.RoleBuyer && m.SenderRole != pipeline.RoleSeller) {
			continue
		}
		count[pipeline.HistoryAccount{SenderID: m.SenderID, Role: m.SenderRole}]++
	}
	out := make([]pipeline.HistoryAccount, 0, len(count))
	for a := range count {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b pipeline.HistoryAccount) int {
		return cmp.Or(cmp.Compare(count[b], count[a]), cmp.Compare(a.SenderID, b.SenderID), cmp.Compare(a.Role, b.Role))
	})
	return out
}

// lookUpHistory asks for the account history before the first stage and
// keeps its prompt block for every stage (rebase). Without a lookup (the
// history is off) the prompts carry no block and the verdict records
// nothing.
func (rn *run) lookUpHistory(ctx context.Context) {
	if rn.r.cfg.History == nil {
		return
	}
	seen := rn.r.cfg.History.Lookup(ctx, rn.ev.RoomID, participants(rn.msgs))
	rn.history = &seen
	rn.historyBlock = stages.HistoryBlock(seen)
}

// recordHistory adds "account_history" (what the lookup gave the stages:
// status, days, lines of roles and counts, never an id) to the stored
// output of the first stage that ran, so the verdict row says which
// history its stages saw.
func (rn *run) recordHistory() {
	if rn.history != nil {
		rn.recordOutput(pipeline.HistoryOutputKey, rn.history)
	}
}

// recordSignals adds "rule_signals" (the kinds of the window's rule
// signals, sorted, never a value) to the first stage's stored output: the
// protective-action policy's signals_any reads them
// (pipeline.RecordedSignalKinds).
func (rn *run) recordSignals() {
	seen := map[string]bool{}
	var kinds []string
	for _, s := range rn.w.Signals {
		if k := string(s.Kind); !seen[k] {
			seen[k] = true
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return
	}
	slices.Sort(kinds)
	rn.recordOutput(pipeline.RuleSignalsOutputKey, kinds)
}

// recordOutput sets member key of the first stage's stored output (an
// object) to val.
func (rn *run) recordOutput(key string, val any) {
	if len(rn.v.Stages) == 0 {
		return
	}
	first := &rn.v.Stages[0]
	var obj map[string]json.RawMessage
	if json.Unmarshal(first.Output, &obj) != nil || obj == nil {
		if len(first.Output) > 0 {
			return // not an object: leave the answer as stored
		}
		obj = map[string]json.RawMessage{}
	}
	b, err := json.Marshal(val)
	if err != nil {
		return
	}
	obj[key] = b
	if out, err := json.Marshal(obj); err == nil {
		first.Output = out
	}
}
