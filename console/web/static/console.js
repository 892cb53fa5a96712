// The room page's live parts: the re-review stream (POST /v1/reviews read
// as an event stream, resumed from the last event id on reconnect) and the
// stop button. No build step; htmx does the forms.
(function () {
  const $ = (id) => document.getElementById(id);
  const btn = $("rereview");
  if (!btn) return;
  let current = null; // {id, last}

  function status(t) { $("live-status").textContent = t; }

  // The stream is drawn as readable steps: one list item per stage
  // attempt, its streamed answer shown as it arrives (clipped, scrolling
  // within the step) and, once the stage is over, read as the JSON it is
  // and shown as its fields. Nothing is drawn before a review starts.
  let step = null; // {li, body, text}

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function brief(v) {
    if (v === null || v === undefined) return "";
    if (Array.isArray(v)) {
      if (v.every((x) => typeof x !== "object")) return v.join(", ") || "none";
      return v.length + (v.length === 1 ? " item: " : " items: ") + v.slice(0, 3).map((x) => Object.values(x).filter((y) => typeof y !== "object").join(" · ")).join("; ");
    }
    if (typeof v === "object") return Object.keys(v).map((k) => k + ": " + brief(v[k])).join("; ");
    if (typeof v === "number" && !Number.isInteger(v)) return v.toFixed(2);
    return String(v);
  }

  function finishStep() {
    if (!step) return;
    step.li.classList.remove("running");
    step.li.classList.add("done");
    step.li.querySelector(".step-state").textContent = "done";
    let parsed = null;
    try { parsed = JSON.parse(step.text); } catch (e) { parsed = null; }
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
      const dl = el("dl", "step-fields");
      for (const k of Object.keys(parsed)) {
        dl.appendChild(el("dt", "", k.replace(/_/g, " ")));
        dl.appendChild(el("dd", "", brief(parsed[k]).slice(0, 400)));
      }
      step.body.replaceWith(dl);
    }
    step = null;
  }

  function startStep(d) {
    finishStep();
    const li = el("li", "step running");
    const head = el("p", "step-head");
    head.appendChild(el("b", "", d.stage));
    head.appendChild(document.createTextNode((d.attempt > 1 ? " · attempt " + d.attempt : "") + (d.pool ? " · " + d.pool + " pool" : "") + " · "));
    head.appendChild(el("span", "step-state", "running"));
    li.appendChild(head);
    const body = el("p", "step-text");
    body.tabIndex = 0; // it scrolls: reachable by keyboard
    li.appendChild(body);
    $("live-tokens").appendChild(li);
    step = { li, body, text: "" };
  }

  // compare draws the new verdict beside the revision this page shows.
  function compare(d) {
    const box = $("live-verdict");
    box.textContent = "";
    const t = el("table", "compare");
    const head = el("tr");
    head.appendChild(el("th", "", ""));
    const prev = btn.dataset.label ? "this page (revision " + (btn.dataset.revision || "1") + ")" : "";
    if (prev) head.appendChild(el("th", "", prev));
    head.appendChild(el("th", "", "re-review" + (d.revision ? " (revision " + d.revision + ")" : "")));
    const thead = el("thead"); thead.appendChild(head); t.appendChild(thead);
    const body = el("tbody");
    const rows = [["label", btn.dataset.label, d.label], ["category", btn.dataset.category, d.category],
      ["severity", btn.dataset.severity, d.severity], ["confidence", btn.dataset.confidence, d.confidence !== undefined ? Math.round(d.confidence * 100) + "%" : ""]];
    for (const [name, was, now] of rows) {
      const tr = el("tr");
      tr.appendChild(el("th", "", name)).setAttribute("scope", "row");
      if (prev) tr.appendChild(el("td", "", was || ""));
      const td = el("td", "", now === undefined ? "" : String(now));
      if (prev && String(was) !== String(now)) td.className = "changed";
      tr.appendChild(td);
      body.appendChild(tr);
    }
    t.appendChild(body);
    box.appendChild(el("p", "verdict-line", "verdict: " + d.label + " / " + d.category + " (severity " + d.severity + ")"));
    box.appendChild(t);
    if (d.rationale) box.appendChild(el("p", "rationale", d.rationale));
  }

  function handle(type, data) {
    const d = data ? JSON.parse(data) : {};
    if (type === "stage") {
      startStep(d);
    } else if (type === "token") {
      if (!step) startStep({ stage: d.stage || "stage" });
      step.text += d.text;
      step.body.textContent = step.text;
      step.body.scrollTop = 1e9;
    } else if (type === "verdict") {
      finishStep();
      compare(d);
      $("live-verdict").dataset.final = "verdict";
      // The re-review is a new revision with a page of its own; this page
      // stays on the revision it shows (and its decisions).
      if (d.verdict_id && String(d.verdict_id) !== location.pathname.split("/").pop()) {
        const a = document.createElement("a");
        a.id = "new-revision";
        a.href = "/verdicts/" + d.verdict_id;
        a.textContent = "Open revision " + (d.revision || "") + " (the current verdict)";
        $("live-verdict").appendChild(a);
      }
      status("done");
    } else if (type === "error") {
      finishStep();
      $("live-verdict").textContent = "error: " + d.error;
      $("live-verdict").dataset.final = "error";
      status("failed");
    } else if (type === "stopped") {
      finishStep();
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
    $("live-tokens").textContent = ""; $("live-verdict").textContent = ""; step = null;
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
