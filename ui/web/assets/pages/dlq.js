// DLQ tab: the dead-letter topic newest first, paged both ways, filtered
// by key, task id and reason, with the reasons counted over the records
// each page read; every record's task opens its panel (labels, input,
// attempts, stderr). With redrive on (features.redrive), records or an
// offset range are dry-run, then, once confirmed, redriven for real; the
// outcome shows under the control that asked for it, and each redriven
// record links where it landed and, once consumed, the task that ran it
// with its outcome. Loaded with the Debug page's DLQ tab only.
import { el, card, note, banner, timeEl, encoded, num, bytes } from "../dom.js";
import { get, ndjson } from "../api.js";
import { coords } from "./common.js";
import { badge } from "../render.js";

const outcomeColors = { would_succeed: "green", redriven: "green", would_fail: "red", failed: "red", truncated: "yellow", duplicate: "gray", "*": "gray" };
const afterColors = { ok: "green", "failed again": "red", "DLQ again": "red", waiting: "gray", "*": "gray" };
const FOLLOW_MS = 2000; // how often a redrive's tasks are looked for
const FOLLOW_FOR_MS = 10 * 60e3; // and for how long

// taskLink opens a task's panel in place (live.js); the address opens it on
// Live for a new tab.
function taskLink(ctx, id, cls) {
  return el("a", { href: "/live?task=" + encodeURIComponent(id), class: cls, title: "Open this task: labels, input, attempts, stderr",
    onclick: (ev) => {
      if (ev.button || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
      ev.preventDefault();
      ev.stopPropagation(); // not a navigation (app.js): the panel opens here
      import("./live.js").then((m) => m.openTaskById(ctx, id));
    } }, el("code", {}, id));
}

export async function mount(root, ctx) {
  const topics = (await get("/api/v1/debug/kafka/topics")).topics || [];
  if (!topics.some((t) => t.alias === "dlq")) {
    root.append(banner("info", "This worker has no DLQ (no Kafka source and no dlq.topic)."));
    return;
  }
  const canRedrive = !!ctx.identity.features.redrive;
  const P = ctx.params;
  const input = (id, attrs) => el("input", { id, ...attrs });
  const keyIn = input("dlq-key", { type: "search", placeholder: "exact key", value: P.get("key") || "" });
  const taskIn = input("dlq-task", { type: "search", placeholder: "task id", value: P.get("task_id") || "" });
  const reasonIn = input("dlq-reason", { type: "search", placeholder: "text in the reason", value: P.get("reason") || "" });
  const partIn = input("dlq-partition", { type: "number", min: 0, placeholder: "all", value: P.get("partition") || "" });
  const limitSel = el("select", { id: "dlq-limit" }, [50, 100, 200].map((n) => el("option", { value: n }, String(n))));
  const scanSel = el("select", { id: "dlq-scan" }, [1000, 10000].map((n) => el("option", { value: n }, num(n))));
  const status = el("div", { "aria-live": "polite", class: "dlq-status" });
  const reasonsBox = el("div", { class: "dlq-reasons" });
  const tableBox = el("div");
  const newest = el("button", { type: "button", id: "dlq-newest" }, "Newest");
  const newer = el("button", { type: "button", id: "dlq-newer", disabled: true }, "← Newer");
  const older = el("button", { type: "button", id: "dlq-older", disabled: true }, "Older →");
  const selected = new Map(); // "p:o" → {partition, offset}
  const keys = new Map(); // "p:o" → key shown, for the redrive lines
  let page = null;
  let focus = null;
  let cursor = null; // ["before" | "after", text] or null for the newest page
  let seq = 0;
  const P0 = P.get("partition"), O0 = P.get("offset");
  if (P0 !== null && O0 !== null && /^\d+$/.test(P0) && /^\d+$/.test(O0)) {
    // Opened from a trace: the page that starts at that record.
    focus = `${P0}:${O0}`;
    cursor = ["before", `${P0}:${Number(O0) + 1}`];
  }

  const load = async () => {
    const my = ++seq;
    const q = new URLSearchParams({ limit: limitSel.value, scan: scanSel.value });
    for (const [k, i] of [["key", keyIn], ["task_id", taskIn], ["reason", reasonIn], ["partition", partIn]]) if (i.value !== "") q.set(k, i.value);
    if (cursor) q.set(cursor[0], cursor[1]);
    status.replaceChildren(note("Reading…"));
    let got;
    try {
      got = await get("/api/v1/debug/dlq/records?" + q);
    } catch (err) {
      if (my === seq) status.replaceChildren(banner("error", err.message));
      return;
    }
    if (my !== seq) return; // a later search or page answers instead
    page = got;
    draw();
  };
  const search = (ev) => {
    if (ev) ev.preventDefault();
    cursor = null;
    focus = null;
    load();
  };
  newest.onclick = () => search();
  newer.onclick = () => { if (page?.newer) { cursor = ["after", page.newer]; load(); } };
  older.onclick = () => { if (page?.older) { cursor = ["before", page.older]; load(); } };

  const draw = () => {
    const recs = page.records || [];
    const filtered = keyIn.value || taskIn.value || reasonIn.value;
    status.replaceChildren(el("p", { class: "dlq-counts" },
      `Newest first. ${num(recs.length)} record(s) on this page; ${num(page.matched)} of the ${num(page.scanned)} records read `,
      filtered ? "matched the filters" : "in all", ` (a page reads at most ${num(page.scan_limit)}). The DLQ holds ${num(page.total)} records in ${page.partitions.length} partition(s).`,
      !recs.length && page.older ? " Nothing here matched: Older reads on." : ""));
    newer.disabled = !page.newer;
    older.disabled = !page.older;
    drawReasons();
    const all = canRedrive ? el("input", { type: "checkbox", id: "dlq-select-page", "aria-label": "select every record of this page" }) : null;
    const rows = recs.map((r) => recordRow(r));
    if (all) {
      all.checked = recs.length > 0 && recs.every((r) => selected.has(`${r.partition}:${r.offset}`));
      all.onchange = () => {
        for (const r of recs) all.checked ? select(r) : selected.delete(`${r.partition}:${r.offset}`);
        for (const b of tableBox.querySelectorAll("input.dlq-select")) b.checked = all.checked;
        drawSelection();
      };
    }
    const heads = ["Partition:offset", "Time", "Key", "Reason", "Attempts", "Task", "Source", "Worker", "Payload"];
    tableBox.replaceChildren(el("div", { class: "scroll" }, el("table", { class: "grid records dlq" },
      el("thead", {}, el("tr", {}, all ? el("th", { scope: "col" }, all) : null, heads.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: heads.length + (all ? 1 : 0), class: "muted" }, "No record on this page."))))));
    const f = focus && tableBox.querySelector(`tr[data-offset="${focus}"]`);
    if (f) f.scrollIntoView({ block: "nearest" });
  };

  const drawReasons = () => {
    const rs = page.reasons || [];
    if (!rs.length) { reasonsBox.replaceChildren(); return; }
    const rows = rs.map((r) => el("tr", { "data-reason": r.reason }, el("td", { class: "error" }, r.reason || "(no reason)"), el("td", { class: "num" }, num(r.count)),
      el("td", {}, el("button", { type: "button", class: "linkish reason-filter", title: "Show only records with this reason", onclick: () => { reasonIn.value = r.reason; search(); } }, "filter"))));
    if (page.other_reasons) rows.push(el("tr", {}, el("td", { class: "muted" }, "other reasons"), el("td", { class: "num" }, num(page.other_reasons)), el("td")));
    reasonsBox.replaceChildren(el("h3", {}, `Reasons among the ${num(page.scanned)} records this page read`),
      el("div", { class: "scroll" }, el("table", { class: "grid reasons" }, el("thead", {}, el("tr", {}, ["Reason", "Records", ""].map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, rows))));
  };

  const recordRow = (r) => {
    const at = `${r.partition}:${r.offset}`;
    const box = canRedrive ? el("input", { type: "checkbox", class: "dlq-select", "aria-label": "select DLQ record " + at }) : null;
    if (box) {
      box.checked = selected.has(at);
      box.onchange = () => { box.checked ? select(r) : selected.delete(at); drawSelection(); };
    }
    const src = r.source_partition !== null && r.source_partition !== undefined ? coords(ctx, "source", r.source_partition, r.source_offset) : el("span", { class: "muted" }, "—");
    const task = r.task_id ? taskLink(ctx, r.task_id, "task-link") : el("span", { class: "muted" }, "—");
    const payload = [encoded(r.payload, r.payload_encoding, 160), r.payload_truncated ? el("span", { class: "muted" }, ` (${bytes(r.payload_size_bytes)})`) : null,
      r.truncated_from !== null && r.truncated_from !== undefined ? el("span", { class: "tag", title: `cut to fit the DLQ topic from ${bytes(r.truncated_from)}: never redriven` }, "truncated") : null];
    return el("tr", { "data-offset": at, "data-key": r.key ?? "", "data-worker": r.worker, class: focus === at ? "focus" : null },
      box ? el("td", {}, box) : null,
      el("td", {}, coords(ctx, "dlq", r.partition, r.offset)), el("td", {}, timeEl(r.timestamp_ms)),
      el("td", {}, encoded(r.key, r.key_encoding, 80)),
      el("td", { class: "error" }, r.reason || "", r.redrive_count ? el("span", { class: "muted" }, ` (redriven ${r.redrive_count}×)`) : null),
      el("td", { class: "num" }, r.attempts ?? "—"), el("td", {}, task), el("td", { class: "source" }, src),
      el("td", {}, r.worker || "—"), el("td", { class: "summary" }, payload));
  };

  // Redrive: a selection or an offset range → dry run → confirm → real run.
  const selInfo = el("span", { class: "dlq-selected" });
  const dryBtn = el("button", { type: "button", id: "redrive-dry", disabled: true }, "Dry run the selection");
  const clearBtn = el("button", { type: "button", disabled: true }, "Clear selection");
  const rp = input("redrive-p", { type: "number", min: 0, placeholder: "partition", "aria-label": "range partition", required: true });
  const rf = input("redrive-from", { type: "number", min: 0, placeholder: "from offset", "aria-label": "range from offset", required: true });
  const rt = input("redrive-to", { type: "number", min: 0, placeholder: "to offset", "aria-label": "range to offset (inclusive)" });
  const result = el("div", { class: "redrive-out", "aria-live": "polite" });
  const selBar = el("div", { class: "toolbar selection" }, selInfo, dryBtn, clearBtn);
  let busy = null;
  const select = (r) => {
    selected.set(`${r.partition}:${r.offset}`, { partition: r.partition, offset: r.offset });
    if (r.key !== null) keys.set(`${r.partition}:${r.offset}`, r.key);
  };
  const drawSelection = () => {
    selInfo.textContent = `${selected.size} record(s) selected`;
    dryBtn.disabled = clearBtn.disabled = selected.size === 0;
  };
  clearBtn.onclick = () => { selected.clear(); for (const b of tableBox.querySelectorAll("input[type=checkbox]")) b.checked = false; drawSelection(); };

  // follow looks, every FOLLOW_MS, for the tasks that consumed a real run's
  // records: they carry the label redrive=<run>, found cluster-wide by
  // trace-by-label and matched to each line by where it landed.
  let following = null;
  const follow = (run, landed, line) => {
    const my = {};
    following = my;
    const until = Date.now() + FOLLOW_FOR_MS;
    const seen = new Map(); // "p:o" → task row
    const dlq = new Map(); // task id → its dlq_sent payload, once known
    const tick = async () => {
      if (following !== my || !result.isConnected) return;
      let ans;
      try {
        ans = await get(`/api/v1/debug/trace-by-label?name=redrive&value=${encodeURIComponent(run)}&limit=1000`);
      } catch (err) {
        if (following !== my) return;
        line.replaceChildren(banner("error", `Looking for the tasks failed (trying again in ${FOLLOW_MS / 1000} s): ${err.message}`));
        if (Date.now() < until) setTimeout(tick, FOLLOW_MS);
        return;
      }
      if (following !== my) return;
      for (const t of ans.tasks || []) {
        const at = `${t.partition}:${t.offset}`;
        if (t.alias === "source" && landed.has(at) && !seen.has(at)) seen.set(at, t);
      }
      let asks = 20; // traces read a round, for the DLQ records of tasks that failed again
      for (const t of seen.values()) {
        if (t.status === "ok" || dlq.has(t.task_id) || asks-- <= 0) continue;
        try {
          const tr = await get("/api/v1/debug/trace?task_id=" + encodeURIComponent(t.task_id));
          const d = (tr.events || []).find((e) => e.type === "dlq_sent");
          if (d) dlq.set(t.task_id, d.payload || {});
        } catch { /* asked again next time */ }
      }
      let ok = 0, again = 0;
      for (const [at, cell] of landed) {
        const t = seen.get(at);
        if (!t) continue;
        const d = dlq.get(t.task_id);
        const word = t.status === "ok" ? "ok" : d && d.outcome === "sent" ? "DLQ again" : "failed again";
        if (t.status === "ok") ok++; else again++;
        cell.dataset.after = word;
        cell.replaceChildren(el("span", {}, badge(word, afterColors), " ", taskLink(ctx, t.task_id, "redriven-task"),
          t.status !== "ok" && t.error ? el("span", { class: "error" }, " · " + t.error) : null,
          d && d.outcome === "sent" ? [" · ", el("a", { href: `/debug?tab=dlq&partition=${d.dlq_partition}&offset=${d.dlq_offset}`, class: "dlq-again" }, `DLQ record ${d.dlq_partition}:${d.dlq_offset}`)] : null));
      }
      const done = seen.size === landed.size && [...seen.values()].every((t) => t.status === "ok" || dlq.has(t.task_id));
      const missing = (ans.missing || []).map((m) => m.worker);
      line.replaceChildren(el("p", { "data-consumed": String(seen.size) },
        done ? `All ${num(landed.size)} consumed: ${num(ok)} ok, ${num(again)} failed again.`
          : `Consumed ${num(seen.size)} of ${num(landed.size)} so far (${num(ok)} ok, ${num(again)} failed again); looking every ${FOLLOW_MS / 1000} s…`,
        missing.length ? el("span", { class: "muted" }, ` Not searched: ${missing.join(", ")} (their tasks may be missing).`) : ""));
      if (done) return;
      if (Date.now() > until) {
        line.append(note(`Stopped looking after ${FOLLOW_FOR_MS / 60e3} min: the rest is not consumed yet (is the fleet consuming? see the Consumer lag page). Find them later in History by the label redrive = ${run}.`));
        return;
      }
      setTimeout(tick, FOLLOW_MS);
    };
    tick();
  };

  // run dry-runs or redrives req; its outcome shows right under anchor,
  // the control that asked for it.
  const run = async (req, dry, anchor) => {
    if (busy) busy.abort();
    busy = new AbortController();
    following = null;
    anchor.after(result);
    const lines = [];
    let summary = null;
    const body = el("tbody");
    const landed = new Map(); // "p:o" in the source → its "consumed" cell
    const sumBox = el("div", { class: "redrive-summary" }, note(dry ? "Dry run: probing each record through the live handler…" : "Redriving…"));
    const heads = dry ? ["DLQ record", "Key", "Outcome", "Details"] : ["DLQ record", "Key", "Outcome", "Now at", "Consumed"];
    result.replaceChildren(sumBox, el("div", { class: "scroll" }, el("table", { class: "grid redrive-result" },
      el("thead", {}, el("tr", {}, heads.map((h) => el("th", { scope: "col" }, h)))), body)));
    result.scrollIntoView({ block: "nearest" });
    let err = null;
    try {
      err = await ndjson("/api/v1/debug/dlq/redrive", (l) => {
        if (l.summary) { summary = l.summary; return; }
        lines.push(l);
        const cells = [el("td", {}, el("code", {}, `${l.partition}:${l.offset}`)), el("td", {}, keys.get(`${l.partition}:${l.offset}`) ?? ""),
          el("td", {}, badge(l.outcome, outcomeColors))];
        if (dry || l.outcome !== "redriven") cells.push(el("td", { colspan: dry ? 1 : 2 }, lineDetail(l)));
        else {
          const [p, o] = l.to.split(":");
          const after = el("td", { class: "consumed", "data-after": "waiting" }, badge("waiting", afterColors), el("span", { class: "muted" }, " to be consumed"));
          landed.set(l.to, after);
          cells.push(el("td", {}, el("a", { href: `/debug?tab=kafka&alias=source&partition=${p}&offset=${o}`, class: "landed", title: "Open this record in the Kafka browser" }, "source ", el("code", {}, l.to))), after);
        }
        body.append(el("tr", { "data-offset": `${l.partition}:${l.offset}`, "data-outcome": l.outcome }, cells));
      }, busy.signal, { ...req, dry_run: dry });
    } catch (e) {
      if (e.name === "AbortError") return;
      sumBox.replaceChildren(banner("error", (dry ? "Dry run failed: " : "Redrive failed: ") + e.message));
      return;
    }
    if (err || !summary) {
      sumBox.replaceChildren(banner("error", `The ${dry ? "dry run" : "redrive"} ended early after ${lines.length} record(s): ${err || "no summary"}`));
      return;
    }
    const s = summary;
    const extra = [s.duplicates ? `${num(s.duplicates)} redriven before (skipped)` : "", s.truncated ? `${num(s.truncated)} truncated (never redriven)` : "", s.failed ? `${num(s.failed)} failed` : ""].filter(Boolean);
    if (dry) {
      const go = el("button", { type: "button", id: "redrive-confirm" }, `Redrive ${num(s.records)} record(s) for real`);
      go.onclick = () => run(req, false, anchor);
      const cancel = el("button", { type: "button", onclick: () => result.replaceChildren() }, "Cancel");
      const head = el("p", { "data-dry": "true" }, el("strong", {}, `Dry run of ${num(s.records)} record(s): ${num(s.would_succeed)} would succeed, ${num(s.would_fail)} would fail.`),
        extra.length ? " " + extra.join(", ") + "." : "", " Nothing was written.");
      if (!s.records) {
        sumBox.replaceChildren(head);
      } else if (!s.would_succeed) {
        // Nothing would succeed: a redrive now only fills the DLQ again.
        const again = el("button", { type: "button", id: "redrive-dry-again", class: "primary", onclick: () => run(req, true, anchor) }, "Dry run again");
        go.textContent = "Redrive anyway";
        sumBox.replaceChildren(head, el("div", { class: "banner banner-warn confirm nothing-succeeds", role: "alert" },
          el("p", {}, el("strong", {}, s.would_fail === s.records ? `All ${num(s.records)} would fail again: fix the handler first.` : `None of the ${num(s.records)} would succeed: fix the handler first.`),
            " Each line below says why. Redriven now, every record would fail again and return to the DLQ; once the executor or its dependency is fixed, dry-run again."),
          el("div", { class: "toolbar" }, again, go, cancel)));
        again.focus();
      } else {
        go.classList.add("primary");
        sumBox.replaceChildren(head, el("div", { class: "banner banner-warn confirm" },
          el("p", {}, `Redrive for real? Each record's original message goes back to the source topic, where the fleet consumes it again; a record that fails again returns to the DLQ. Records this worker redrove before are skipped.`,
            s.would_fail ? el("strong", {}, ` ${num(s.would_fail)} of them would fail again now.`) : ""),
          el("div", { class: "toolbar" }, go, cancel)));
        go.focus();
      }
    } else {
      const line = el("div", { class: "redrive-follow", "aria-live": "polite" });
      sumBox.replaceChildren(el("p", { "data-done": "true" }, el("strong", {}, `Redriven ${num(s.redriven)} of ${num(s.records)} record(s) to the source topic.`),
        extra.length ? " " + extra.join(", ") + "." : "", " The fleet consumes them again; each line shows the task that ran it once consumed, and one that fails again returns to the DLQ (Newest shows it)."), line);
      selected.clear();
      drawSelection();
      if (page) draw();
      if (s.run && landed.size) {
        // One look answers at most 1,000 tasks: a bigger run is followed
        // for its first 1,000 lines.
        const followed = new Map([...landed].slice(0, 1000));
        if (followed.size < landed.size) sumBox.append(note(`Following the first 1,000 of ${num(landed.size)} lines; find every task of this run in History by the label redrive = ${s.run}.`));
        follow(s.run, followed, line);
      }
    }
  };
  dryBtn.onclick = () => run({ records: [...selected.values()] }, true, selBar);
  const rangeForm = el("form", { class: "inline", onsubmit: (ev) => {
    ev.preventDefault();
    const req = { partition: Number(rp.value), from_offset: Number(rf.value) };
    if (rt.value !== "") req.to_offset = Number(rt.value);
    run(req, true, rangeForm);
  } }, el("span", {}, "Or a range of partition"), rp, el("span", {}, "offsets"), rf, el("span", {}, "to"), rt, el("button", { type: "submit", id: "redrive-range" }, "Dry run the range"));

  root.append(card("Dead-letter queue",
    el("form", { class: "inline", onsubmit: search },
      el("label", { for: "dlq-key" }, "Key"), keyIn, el("label", { for: "dlq-task" }, "Task id"), taskIn,
      el("label", { for: "dlq-reason" }, "Reason"), reasonIn, el("label", { for: "dlq-partition" }, "Partition"), partIn,
      el("label", { for: "dlq-limit" }, "Per page"), limitSel, el("label", { for: "dlq-scan" }, "Read at most"), scanSel,
      el("button", { type: "submit", id: "dlq-search" }, "Search")),
    el("div", { class: "toolbar" }, newest, newer, older),
    status,
    note("Each page reads at most the chosen number of records, newest first from where it starts; filters and reason counts cover what it read. Key and task id match exactly, the reason by contained text. Reads join no consumer group and commit nothing."),
    reasonsBox, canRedrive ? selBar : null, tableBox),
  canRedrive
    ? card("Redrive",
      note("Select records above, or give an offset range. A dry run probes each record's original message through the live handler (nothing is written); after it you confirm the real run, which re-produces the messages to the source topic."),
      rangeForm)
    : note("Redrive is off on this worker (it needs ui.redrive_enabled = true and a Kafka source)."));
  drawSelection();
  await load();
  return () => { seq++; following = null; if (busy) busy.abort(); };
}

function lineDetail(l) {
  const parts = [];
  for (const t of l.tasks || []) parts.push(el("div", {}, el("code", {}, t.task_id), " ", t.status, t.error ? el("span", { class: "error" }, " · " + t.error) : ""));
  if (l.error) parts.push(el("div", { class: "error" }, l.error));
  if (l.outcome === "duplicate") parts.push(el("div", { class: "muted" }, "redriven before by this worker"));
  return parts;
}
