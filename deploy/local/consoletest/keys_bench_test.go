//go:build consolebench

// The 50-item timing is a figure, not a check: it runs with
// make bench-console-keys, outside make test.

package consoletest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The figure for docs/performance.md: 50 queue items decided from the
// keyboard (j t c u) and 50 with the mouse (take, Confirm, back to the
// queue), timed by this test's clock. An indication of the difference on
// this machine, not an assertion: the test asserts only that every item
// was decided once.
func TestDecideFiftyItemsKeyboardVersusMouse(t *testing.T) {
	requireChromium(t)
	const n = 50
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	rooms := make([]string, 2*n)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("room-speed-%03d", i)
	}
	url0, db, ids := queueConsole(t, ctx, rooms...)
	bctx := browser(t)
	alice := signIn(t, bctx, url0, "alice@example.com")

	// Keys reach a page's script only once it has run: wait for the load
	// after each navigation (a key sent earlier is lost, not queued).
	loaded := chromedp.Poll[bool](`document.readyState === "complete"`, chromedp.WithPollingTimeout(30*time.Second))
	ready := chromedp.Action[chromedp.Void](func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := loaded(ctx, t)
		return chromedp.Void{}, err
	})
	// Each item within a minute: a lost key fails the test, never hangs it.
	item := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ictx, cancel := context.WithTimeout(alice, time.Minute)
		defer cancel()
		require.NoError(t, chromedp.Do(ictx, actions...))
	}
	item(ready)
	start := time.Now()
	for range n {
		item(chromedp.KeyEvent("j"), chromedp.KeyEvent("t"), chromedp.WaitVisible(chromedp.ID("release")), ready,
			chromedp.KeyEvent("c"), chromedp.WaitVisible(chromedp.ID("saved")),
			chromedp.KeyEvent("u"), chromedp.WaitVisible(chromedp.ID("queue")), ready)
	}
	keys := time.Since(start)
	start = time.Now()
	for range n {
		item(chromedp.Click(chromedp.CSS(`#rows tr:first-child button.take`)), chromedp.WaitVisible(chromedp.ID("release")), ready,
			chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("saved")),
			chromedp.Click(chromedp.CSS(`nav a[href="/queue"]`)), chromedp.WaitVisible(chromedp.ID("queue")), ready)
	}
	mouse := time.Since(start)
	for _, id := range ids {
		require.Len(t, decisionsOn(t, ctx, db, id), 1, "every item decided once")
	}
	t.Logf("figure: %d items by keyboard %.1f s (%.2f s/item); by mouse %.1f s (%.2f s/item)",
		n, keys.Seconds(), keys.Seconds()/n, mouse.Seconds(), mouse.Seconds()/n)
}
