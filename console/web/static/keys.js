// Keyboard shortcuts, listed on "?": j/k move through the queue, Enter
// opens the item, t takes it (on a campaign, every open room); on a room c confirms, o overturns, t takes,
// a opens the account the verdict is about, u goes back to the queue. Keys typed into a field are the field's.
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
  document.addEventListener("keydown", function (e) {
    if (typing(e)) return;
    const help = $("shortcuts");
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
      case "c": click("confirm"); break;
      case "o": click("overturn"); break;
      case "a": click("open-account"); break;
      case "u": window.location.href = "/queue"; break;
      default: return;
    }
    e.preventDefault();
  });
})();
