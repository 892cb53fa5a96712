package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // --time-zone must load in an image without zoneinfo

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/moderation"
	"github.com/chatguard/chatguard/pipeline"
)

// Running a shift: each queue item is due a while after it entered the
// queue, by category (ShiftConfig.Deadlines), and is marked overdue after
// that; the shift page counts each moderator's and the team's decisions
// with their pick-up and handle times, read from the take history the
// console records (moderation.TakeHistory); times show in the team's time
// zone.

// ShiftConfig is how the console times a shift. Its fields are the
// console binary's flags of the same names.
type ShiftConfig struct {
	// TimeZone is the IANA zone the pages show times in (Asia/Seoul for a
	// Korean team).
	TimeZone string
	// Deadlines is how long an item may wait in the queue, by category:
	// comma-separated category=duration pairs, "*" for every category not
	// named.
	Deadlines string
	// ShiftHours is the shift page's default window, ending now.
	ShiftHours int
	// Teams groups moderators for the shift page's team rows:
	// semicolon-separated name=id,id,… with the console's pseudonymous
	// moderator ids (each shown beside the e-mail in the page header).
	// Empty: the whole console is one team.
	Teams string
}

// DefaultShiftConfig returns the defaults: UTC, the categories that take
// money or credentials first.
func DefaultShiftConfig() ShiftConfig {
	return ShiftConfig{TimeZone: "UTC", ShiftHours: 12,
		Deadlines: "phishing_link=1h,personal_info=1h,external_payment=2h,triangle_fraud=2h,fake_proof=2h,*=4h"}
}

// Validate reports every problem with the settings, naming the flags.
func (c ShiftConfig) Validate() error {
	var errs []error
	if _, err := time.LoadLocation(c.TimeZone); err != nil || c.TimeZone == "" {
		errs = append(errs, fmt.Errorf("--time-zone %q is not an IANA time zone", c.TimeZone))
	}
	if _, err := c.deadlines(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.teams(); err != nil {
		errs = append(errs, err)
	}
	if c.ShiftHours < 1 || c.ShiftHours > 24*31 {
		errs = append(errs, errors.New("--shift-hours must be in 1..744"))
	}
	return errors.Join(errs...)
}

// deadlines parses Deadlines; "*" is the default for unnamed categories.
func (c ShiftConfig) deadlines() (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, pair := range strings.Split(c.Deadlines, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		cat, d, ok := strings.Cut(pair, "=")
		dur, err := time.ParseDuration(strings.TrimSpace(d))
		cat = strings.TrimSpace(cat)
		if !ok || err != nil || dur <= 0 || (cat != "*" && !pipeline.Category(cat).Valid()) {
			return nil, fmt.Errorf("--deadlines: %q is not category=duration (a known category or *, a positive duration)", pair)
		}
		out[cat] = dur
	}
	if _, ok := out["*"]; !ok {
		return nil, errors.New("--deadlines must give a default (*=duration)")
	}
	return out, nil
}

// teams parses Teams into each moderator's team.
func (c ShiftConfig) teams() (map[string]string, error) {
	out := map[string]string{}
	for _, t := range strings.Split(c.Teams, ";") {
		if strings.TrimSpace(t) == "" {
			continue
		}
		name, ids, ok := strings.Cut(t, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" || len(name) > 64 {
			return nil, fmt.Errorf("--teams: %q is not name=moderator id,…", t)
		}
		for _, id := range strings.Split(ids, ",") {
			id = strings.TrimSpace(id)
			if id == "" || len(id) > 128 {
				return nil, fmt.Errorf("--teams: team %q names an empty or over-long moderator id", name)
			}
			if other, dup := out[id]; dup {
				return nil, fmt.Errorf("--teams: %s is in both %q and %q", id, other, name)
			}
			out[id] = name
		}
	}
	return out, nil
}

// shift is the server's parsed shift settings.
type shift struct {
	loc       *time.Location
	deadlines map[string]time.Duration
	hours     int
	teams     map[string]string // moderator id → team
}

func newShift(c ShiftConfig) shift {
	loc, err := time.LoadLocation(c.TimeZone)
	if err != nil {
		loc = time.UTC // Validate refused it already
	}
	d, _ := c.deadlines()
	if d == nil {
		d = map[string]time.Duration{"*": 4 * time.Hour}
	}
	teams, _ := c.teams()
	return shift{loc: loc, deadlines: d, hours: c.ShiftHours, teams: teams}
}

// due is when an item of category that entered the queue at queued is
// due (zero when queued is).
func (sh shift) due(category pipeline.Category, queued time.Time) time.Time {
	if queued.IsZero() {
		return time.Time{}
	}
	d, ok := sh.deadlines[string(category)]
	if !ok {
		d = sh.deadlines["*"]
	}
	return queued.Add(d)
}

// fmtTime shows t in the team's zone, the zone named.
func (sh shift) fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.In(sh.loc).Format("2006-01-02 15:04 MST")
}

// dueView is an item's deadline as a page shows it.
type dueView struct {
	At      time.Time
	Overdue bool
	// Left is the time left, or overdue by, rounded to the minute.
	Left string
}

func (sh shift) dueOf(now time.Time, category pipeline.Category, queued time.Time, decided bool) dueView {
	at := sh.due(category, queued)
	if at.IsZero() || decided {
		return dueView{At: at}
	}
	left := at.Sub(now)
	v := dueView{At: at, Overdue: left < 0}
	if left < 0 {
		left = -left
	}
	// Written as the queue's ages are, so the two read alike in one cell.
	v.Left = queueAge(now, now.Add(-left))
	return v
}

// recordingStore records the take history around the store's takes: a
// take that made the moderator the holder (its TakenAt is now) and the end
// of their own take, by a release or by their decision (record.go
// releases a decided item). A history that cannot be written is logged,
// not fatal: the take has happened, and the shift's numbers only lose one
// item's times.
type recordingStore struct {
	moderation.Store
	history moderation.TakeHistory
	clock   clock.Clock
	log     *slog.Logger
}

// TakeItem takes the item and records a new take.
func (s recordingStore) TakeItem(ctx context.Context, verdictID uint64, moderator string, now, staleBefore time.Time, force bool) (moderation.Take, error) {
	t, err := s.Store.TakeItem(ctx, verdictID, moderator, now, staleBefore, force)
	if err == nil && t.TakenAt.Equal(now.UTC().Truncate(time.Microsecond)) {
		s.note(ctx, moderation.TakeRecord{At: now, VerdictID: verdictID, Moderator: moderator, Event: moderation.TakeStarted})
	}
	return t, err
}

// ReleaseItem releases the take and records the release.
func (s recordingStore) ReleaseItem(ctx context.Context, verdictID uint64, moderator string) (bool, error) {
	ok, err := s.Store.ReleaseItem(ctx, verdictID, moderator)
	if err == nil && ok {
		s.note(ctx, moderation.TakeRecord{At: s.clock.Now(), VerdictID: verdictID, Moderator: moderator, Event: moderation.TakeReleased})
	}
	return ok, err
}

func (s recordingStore) note(ctx context.Context, r moderation.TakeRecord) {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.history.RecordTake(hctx, r); err != nil {
		s.log.Warn("console: take history not recorded", "verdict_id", r.VerdictID, "event", r.Event, "err", err)
	}
}

// withShift sets the server's time zone and deadlines, and records the
// take history through history (nil: none kept).
func (s *server) withShift(c ShiftConfig, history moderation.TakeHistory) {
	s.shift = newShift(c)
	s.tmpl.Funcs(template.FuncMap{
		"fmtTime": s.shift.fmtTime,
		"due": func(now time.Time, category pipeline.Category, queued time.Time, decided bool) dueView {
			return s.shift.dueOf(now, category, queued, decided)
		},
	})
	if history != nil {
		s.history = history
		s.store = recordingStore{Store: s.store, history: history, clock: s.clock, log: s.log}
	}
}

// roomShift adds the room page's deadline and, for an audit item nobody
// has decided, Blind: the verdict's label, category, confidence,
// rationale and stages stay hidden until a decision.
func (s *server) roomShift(data map[string]any, v pipeline.Verdict, decided bool) {
	audit, _ := data["Audit"].(bool)
	data["Blind"] = audit && !decided
	if !decided {
		data["Due"] = s.shift.dueOf(s.clock.Now(), v.Category, v.FinishedAt, false)
	}
}

// shiftRow is one line of the shift page: a moderator's (Name empty), a
// team's, or the whole console's (All).
type shiftRow struct {
	moderation.ShiftNumbers
	Name string
	All  bool
}

// shiftRows are the moderators' rows, most decisions first, then each
// team's (by name) and the console's total.
func (sh shift) shiftRows(rep moderation.ShiftReport) []shiftRow {
	rows := make([]shiftRow, 0, len(rep.Moderators)+1)
	teams := map[string]*moderation.ShiftNumbers{}
	for _, m := range rep.Moderators {
		rows = append(rows, shiftRow{ShiftNumbers: m})
		if name, ok := sh.teams[m.Moderator]; ok {
			if teams[name] == nil {
				teams[name] = &moderation.ShiftNumbers{}
			}
			teams[name].Merge(m)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Decisions > rows[j].Decisions })
	names := make([]string, 0, len(teams))
	for n := range teams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		rows = append(rows, shiftRow{ShiftNumbers: *teams[n], Name: n})
	}
	return append(rows, shiftRow{ShiftNumbers: rep.Team, All: true})
}

// shiftPage shows the shift's numbers: per moderator and for the team,
// the decisions made in the window, overturns, mean pick-up and handle
// time.
func (s *server) shiftPage(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now()
	hours := s.shift.hours
	if h := r.URL.Query().Get("hours"); h != "" {
		if _, err := fmt.Sscan(h, &hours); err != nil || hours < 1 || hours > 24*31 {
			s.fail(w, r, http.StatusBadRequest, "hours must be a number in 1..744", nil)
			return
		}
	}
	from := now.Add(-time.Duration(hours) * time.Hour)
	data := s.page(r, map[string]any{"From": from, "To": now, "Hours": hours})
	if s.history == nil {
		data["Error"] = "no take history is kept by this console"
		s.render(w, "shift.html", http.StatusOK, data)
		return
	}
	items, err := s.history.HandledItems(r.Context(), from, now.Add(time.Microsecond))
	if err != nil {
		s.fail(w, r, http.StatusServiceUnavailable, "could not read the take history", err)
		return
	}
	data["Rows"] = s.shift.shiftRows(moderation.Summarize(items))
	s.render(w, "shift.html", http.StatusOK, data)
}
