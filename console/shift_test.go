package console

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/moderation/moderationtest"
)

// A scripted shift: two moderators work 200 items on a fake clock, each
// taking an item, reading it for a while and confirming it. The shift
// page's mean handle time per moderator is what the script measured,
// within a second, and the team's counts add up.
func TestScriptedShiftReportsHandleTime(t *testing.T) {
	start := moderationtest.T0.Add(time.Hour) // the verdicts' FinishedAt
	clk := clock.NewFake(start)
	c, st, _, _ := corpusConsole(t, clk)
	var ids []uint64
	for i := range 200 {
		ids = append(ids, moderationtest.Seed(t, st, moderationtest.Verdict(fmt.Sprintf("room-shift-%03d", i))))
	}
	emails := []string{"alice@example.com", "bob@example.com"}
	c.srv.shift.teams = map[string]string{moderatorID(emails[0]): "day", moderatorID(emails[1]): "day"}
	clients := map[string]*http.Client{}
	for _, e := range emails {
		clients[e] = c.client(t, e)
	}
	post := func(email, path string, form url.Values) {
		t.Helper()
		form.Set("csrf", c.srv.auth.csrfToken(Who{Email: email, ID: moderatorID(email)}, clk.Now()))
		resp, err := clients[email].PostForm(c.ts.URL+path, form)
		require.NoError(t, err)
		resp.Body.Close()
		require.Less(t, resp.StatusCode, 400, "%s %s", email, path)
	}
	rng := rand.New(rand.NewPCG(45, 200))
	handled := map[string]time.Duration{}
	count := map[string]int{}
	for i, id := range ids {
		email := emails[i%2]
		if rng.IntN(4) == 0 {
			email = emails[(i+1)%2]
		}
		clk.Advance(time.Duration(rng.IntN(30_000)) * time.Millisecond)
		item := "/verdicts/" + strconv.FormatUint(id, 10)
		post(email, item+"/take", url.Values{})
		took := clk.Now()
		clk.Advance(time.Duration(5_000+rng.IntN(85_000)) * time.Millisecond)
		post(email, item+"/decide", url.Values{"decision": {"confirm"}, "label": {"abusive"}, "category": {"external_payment"}})
		handled[email] += clk.Now().Sub(took)
		count[email]++
	}
	code, page := get(t, clients[emails[0]], c.ts.URL+"/shift?hours=24")
	require.Equal(t, http.StatusOK, code)
	requireNoCorpusValue(t, "shift", page)
	rowRe := regexp.MustCompile(`<tr(?: class="[^"]*")? data-moderator="([^"]*)" data-team="([^"]*)" data-handle-ms="(\d+)" data-pickup-ms="(\d+)">\s*<th scope="row">[^<]*</th><td>(\d+)</td>`)
	rows := rowRe.FindAllStringSubmatch(page, -1)
	require.Len(t, rows, 4, "two moderators, their team and everyone: %s", page)
	total := 0
	for _, e := range emails {
		id := moderatorID(e)
		var found bool
		for _, r := range rows {
			if r[1] != id {
				continue
			}
			found = true
			ms, _ := strconv.Atoi(r[3])
			n, _ := strconv.Atoi(r[5])
			want := handled[e] / time.Duration(count[e])
			require.Equal(t, count[e], n, "%s's decisions", e)
			require.InDelta(t, want.Seconds(), float64(ms)/1000, 1, "%s's mean handle time: measured %s", e, want)
			t.Logf("%s: %d decisions, mean handle %s measured, %d ms reported", e, n, want, ms)
			total += n
		}
		require.True(t, found, "a row for %s", e)
	}
	require.Equal(t, 200, total)
	var all time.Duration
	for _, e := range emails {
		all += handled[e]
	}
	for i, name := range []string{"day", ""} {
		r := rows[2+i]
		require.Equal(t, name, r[2], "the team's row, then everyone's")
		n, _ := strconv.Atoi(r[5])
		ms, _ := strconv.Atoi(r[3])
		require.Equal(t, 200, n)
		require.InDelta(t, (all / 200).Seconds(), float64(ms)/1000, 1, "the team's mean handle time")
	}
}

// The shift settings refuse an unknown zone, a deadline list without a
// default or with an unknown category; an item is due by its category
// (the default for the rest) and overdue after; times show in the zone.
func TestShiftDeadlinesAndZone(t *testing.T) {
	c := DefaultShiftConfig()
	require.NoError(t, c.Validate())
	for _, bad := range []ShiftConfig{
		{TimeZone: "Mars/Olympus", Deadlines: c.Deadlines, ShiftHours: 12},
		{TimeZone: "UTC", Deadlines: "phishing_link=1h", ShiftHours: 12},
		{TimeZone: "UTC", Deadlines: "phishing=1h,*=4h", ShiftHours: 12},
		{TimeZone: "UTC", Deadlines: "phishing_link=-1h,*=4h", ShiftHours: 12},
		{TimeZone: "UTC", Deadlines: c.Deadlines, ShiftHours: 0},
		{TimeZone: "UTC", Deadlines: c.Deadlines, ShiftHours: 12, Teams: "day=mod2-a;night=mod2-a"},
		{TimeZone: "UTC", Deadlines: c.Deadlines, ShiftHours: 12, Teams: "day"},
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}
	c.TimeZone = "Asia/Seoul"
	sh := newShift(c)
	queued := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	require.Equal(t, queued.Add(time.Hour), sh.due("phishing_link", queued))
	require.Equal(t, queued.Add(4*time.Hour), sh.due("harassment", queued), "the default")
	v := sh.dueOf(queued.Add(30*time.Minute), "phishing_link", queued, false)
	require.False(t, v.Overdue)
	require.Equal(t, "30 min", v.Left)
	v = sh.dueOf(queued.Add(90*time.Minute), "phishing_link", queued, false)
	require.True(t, v.Overdue)
	require.Equal(t, "30 min", v.Left)
	require.Empty(t, sh.dueOf(queued.Add(90*time.Minute), "phishing_link", queued, true).Left, "a decided item is due no more")
	require.Equal(t, "2026-11-30 19:00 KST", sh.fmtTime(queued))
}
