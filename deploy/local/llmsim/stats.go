package llmsim

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// Outcomes of a request, as counted in Stats and in
// chatguard_llmsim_requests_total.
const (
	OutcomeOK           = "ok"     // a complete answer, finish_reason "stop"
	OutcomeLength       = "length" // cut by max_tokens, finish_reason "length"
	OutcomeFault429     = "fault_429"
	OutcomeFault500     = "fault_500"
	OutcomeFault503     = "fault_503"
	OutcomeHang         = "hang" // held until the client gave up or MaxHang passed
	OutcomeDrop         = "drop"
	OutcomeMalformed    = "malformed"
	OutcomeTruncate     = "truncate"
	OutcomeQueueFull    = "queue_full"
	OutcomeCanceled     = "canceled" // the client went away while waiting or streaming
	OutcomeUnauthorized = "unauthorized"
	OutcomeBadRequest   = "bad_request"
	OutcomeNotFound     = "not_found"
)

// Endpoints as counted in Stats.
const (
	EndpointChat   = "chat_completions"
	EndpointModels = "models"
)

// StatsRow counts requests of one endpoint, model, stage and outcome. Model
// is empty for requests naming no served model; Stage is one of the four
// stage names, "other" for requests without a stage schema, or empty for
// endpoints other than chat completions.
type StatsRow struct {
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	Stage    string `json:"stage"`
	Outcome  string `json:"outcome"`
	Count    int64  `json:"count"`
}

// Stats is a snapshot of the request counters (GET /admin/stats), so tests
// can assert things like "the primary was not called again".
type Stats struct {
	Name    string     `json:"name"`
	Running int        `json:"running"`
	Waiting int        `json:"waiting"`
	Rows    []StatsRow `json:"requests"`
	// PrefixCache counts the prefix cache's lookups (prefixcache.go).
	PrefixCache PrefixCacheStats `json:"prefix_cache"`
}

// Count sums the rows that match; an empty argument matches anything.
func (s Stats) Count(endpoint, model, stage, outcome string) int64 {
	var n int64
	for _, r := range s.Rows {
		if (endpoint == "" || r.Endpoint == endpoint) && (model == "" || r.Model == model) &&
			(stage == "" || r.Stage == stage) && (outcome == "" || r.Outcome == outcome) {
			n += r.Count
		}
	}
	return n
}

// ChatRequests is the number of chat-completion requests with the outcome
// ("" for all).
func (s Stats) ChatRequests(outcome string) int64 { return s.Count(EndpointChat, "", "", outcome) }

type statKey struct{ endpoint, model, stage, outcome string }

type statCounters struct {
	m sync.Map // statKey -> *atomic.Int64
}

func (c *statCounters) inc(k statKey) {
	v, ok := c.m.Load(k)
	if !ok {
		v, _ = c.m.LoadOrStore(k, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

func (c *statCounters) rows() []StatsRow {
	var rows []StatsRow
	c.m.Range(func(k, v any) bool {
		key := k.(statKey)
		if n := v.(*atomic.Int64).Load(); n > 0 {
			rows = append(rows, StatsRow{Endpoint: key.endpoint, Model: key.model, Stage: key.stage, Outcome: key.outcome, Count: n})
		}
		return true
	})
	slices.SortFunc(rows, func(a, b StatsRow) int {
		return cmp.Or(cmp.Compare(a.Endpoint, b.Endpoint), cmp.Compare(a.Model, b.Model),
			cmp.Compare(a.Stage, b.Stage), cmp.Compare(a.Outcome, b.Outcome))
	})
	return rows
}

func (c *statCounters) reset() {
	c.m.Range(func(k, _ any) bool {
		c.m.Delete(k)
		return true
	})
}
