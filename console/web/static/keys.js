// Keyboard shortcuts, listed on "?": j/k move through the queue, Enter
// opens the item, t takes it (on a campaign, every open room); on a room c confirms, o overturns, t takes,
// a opens the account the verdict is about, u goes back to the queue, z undoes. On the queue list c confirms
// the item selected and o then 1/2/3 overturns it to abusive/suspicious/clean (two keys), x selects it for a
// bulk decision, z undoes the last decision made from the list; after a decision the next item is focused.
// Keys typed into a field are the field's.
(function () {
  const $ = (id) => document.getElementById(id);
  function typing(e) {
    const t = e.target;
    return e.ctrlKey || e.metaKey || e.altKey || (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)));
  }
  function rows() { return Array.from(document.querySelectorAll("#rows tr[data-id]")); }
  function selected() { return document.querySelector("#rows tr.selected"); }
  function select(row) {
    const old = selected();
    if (old) { old.classList.remove("selected"); old.removeAttribute("aria-current"); }
    if (!row) return;
    row.classList.add("selected");
    row.setAttribute("aria-current", "true");
    const link = row.querySelector("a.room");
    if (link) link.focus(); // visible focus; Enter opens it
  }
  function move(step) {
    const all = rows();
    if (!all.length) return;
    const i = all.indexOf(selected());
    select(all[Math.max(0, Math.min(all.length - 1, i < 0 ? 0 : i + step))]);
  }
  function click(id) { const b = $(id); if (b) { b.click(); return true; } return false; }
  const overturnKeys = { "1": "abusive", "2": "suspicious", "3": "clean" };
  let overturning = null; // the row waiting for its overturn label key
  let lastUndo = null; // {row, id, decision}: the last list decision, to undo with z
  function say(row, text, ok) {
    const st = row.querySelector(".row-status");
    if (st) { st.textContent = text; st.className = "row-status " + (ok ? "ok" : "error"); }
  }
  function post(url, fields) {
    const body = new URLSearchParams(fields);
    body.set("csrf", $("queue").dataset.csrf);
    return fetch(url, { method: "POST", headers: { "HX-Request": "true" }, body: body }).then(async (resp) => {
      const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
      const why = doc.querySelector("#refused, #conflict");
      const undo = doc.querySelector("#undo-form input[name=decision_id]");
      return { ok: resp.ok, why: why ? why.textContent : resp.status + " " + resp.statusText, undo: undo ? undo.value : null };
    });
  }
  // decideRow records a decision on row from the list, then moves on.
  function decideRow(row, fields) {
    say(row, "saving…", true);
    post("/verdicts/" + row.dataset.id + "/decide", fields).then((r) => {
      if (!r.ok) { say(row, r.why, false); return; }
      row.classList.add("decided");
      const form = row.querySelector("form.row-decide");
      if (form) form.remove();
      const pick = row.querySelector("input.pick");
      if (pick) pick.remove();
      say(row, fields.decision === "confirm" ? "confirmed" : "overturned → " + fields.label, true);
      lastUndo = r.undo ? { row: row, id: r.undo } : null;
      if (selected() === row) move(1);
    }, (e) => say(row, String(e), false));
  }
  function undoLast() {
    if (!lastUndo) return false;
    const u = lastUndo;
    lastUndo = null;
    post("/verdicts/" + u.row.dataset.id + "/undo", { decision_id: u.id }).then((r) => {
      if (!r.ok) { say(u.row, r.why, false); return; }
      u.row.classList.remove("decided");
      say(u.row, "undone: open again (reload to decide it from the list)", true);
      select(u.row);
    }, (e) => say(u.row, String(e), false));
    return true;
  }
  function onQueue() { return !!$("queue") && !!selected(); }
  // Clicking a row's confirm button decides from the list too.
  document.addEventListener("submit", function (e) {
    const form = e.target.closest && e.target.closest("form.row-decide");
    if (!form || !$("queue")) return;
    e.preventDefault();
    decideRow(form.closest("tr"), { decision: "confirm" });
  });
  document.addEventListener("keydown", function (e) {
    if (typing(e)) return;
    const help = $("shortcuts");
    if (overturning) {
      const row = overturning;
      overturning = null;
      if (overturnKeys[e.key]) {
        decideRow(row, { decision: "overturn", label: overturnKeys[e.key], category: overturnKeys[e.key] === "clean" ? "" : row.dataset.category });
      } else {
        say(row, "overturn cancelled", true);
      }
      e.preventDefault();
      return;
    }
    switch (e.key) {
      case "?":
        if (help.open) help.close(); else help.showModal();
        break;
      case "j": move(1); break;
      case "k": move(-1); break;
      case "t": {
        const row = selected();
        const take = row && row.querySelector("button.take");
        if (take) take.click(); else click("take-button");
        break;
      }
      case "c":
        if (onQueue()) { if (!selected().classList.contains("decided")) decideRow(selected(), { decision: "confirm" }); } else click("confirm");
        break;
      case "o":
        if (onQueue()) {
          if (!selected().classList.contains("decided")) { overturning = selected(); say(overturning, "overturn to: 1 abusive · 2 suspicious · 3 clean", true); }
        } else click("overturn");
        break;
      case "x": {
        const pick = onQueue() && selected().querySelector("input.pick");
        if (pick) pick.checked = !pick.checked;
        break;
      }
      case "z": if (!undoLast()) click("undo"); break;
      case "a": click("open-account"); break;
      case "u": window.location.href = "/queue"; break;
      default: return;
    }
    e.preventDefault();
  });
})();
