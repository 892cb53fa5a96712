// Package policy is the protective-action policy: a versioned JSON file of
// rules that match a verdict's evidence and name actions with a mode
// (off | dry_run | on), its strict validation at start, and its pure
// evaluation. The worker evaluates it after the judge and writes what it
// decides through the outbox; `worker actions report` replays it over
// stored verdicts. docs/actions.md explains the file.
package policy

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

// defaultPolicy is the shipped policy: every action in dry run except
// escalate, so that turning an action on is a deliberate edit.
//
//go:embed default.json
var defaultPolicy []byte

// Duration is a time.Duration written as Go writes one ("6h", "30m").
type Duration time.Duration

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"6h\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Defaults are the policy-wide settings a rule does not override.
type Defaults struct {
	// Locale is the notices' locale (ko, en).
	Locale string `json:"locale"`
	// SuppressNotices is how long a notice of one rule about one offender
	// in one room suppresses the next (a room flagged in several windows
	// gets one notice).
	SuppressNotices Duration `json:"suppress_notices"`
	// ActionTTL is how long after it is decided an action is still worth
	// applying (its expires_at).
	ActionTTL Duration `json:"action_ttl"`
	// RestrictFor is how long restrict_sender restricts.
	RestrictFor Duration `json:"restrict_for"`
	// ClearedFor is how long an overturn clears an account for a rule.
	ClearedFor Duration `json:"cleared_for"`
	// HeavyPerAccountDaily bounds the heavy actions (hold, restrict) on
	// one account in 24 hours.
	HeavyPerAccountDaily int `json:"heavy_per_account_daily"`
	// HeavyMinCampaignRooms and HeavyMinHistoryRooms are the stronger
	// evidence a heavy action needs beyond the single room (either one):
	// the room's campaign marks seen in at least this many rooms, or the
	// offender judged abusive (not overturned) in at least this many
	// earlier rooms.
	HeavyMinCampaignRooms int `json:"heavy_min_campaign_rooms"`
	HeavyMinHistoryRooms  int `json:"heavy_min_history_rooms"`
}

// Match is what a rule matches; an empty list or a zero bound matches
// anything.
type Match struct {
	Labels        []pipeline.Label        `json:"labels"`
	Categories    []pipeline.Category     `json:"categories"`
	MinSeverity   int                     `json:"min_severity"`
	MinConfidence float64                 `json:"min_confidence"`
	Sources       []pipeline.ActionSource `json:"sources"`
	OffenderRoles []pipeline.SenderRole   `json:"offender_roles"`
	// SignalsAny matches when the review found any of these rule-signal
	// kinds (SignalNames: the window's pattern signals, bank_account,
	// phone, url, …, and the campaign marks' campaign_script and
	// campaign_contact).
	SignalsAny []string `json:"signals_any"`
	// MinCampaignRooms and MinHistoryRooms require campaign spread and
	// account history (as in Defaults).
	MinCampaignRooms int `json:"min_campaign_rooms"`
	MinHistoryRooms  int `json:"min_history_rooms"`
}

// RuleAction is one action a rule takes and its mode.
type RuleAction struct {
	Action pipeline.ActionKind `json:"action"`
	Mode   pipeline.ActionMode `json:"mode"`
}

// Rule is one policy rule.
type Rule struct {
	// ID is a lower-case token, unique in the policy; Name a short
	// display name (no free text about anyone).
	ID   string `json:"id"`
	Name string `json:"name"`
	// DailyCap is the breaker of a runaway rule: at most this many
	// actions (dry run included) per UTC day; past it the rule's actions
	// are counted as capped, not taken.
	DailyCap int `json:"daily_cap"`
	// Expires, when set, ends the rule: after it the rule matches nothing.
	Expires *time.Time   `json:"expires,omitempty"`
	Match   Match        `json:"match"`
	Actions []RuleAction `json:"actions"`
	// SingleRoomHeavy lets the rule's heavy actions act on single-room
	// evidence, without the campaign or history Defaults require.
	SingleRoomHeavy bool `json:"single_room_heavy,omitempty"`
}

// Policy is a parsed, validated policy file.
type Policy struct {
	// Version is the file's declared version.
	Version  string   `json:"version"`
	Defaults Defaults `json:"defaults"`
	Rules    []Rule   `json:"rules"`
	// Hash is the SHA-256 (hex) of the file's bytes, recorded on every
	// action. Not part of the file.
	Hash string `json:"-"`
}

// Default returns the shipped policy.
func Default() *Policy {
	p, err := Parse(defaultPolicy)
	if err != nil {
		panic("policy: the embedded default is invalid: " + err.Error())
	}
	return p
}

// Load reads and validates the policy file at path; "" is the shipped
// default.
func Load(path string) (*Policy, error) {
	if path == "" {
		return Default(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", path, err)
	}
	return p, nil
}

// Parse decodes a policy strictly (an unknown field is a problem) and
// validates it, naming every problem at once.
func Parse(b []byte) (*Policy, error) {
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a policy: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a policy: trailing data after the JSON object")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	p.Hash = hex.EncodeToString(sum[:])
	return &p, nil
}

var ruleID = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// Validate reports every problem of the policy at once.
func (p *Policy) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if p.Version == "" || len(p.Version) > 64 {
		add("version must be 1 to 64 bytes")
	}
	d := p.Defaults
	if !pipeline.KnownNoticeLocale(d.Locale) {
		add("defaults.locale %q is not one of %v", d.Locale, pipeline.NoticeLocales)
	}
	for name, v := range map[string]Duration{"suppress_notices": d.SuppressNotices, "action_ttl": d.ActionTTL,
		"restrict_for": d.RestrictFor, "cleared_for": d.ClearedFor} {
		if v <= 0 {
			add("defaults.%s must be positive", name)
		}
	}
	if d.HeavyPerAccountDaily < 1 {
		add("defaults.heavy_per_account_daily must be at least 1")
	}
	if d.HeavyMinCampaignRooms < 2 && d.HeavyMinHistoryRooms < 1 {
		add("defaults.heavy_min_campaign_rooms (at least 2) or heavy_min_history_rooms (at least 1) must ask for evidence beyond the room")
	}
	if len(p.Rules) == 0 {
		add("rules is empty")
	}
	seen := map[string]bool{}
	for i, r := range p.Rules {
		where := fmt.Sprintf("rules[%d] (%s)", i, r.ID)
		if seen[r.ID] {
			add("%s: id is not unique", where)
		}
		seen[r.ID] = true
		for _, e := range r.problems() {
			add("%s: %s", where, e)
		}
	}
	return errors.Join(errs...)
}

func (r Rule) problems() []string {
	var probs []string
	if !ruleID.MatchString(r.ID) {
		probs = append(probs, "id must be 1 to 32 of a-z, 0-9, _")
	}
	if r.Name == "" || len(r.Name) > 128 {
		probs = append(probs, "name must be 1 to 128 bytes")
	}
	if r.DailyCap < 1 {
		probs = append(probs, "daily_cap must be at least 1")
	}
	if len(r.Actions) == 0 {
		probs = append(probs, "actions is empty")
	}
	kinds := map[pipeline.ActionKind]bool{}
	for _, a := range r.Actions {
		if !a.Action.Protective() {
			probs = append(probs, fmt.Sprintf("action %q is not one of %v", a.Action, pipeline.ProtectiveActionKinds))
		}
		if !a.Mode.Known() {
			probs = append(probs, fmt.Sprintf("action %s: mode %q is not off, dry_run or on", a.Action, a.Mode))
		}
		if kinds[a.Action] {
			probs = append(probs, fmt.Sprintf("action %s is named twice", a.Action))
		}
		kinds[a.Action] = true
	}
	return append(probs, r.Match.problems()...)
}

func (m Match) problems() []string {
	var probs []string
	for _, l := range m.Labels {
		if l != pipeline.LabelAbusive && l != pipeline.LabelSuspicious {
			probs = append(probs, fmt.Sprintf("match.labels: %q is not abusive or suspicious", l))
		}
	}
	for _, c := range m.Categories {
		if !c.Valid() || c == pipeline.CategoryClean {
			probs = append(probs, fmt.Sprintf("match.categories: %q is not an abuse category", c))
		}
	}
	if m.MinSeverity < 0 || m.MinSeverity > 5 {
		probs = append(probs, "match.min_severity must be 0 to 5")
	}
	if m.MinConfidence < 0 || m.MinConfidence > 1 {
		probs = append(probs, "match.min_confidence must be 0 to 1")
	}
	for _, s := range m.Sources {
		if !s.Known() || s == pipeline.ActionSourceModerator || s == pipeline.ActionSourcePolicy {
			probs = append(probs, fmt.Sprintf("match.sources: %q is not realtime, batch, sweep, on_demand or campaign", s))
		}
	}
	for _, r := range m.OffenderRoles {
		if r != pipeline.RoleBuyer && r != pipeline.RoleSeller {
			probs = append(probs, fmt.Sprintf("match.offender_roles: %q is not buyer or seller", r))
		}
	}
	for _, sig := range m.SignalsAny {
		if !slices.Contains(SignalNames(), sig) {
			probs = append(probs, fmt.Sprintf("match.signals_any: %q is not one of %v", sig, SignalNames()))
		}
	}
	if m.MinCampaignRooms < 0 || m.MinHistoryRooms < 0 {
		probs = append(probs, "match.min_campaign_rooms and min_history_rooms must not be negative")
	}
	return probs
}

// SignalNames is signals_any's vocabulary: the rule-signal kinds the
// review records with a verdict (pipeline/chatprep) and the campaign
// marks' kinds, prefixed campaign_.
func SignalNames() []string {
	var out []string
	for _, k := range chatprep.SignalKinds {
		out = append(out, string(k))
	}
	return append(out, "campaign_"+string(pipeline.CampaignScript), "campaign_"+string(pipeline.CampaignContact))
}

// Rule returns the rule with id, or nil.
func (p *Policy) Rule(id string) *Rule {
	for i := range p.Rules {
		if p.Rules[i].ID == id {
			return &p.Rules[i]
		}
	}
	return nil
}
