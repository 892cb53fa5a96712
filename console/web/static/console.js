// The room page's live parts: the re-review stream (POST /v1/reviews read
// as an event stream, resumed from the last event id on reconnect) and the
// stop button. No build step; htmx does the forms.
(function () {
  const $ = (id) => document.getElementById(id);
  const btn = $("rereview");
  if (!btn) return;
  let current = null; // {id, last}

  function status(t) { $("live-status").textContent = t; }

  function handle(type, data) {
    const d = data ? JSON.parse(data) : {};
    if (type === "stage") {
      const chip = document.createElement("span");
      chip.className = "stage-chip";
      chip.textContent = d.stage + (d.attempt > 1 ? " #" + d.attempt : "") + (d.pool ? " (" + d.pool + ")" : "");
      $("live-stages").appendChild(chip);
      $("live-tokens").textContent += "\n[" + d.stage + "] ";
    } else if (type === "token") {
      $("live-tokens").textContent += d.text;
      $("live-tokens").scrollTop = 1e9;
    } else if (type === "verdict") {
      $("live-verdict").textContent = "verdict: " + d.label + " / " + d.category + " (severity " + d.severity + ")";
      $("live-verdict").dataset.final = "verdict";
      // The re-review is a new revision with a page of its own; this page
      // stays on the revision it shows (and its decisions).
      if (d.verdict_id && String(d.verdict_id) !== location.pathname.split("/").pop()) {
        const a = document.createElement("a");
        a.id = "new-revision";
        a.href = "/verdicts/" + d.verdict_id;
        a.textContent = " Open revision " + (d.revision || "") + " (the current verdict)";
        $("live-verdict").appendChild(a);
      }
      status("done");
    } else if (type === "error") {
      $("live-verdict").textContent = "error: " + d.error;
      $("live-verdict").dataset.final = "error";
      status("failed");
    } else if (type === "stopped") {
      $("live-verdict").textContent = "stopped: " + d.reason;
      $("live-verdict").dataset.final = "stopped";
      status("stopped");
    }
    return type === "verdict" || type === "error" || type === "stopped";
  }

  // read parses an SSE body; it returns "final", "reconnect" or "closed".
  async function read(resp) {
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return "closed";
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i); buf = buf.slice(i + 2);
        let type = "message", data = "", id = null;
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) type = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
          else if (line.startsWith("id: ")) id = line.slice(4);
        }
        if (line0(block)) continue;
        if (id) current.last = id;
        if (type === "reconnect") return "reconnect";
        if (handle(type, data)) return "final";
      }
    }
  }
  function line0(block) { return block.startsWith(":"); }

  async function follow(resp) {
    for (let tries = 0; tries < 20; tries++) {
      const how = await read(resp);
      if (how === "final") return;
      status("reconnecting…");
      await new Promise((r) => setTimeout(r, 500));
      const headers = current.last ? { "Last-Event-ID": current.last } : {};
      resp = await fetch("/v1/reviews/" + current.id + "/events", { headers });
      if (!resp.ok) { status("could not resume: " + resp.status); return; }
      status("streaming");
    }
  }

  btn.addEventListener("click", async () => {
    $("live-stages").textContent = ""; $("live-tokens").textContent = ""; $("live-verdict").textContent = "";
    delete $("live-verdict").dataset.final;
    status("starting…");
    const resp = await fetch("/v1/reviews", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": btn.dataset.csrf },
      body: JSON.stringify({ room_id: btn.dataset.room, window_start: btn.dataset.start, window_end: btn.dataset.end }),
    });
    if (!resp.ok) {
      status("refused: " + resp.status + " " + (resp.headers.get("Retry-After") ? "(retry in " + resp.headers.get("Retry-After") + " s)" : "") + " " + (await resp.text()));
      return;
    }
    current = { id: resp.headers.get("X-Review-ID"), last: null };
    status("streaming");
    await follow(resp);
  });

  const stop = $("stop");
  if (stop) stop.addEventListener("click", async () => {
    const resp = await fetch(stop.dataset.url, { method: "POST", headers: { "X-CSRF-Token": stop.dataset.csrf } });
    status((resp.ok ? "" : "stop failed: ") + (await resp.text()));
  });
})();
