package consoletest

import (
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/llmsim"
	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/mysql"
	"github.com/chatguard/chatguard/storage/storetest"
)

// requireChromium skips outside CI when Debian's chromium is missing. CI
// installs it (.ci/run): there a missing browser is a failure, never a
// silently skipped test.
func requireChromium(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed and CI is set (.ci/run installs it)")
		}
		t.Skip("chromium is not installed (apt-get install -y chromium)")
	}
}

// flaggedVerdicts saves one flagged verdict per room of the fraud chat and
// returns their row ids in the order given. They share severity and window,
// so the queue lists the last saved first (id descending).
func flaggedVerdicts(t *testing.T, ctx context.Context, store *mysql.Store, rooms ...string) []uint64 {
	t.Helper()
	var ids []uint64
	for _, room := range rooms {
		v := pipeline.Verdict{Key: pipeline.ReviewKey{RoomID: room, WindowStart: windowStart, WindowEnd: windowEnd, PipelineVersion: "batch-v1"},
			RunID: "run-1", Status: pipeline.StatusDone, Label: pipeline.LabelAbusive, Category: pipeline.CategoryExternalPayment, Severity: 4,
			Confidence: 0.9, Action: pipeline.ActionRestrict, Rationale: "Prepayment by bank transfer off the platform.",
			EvidenceIDs: []string{"m3", "m4"}, Attempts: 1, PublishedAt: windowEnd, StartedAt: windowEnd, FinishedAt: windowEnd}
		storetest.MustSave(t, ctx, store, v)
		id, err := store.VerdictID(ctx, v.Key)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids
}

// browser starts a headless chromium; each moderator gets a browser
// context of their own (their own cookies: two people, two sessions).
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath("chromium"), chromedp.Headless, chromedp.NoSandbox, chromedp.NoFirstRun,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	require.NoError(t, chromedp.Do(bctx)) // starts the browser
	return bctx
}

// signIn opens a new browser context for email and signs in.
func signIn(t *testing.T, bctx context.Context, url, email string) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(url+"/queue"),
		chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), email),
	))
	follow(t, ctx, "queue", chromedp.Click(chromedp.ID("signin")))
	return ctx
}

// navTimeout bounds the wait for a page that a click or a shortcut loads:
// long, because the suite runs on loaded machines, but finite, so that a
// trigger that loads nothing fails the test instead of hanging it.
const navTimeout = 90 * time.Second

// follow runs trigger, which must load a new page (a link, a form that
// posts without htmx, a shortcut that clicks one), waits until that page
// has loaded, and then until it shows the element with id waitID.
// Waiting for the element alone is not enough: when the old page has it
// too (a form that posts back to its own page, like the campaign's, with
// the previous result still shown), the wait ends on the old page, and the next query runs in a document being replaced
// ("Cannot find context with specified id") or reads the old text.
// Actions that htmx answers in place do not navigate; they must not use it.
func follow(t *testing.T, b context.Context, waitID string, trigger ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b, navTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, trigger...)
	require.NoError(t, err, "the page the trigger loads (waiting for #%s)", waitID)
	from := "a navigation within the document"
	if resp != nil {
		from = fmt.Sprintf("%s (HTTP %d)", resp.URL, resp.Status)
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID(waitID))), "#%s on the page loaded from %s", waitID, from)
}

func decisionsOn(t *testing.T, ctx context.Context, db *sql.DB, id uint64) []string {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SELECT moderator FROM moderator_decisions WHERE verdict_id = ? ORDER BY id", id)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var m string
		require.NoError(t, rows.Scan(&m))
		out = append(out, m)
	}
	require.NoError(t, rows.Err())
	return out
}

// queueConsole runs the console binary over a fresh database holding one
// flagged verdict per room (ids as flaggedVerdicts returns them), the fraud
// chat for each.
func queueConsole(t *testing.T, ctx context.Context, rooms ...string) (string, *sql.DB, []uint64) {
	t.Helper()
	db, dsn := stacktest.MySQL(t)
	_, err := migrations.Up(ctx, db)
	require.NoError(t, err)
	ids := flaggedVerdicts(t, ctx, mysql.New(db), rooms...)
	return consoleOver(t, ctx, dsn, rooms...), db, ids
}

// consoleOver runs the console binary over the database at dsn with the
// fraud chat in each of rooms; it returns the console's URL.
func consoleOver(t *testing.T, ctx context.Context, dsn string, rooms ...string) string {
	t.Helper()
	msgs := map[string][]pipeline.ChatMessage{}
	for _, r := range rooms {
		msgs[r] = room()
	}
	chat, err := chatapi.New(chatapi.Config{Messages: msgs})
	require.NoError(t, err)
	chatSrv := httptest.NewServer(chat.Handler())
	t.Cleanup(chatSrv.Close)
	lcfg := llmsim.DefaultConfig()
	lcfg.Models = []string{"console-sim"}
	llm, err := llmsim.Start(ctx, "127.0.0.1:0", lcfg)
	require.NoError(t, err)
	t.Cleanup(func() { llm.Stop(context.Background()) })
	fq := stacktest.NewQueue(t, "console-assign-fb", 5, 30*time.Second)
	live := stacktest.Unique("console-assign")
	return startConsole(t, "--listen-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--dev-login",
		"--mysql-dsn", dsn, "--chat-api-url", chatSrv.URL, "--feedback-queue-url", fq.URL,
		"--redis-addr", stacktest.Get(t, "CHATGUARD_REDIS_ADDR"), "--stop-channel", live, "--stop-key-prefix", live+":stop:",
		"--live-key-prefix", live+":", "--primary-base-url", llm.URL, "--primary-model", "console-sim")
}

// Two moderators in two browser sessions work one queue: neither decides
// an item twice without seeing that the other took or decided it.
func TestTwoModeratorsShareTheQueue(t *testing.T) {
	requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	axe := axeSource(t)
	url, db, ids := queueConsole(t, ctx, "room-assign-1", "room-assign-2")
	bctx := browser(t)
	alice := signIn(t, bctx, url, "alice@example.com")
	bob := signIn(t, bctx, url, "bob@example.com")
	room := func(id uint64) string { return fmt.Sprintf("%s/verdicts/%d", url, id) }
	shot := func(b context.Context, name string) {
		if dir := os.Getenv("CONSOLE_SCREENSHOTS"); dir != "" {
			buf, err := chromedp.Run(b, chromedp.FullScreenshot(100))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), buf, 0o644))
		}
	}
	text := func(b context.Context, id string) string {
		s, err := chromedp.Run(b, chromedp.Text(chromedp.ID(id)))
		require.NoError(t, err)
		return s
	}

	// Bob opens the first room while nobody has it.
	require.NoError(t, chromedp.Do(bob, chromedp.Navigate(room(ids[0])), chromedp.WaitVisible(chromedp.ID("take-state"))))
	require.Contains(t, text(bob, "take-state"), "Not taken")

	// Alice takes it from the queue (she lands on the room) and confirms.
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(url+"/queue")))
	follow(t, alice, "release", chromedp.Click(chromedp.CSS(`button[aria-label="take room room-assign-1"]`)))
	require.Contains(t, text(alice, "take-state"), "Taken by you")
	var aliceID string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT moderator FROM queue_takes WHERE verdict_id = ?", ids[0]).Scan(&aliceID))
	require.NoError(t, chromedp.Do(alice, chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("saved"))))

	// Bob, on his page drawn before, confirms too: he is told Alice decided
	// it, and nothing is recorded for him.
	require.NoError(t, chromedp.Do(bob, chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("conflict"))))
	require.Contains(t, text(bob, "conflict"), "Decided meanwhile by "+aliceID)
	require.Equal(t, []string{aliceID}, decisionsOn(t, ctx, db, ids[0]))

	// Alice takes the second room; Bob's queue says so, and so does the room.
	require.NoError(t, chromedp.Do(alice, chromedp.Navigate(url+"/queue")))
	follow(t, alice, "release", chromedp.Click(chromedp.CSS(`button[aria-label="take room room-assign-2"]`)))
	require.NoError(t, chromedp.Do(bob, chromedp.Navigate(url+"/queue"), chromedp.WaitVisible(chromedp.ID("queue"))))
	require.Contains(t, text(bob, "queue"), "taken by "+aliceID)
	shot(bob, "queue-taken.png")
	requireAccessible(t, bob, axe, "queue (an item taken by another)")
	require.NoError(t, chromedp.Do(bob, chromedp.Navigate(room(ids[1])), chromedp.WaitVisible(chromedp.ID("take-state"))))
	require.Contains(t, text(bob, "take-state"), "Taken by "+aliceID)

	// Bob's confirm is refused with Alice named; he overrides, explicitly.
	require.NoError(t, chromedp.Do(bob, chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("conflict"))))
	require.Contains(t, text(bob, "conflict"), "Taken by "+aliceID)
	shot(bob, "room-taken-conflict.png")
	requireAccessible(t, bob, axe, "room (taken by another; decision refused)")
	require.Empty(t, decisionsOn(t, ctx, db, ids[1]))
	require.NoError(t, chromedp.Do(bob, chromedp.Click(chromedp.ID("override-button")), chromedp.WaitVisible(chromedp.ID("saved"))))
	bobIDs := decisionsOn(t, ctx, db, ids[1])
	require.Len(t, bobIDs, 1)
	require.NotEqual(t, aliceID, bobIDs[0])

	// Alice, still on the room, now confirms: she sees Bob's decision first.
	require.NoError(t, chromedp.Do(alice, chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("conflict"))))
	require.Contains(t, text(alice, "conflict"), "Decided meanwhile by "+bobIDs[0])
	require.Equal(t, bobIDs, decisionsOn(t, ctx, db, ids[1]))
}

// A moderator works the queue from the keyboard alone: "?" lists the
// shortcuts, j selects the first item with visible focus, t takes it and
// c confirms it; the queue shows each item's age.
func TestShortcutsWorkTheQueue(t *testing.T) {
	requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	axe := axeSource(t)
	url, db, ids := queueConsole(t, ctx, "room-keys-1", "room-keys-2")
	bctx := browser(t)
	login, cancelLogin := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
	defer cancelLogin()
	require.NoError(t, chromedp.Do(login, chromedp.Navigate(url+"/login"), chromedp.WaitVisible(chromedp.ID("email"))))
	requireAccessible(t, login, axe, "login")
	alice := signIn(t, bctx, url, "alice@example.com")
	_, err := chromedp.Run(alice, chromedp.Poll[bool](`(document.getElementById("counts").textContent || "").includes("2 open")`, chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the header's counts load after the page")
	requireAccessible(t, alice, axe, "queue")

	require.NoError(t, chromedp.Do(alice, chromedp.KeyEvent("?"), chromedp.WaitVisible(chromedp.ID("shortcuts"))))
	help, err := chromedp.Run(alice, chromedp.Text(chromedp.ID("shortcuts")))
	require.NoError(t, err)
	requireAccessible(t, alice, axe, "shortcuts (? on the queue)")
	for _, want := range []string{"next / previous item", "take the item", "confirm", "overturn"} {
		require.Contains(t, help, want)
	}
	require.NoError(t, chromedp.Do(alice, chromedp.KeyEvent("?"), chromedp.WaitNotVisible(chromedp.ID("shortcuts"))))
	first, second := ids[1], ids[0] // the queue's order
	age, err := chromedp.Run(alice, chromedp.Text(chromedp.CSS(fmt.Sprintf(`tr[data-id="%d"] td.age`, first))))
	require.NoError(t, err)
	// The age, then the item's deadline by category (due in / overdue).
	require.Regexp(t, `^\d+ (min|h \d+ min|d \d+ h)( (due in|overdue) \d+ (min|h \d+ min|d \d+ h))?$`, age)

	require.NoError(t, chromedp.Do(alice, chromedp.KeyEvent("j"), chromedp.KeyEvent("j"), chromedp.KeyEvent("k")))
	focused, err := chromedp.Run(alice, chromedp.Evaluate[string](`document.activeElement.closest("tr").dataset.id + "/" + getComputedStyle(document.activeElement).outlineStyle`))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%d/solid", first), focused, "the first item is selected with a visible focus ring")

	follow(t, alice, "release", chromedp.KeyEvent("t"))
	requireAccessible(t, alice, axe, "room (taken by you)")
	require.NoError(t, chromedp.Do(alice, chromedp.KeyEvent("c"), chromedp.WaitVisible(chromedp.ID("saved"))))
	requireAccessible(t, alice, axe, "room (decided)")
	require.Len(t, decisionsOn(t, ctx, db, first), 1)
	require.Empty(t, decisionsOn(t, ctx, db, second))
}
