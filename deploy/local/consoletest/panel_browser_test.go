package consoletest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// panelLayout is what the room page's layout measures at one width.
type panelLayout struct {
	Overflow   bool    `json:"overflow"`   // the page scrolls sideways
	Chat       float64 `json:"chat"`       // the chat column's width
	Panel      float64 `json:"panel"`      // the review panel's height
	Viewport   float64 `json:"viewport"`   // the window's height
	StepsShown bool    `json:"stepsShown"` // the steps list is drawn
	VerdictBox bool    `json:"verdictBox"` // the verdict box is drawn
	Steps      int     `json:"steps"`
	Fields     int     `json:"fields"` // fields read out of finished steps
	Compare    bool    `json:"compare"`
}

const measurePanel = `(() => {
  const shown = (id) => getComputedStyle(document.getElementById(id)).display !== "none";
  return {overflow: document.documentElement.scrollWidth > window.innerWidth,
    chat: document.querySelector("section.chat").getBoundingClientRect().width,
    panel: document.querySelector("section.live").getBoundingClientRect().height,
    viewport: window.innerHeight, stepsShown: shown("live-tokens"), verdictBox: shown("live-verdict"),
    steps: document.querySelectorAll("#live-tokens li.step").length,
    fields: document.querySelectorAll("#live-tokens dl.step-fields dt").length,
    compare: !!document.querySelector("#live-verdict table.compare")};
})()`

// The on-demand review panel reads: nothing is drawn before a review;
// the stream becomes numbered steps whose finished answers are read out
// as fields; the new verdict is shown beside the page's revision; the
// panel fits a 1440×813 window and the layout holds (no sideways scroll,
// the chat column keeps its width) at 900, 1440 and 1920 px. The room's
// messenger id stays masked in the page until a reveal, which is audited;
// the reveal form and the shift page pass axe-core.
func TestReviewPanelReadsInBrowser(t *testing.T) {
	requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	axe := axeSource(t)
	url, db, ids := queueConsole(t, ctx, "room-panel-1")
	alice := signIn(t, browser(t), url, "alice@example.com")
	room := fmt.Sprintf("%s/verdicts/%d", url, ids[0])
	measure := func(w int64) panelLayout {
		t.Helper()
		require.NoError(t, chromedp.Do(alice, chromedp.EmulateViewport(w, 813)))
		l, err := chromedp.Run(alice, chromedp.Evaluate[panelLayout](measurePanel))
		require.NoError(t, err)
		return l
	}

	require.NoError(t, chromedp.Do(alice, chromedp.EmulateViewport(1440, 813), chromedp.Navigate(room), chromedp.WaitVisible(chromedp.ID("chat"))))
	html, err := chromedp.Run(alice, chromedp.OuterHTML(chromedp.CSS("html")))
	require.NoError(t, err)
	require.NotContains(t, html, "safe_deal77", "the messenger id is masked")
	require.Contains(t, html, `class="masked"`)
	before := map[int64]panelLayout{}
	for _, w := range []int64{900, 1440, 1920} {
		l := measure(w)
		require.False(t, l.Overflow, "no sideways scroll at %d px", w)
		require.False(t, l.StepsShown || l.VerdictBox, "nothing drawn before a review at %d px: %+v", w, l)
		before[w] = l
	}

	require.NoError(t, chromedp.Do(alice, chromedp.EmulateViewport(1440, 813), chromedp.Click(chromedp.ID("rereview"))))
	final, err := chromedp.Run(alice, chromedp.Poll[string](`document.getElementById("live-verdict").dataset.final || ""`, chromedp.WithPollingTimeout(90*time.Second)))
	require.NoError(t, err)
	require.Equal(t, "verdict", final)
	for _, w := range []int64{900, 1440, 1920} {
		l := measure(w)
		require.False(t, l.Overflow, "no sideways scroll at %d px after the review", w)
		require.InDelta(t, before[w].Chat, l.Chat, 2, "the chat column keeps its width at %d px", w)
		require.True(t, l.StepsShown && l.Steps > 0 && l.Fields > 0, "the stages read as steps with fields at %d px: %+v", w, l)
		require.True(t, l.Compare, "the new verdict beside the page's revision")
		if w == 1440 {
			require.LessOrEqual(t, l.Panel, l.Viewport, "the panel fits a 1440×813 window")
		}
	}
	text, err := chromedp.Run(alice, chromedp.Text(chromedp.CSS("#live-verdict table.compare")))
	require.NoError(t, err)
	require.True(t, strings.Contains(text, "this page") && strings.Contains(text, "re-review"), "%q", text)
	requireAccessible(t, alice, axe, "room (review finished)")

	// A masked value is revealed by following it and giving a reason: the
	// audit row is there once the value shows.
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(room), chromedp.WaitVisible(chromedp.ID("chat"))))
	follow(t, alice, "reveal", chromedp.Click(chromedp.CSS(`#msg-m3 a.masked`)))
	requireAccessible(t, alice, axe, "reveal form")
	require.NoError(t, chromedp.Do(alice, chromedp.SetValue(chromedp.CSS(`select[name="reason"]`), "compare with a user report")))
	follow(t, alice, "revealed-value", chromedp.Click(chromedp.ID("reveal-button")))
	value, err := chromedp.Run(alice, chromedp.Text(chromedp.ID("revealed-value")))
	require.NoError(t, err)
	require.Equal(t, "safe_deal77", value)
	var reveals int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM moderation_actions WHERE action = 'reveal' AND room_id = 'room-panel-1'
		AND detail = 'message m3 value 0: compare with a user report'`).Scan(&reveals))
	require.Equal(t, 1, reveals)
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(url+"/shift"), chromedp.WaitVisible(chromedp.ID("shift"))))
	requireAccessible(t, alice, axe, "shift")
}
