package consoletest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// Decisions that mean what they say, and triage from the list, as a
// moderator does them by keyboard: on a room, "o" on the untouched form
// (an overturn to the verdict's own label and category) and "c" after the
// category was changed are refused with the reason shown, nothing
// recorded; "z" undoes a decision (a reversing row: both stay). On the
// queue, "j c" (two keys) confirms the first item from the list and
// focuses the next, and "o 3" overturns that one to clean. axe-core passes
// on the refusal, the undo and the list.
func TestDecisionsMeanWhatTheySayInBrowser(t *testing.T) {
	requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	axe := axeSource(t)
	url, db, ids := queueConsole(t, ctx, "room-dec-1", "room-dec-2", "room-dec-3")
	alice := signIn(t, browser(t), url, "alice@example.com")
	text := func(sel string) string {
		s, err := chromedp.Run(alice, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return s
	}
	poll := func(expr string) {
		ok, err := chromedp.Run(alice, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second)))
		require.NoError(t, err, expr)
		require.True(t, ok, expr)
	}
	kinds := func(id uint64) []string {
		rows, err := db.QueryContext(ctx, "SELECT decision FROM moderator_decisions WHERE verdict_id = ? ORDER BY id", id)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var k string
			require.NoError(t, rows.Scan(&k))
			out = append(out, k)
		}
		return out
	}

	// The room: "o" on the untouched form is refused, so is "c" after the
	// category was changed; the page says why.
	room := ids[0]
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(fmt.Sprintf("%s/verdicts/%d", url, room)), chromedp.WaitVisible(chromedp.ID("decide")),
		chromedp.KeyEvent("o"), chromedp.WaitVisible(chromedp.ID("refused"))))
	require.Contains(t, text("#refused"), "an overturn must change the verdict's label or category")
	requireAccessible(t, alice, axe, "room (a no-change overturn refused)")
	require.NoError(t, chromedp.Do(alice, chromedp.SetValue(chromedp.CSS(`#decide select[name="category"]`), "phishing_link"), chromedp.KeyEvent("c")))
	poll(`((document.getElementById("refused") || {}).textContent || "").includes("a confirm keeps")`)
	require.Empty(t, kinds(room), "nothing recorded for a refused form")

	// A real overturn, then "z": the undo is saved as a row of its own and
	// the overturn shows as undone (the page drawn in place, or again when
	// the key beat htmx to the swapped-in form: the same outcome).
	require.NoError(t, chromedp.Do(alice, chromedp.SetValue(chromedp.CSS(`#decide select[name="label"]`), "clean"), chromedp.KeyEvent("o"),
		chromedp.WaitVisible(chromedp.ID("undo")), chromedp.KeyEvent("z"), chromedp.WaitVisible(chromedp.CSS("#decisions li.undone"))))
	require.Contains(t, text("#decisions li.undone"), "overturn → clean")
	require.Equal(t, []string{"overturn", "undo"}, kinds(room))
	requireAccessible(t, alice, axe, "room (a decision undone)")

	// The list: the undone room is open again (listed last: the queue
	// lists the last saved first); "j c" confirms the first item from the
	// list and focuses the next.
	first, second := ids[2], ids[1]
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(url+"/queue"), chromedp.WaitVisible(chromedp.ID("queue"))))
	require.Contains(t, text(fmt.Sprintf(`tr[data-id="%d"] .why`, first)), "Prepayment by bank transfer")
	requireAccessible(t, alice, axe, "queue (snippets, inline decisions, multi-select)")
	require.NoError(t, chromedp.Do(alice, chromedp.KeyEvent("j"), chromedp.KeyEvent("c"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-id="%d"].decided`, first)))))
	focused, err := chromedp.Run(alice, chromedp.Evaluate[string](`document.activeElement.closest("tr").dataset.id`))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprint(second), focused, "the next item is focused")
	require.Equal(t, []string{"confirm"}, kinds(first))

	// "o 3": the focused item is overturned to clean from the list.
	require.NoError(t, chromedp.Do(alice, chromedp.KeyEvent("o"), chromedp.KeyEvent("3"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-id="%d"].decided`, second)))))
	require.Equal(t, []string{"overturn"}, kinds(second))
	require.Contains(t, text(fmt.Sprintf(`tr[data-id="%d"] .row-status`, second)), "overturned → clean")
}
