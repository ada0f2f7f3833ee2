// History: the cluster's recorder databases, traces by task id and by
// label across them, downloads and merges.
import { el, card, timeEl, bytes, note, banner, text } from "../dom.js";
import { get, post, withToken } from "../api.js";
import { statusBadge, coords } from "./common.js";

export async function mount(root, ctx) {
  const f = ctx.identity.features;
  const dbBox = el("div");
  const traceOut = el("div", { "aria-live": "polite" });
  const labelOut = el("div", { "aria-live": "polite" });
  const taskIn = el("input", { type: "search", id: "trace-task", placeholder: "task id", required: true, value: ctx.params.get("task_id") || "" });
  const nameIn = el("input", { type: "text", id: "label-name", placeholder: "label name", required: true });
  const valueIn = el("input", { type: "text", id: "label-value", placeholder: "value" });

  const trace = async (id) => {
    traceOut.replaceChildren(note("Tracing…"));
    try {
      const tr = await get("/api/v1/debug/trace?task_id=" + encodeURIComponent(id));
      traceOut.replaceChildren(traceTable(tr.events || [], ctx), ...searched(tr));
    } catch (err) {
      traceOut.replaceChildren(banner("error", err.message));
    }
  };
  const byLabel = async () => {
    labelOut.replaceChildren(note("Searching…"));
    try {
      const q = `name=${encodeURIComponent(nameIn.value)}&value=${encodeURIComponent(valueIn.value)}&limit=200`;
      const res = await get("/api/v1/debug/trace-by-label?" + q);
      labelOut.replaceChildren(tasksTable(res.tasks || [], ctx, (id) => { taskIn.value = id; trace(id); taskIn.scrollIntoView(); }), ...searched(res));
    } catch (err) {
      labelOut.replaceChildren(banner("error", err.message));
    }
  };

  root.append(
    card("Trace a task",
      el("form", { class: "inline", onsubmit: (ev) => { ev.preventDefault(); history.replaceState(null, "", "/history?task_id=" + encodeURIComponent(taskIn.value)); trace(taskIn.value); } },
        el("label", { for: "trace-task" }, "Task id"), taskIn, el("button", { type: "submit" }, "Trace")),
      note("Searches the cluster's sealed files and archives, this worker's live file and those of the cluster's other running workers (asked now)."), traceOut),
    card("Find tasks by label",
      el("form", { class: "inline", onsubmit: (ev) => { ev.preventDefault(); byLabel(); } },
        el("label", { for: "label-name" }, "Label"), nameIn, el("label", { for: "label-value" }, "="), valueIn, el("button", { type: "submit" }, "Find")),
      labelOut),
    card("Databases", dbBox));

  await loadDatabases(dbBox, f);
  if (taskIn.value) trace(taskIn.value);
}

async function loadDatabases(box, f) {
  const res = await get("/api/v1/debug/databases");
  const dbs = res.databases || [];
  const picked = new Set();
  const mergeOut = el("div", { "aria-live": "polite" });
  const mergeBtn = el("button", { type: "button", disabled: true }, "Merge selected");
  const reason = f.merge ? "" : "Merging is turned off on this worker (ui.merge_enabled = false).";
  const update = () => {
    mergeBtn.disabled = !f.merge || picked.size === 0;
    mergeBtn.textContent = picked.size ? `Merge ${picked.size} selected` : "Merge selected";
  };
  mergeBtn.onclick = async () => {
    mergeOut.replaceChildren(note("Merging…"));
    try {
      const r = await post("/api/v1/debug/merge", { paths: [...picked] });
      mergeOut.replaceChildren(banner("info", `Merged ${r.events} events into ${r.path} (${bytes(r.size_bytes)}). `,
        el("a", { href: withToken("/api/v1/debug/download?path=" + encodeURIComponent(r.path)), download: "" }, "Download")));
    } catch (err) {
      mergeOut.replaceChildren(banner("error", "Merge failed: " + err.message));
    }
  };
  const rows = dbs.map((d) => {
    const mergeable = d.kind === "sealed" || d.kind === "merged";
    const box = el("input", { type: "checkbox", "aria-label": "select " + d.path, disabled: !mergeable || !f.merge });
    box.onchange = () => { box.checked ? picked.add(d.path) : picked.delete(d.path); update(); };
    const href = d.kind === "live" ? "/api/v1/debug/download-live" : "/api/v1/debug/download?path=" + encodeURIComponent(d.path);
    return el("tr", {}, el("td", {}, box), el("td", {}, el("code", {}, d.path)), el("td", {}, d.kind), el("td", {}, d.worker),
      el("td", {}, timeEl(d.from_ms)), el("td", {}, timeEl(d.to_ms)), el("td", { class: "num" }, bytes(d.size_bytes)),
      el("td", {}, el("a", { href: withToken(href), download: "" }, d.kind === "live" ? "Download snapshot" : "Download")));
  });
  box.replaceChildren(
    el("div", { class: "scroll" }, el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, ["", "Path", "Kind", "Worker", "From", "To", "Size", ""].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No databases yet."))))),
    el("div", { class: "toolbar" }, mergeBtn, reason ? el("span", { class: "muted", id: "merge-off" }, reason) : null),
    mergeOut);
  update();
}

// searched says whose live files a trace or label search read (this
// worker's and those of the workers that answered) and which workers it
// could not ask or got no answer from, with why: their unsealed events
// may be missing.
function searched(res) {
  const sources = Array.isArray(res.sources) ? res.sources : [];
  const missing = Array.isArray(res.missing) ? res.missing : [];
  const out = [];
  if (sources.length) out.push(note("Live files searched: ", el("span", { class: "trace-sources" }, sources.join(", ")), ", with the cluster's sealed files and archives."));
  if (missing.length) {
    out.push(banner("warn",
      el("p", {}, `Not searched: the live ${missing.length === 1 ? "file of 1 worker" : "files of " + missing.length + " workers"}: events not sealed yet may be missing from this answer.`),
      el("ul", { class: "plain trace-missing" }, missing.map((m) => el("li", { "data-worker": String(m.worker) }, el("strong", {}, String(m.worker)), " ", String(m.reason || ""))))));
  }
  return out;
}

function traceTable(events, ctx) {
  if (!events.length) return note("No events for this task id.");
  return el("div", { class: "scroll" }, el("table", { class: "grid trace" },
    el("thead", {}, el("tr", {}, ["Time", "Worker", "Type", "Kind", "Details"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, events.map((e) => el("tr", { "data-type": e.type }, el("td", {}, timeEl(e.ts_ms)), el("td", {}, e.worker), el("td", {}, e.type),
      el("td", {}, e.kind || ""), el("td", { class: "summary" }, eventDetail(e, ctx)))))));
}

function eventDetail(e, ctx) {
  const p = e.payload && typeof e.payload === "object" ? e.payload : {};
  if (e.type === "task_received" && p.source === "kafka") return el("span", {}, `${p.alias} `, coords(ctx, p.alias, p.partition, p.offset), ` · ${bytes(p.input_size_bytes || 0)}`);
  if (e.type === "executor_finished") return el("span", {}, statusBadge(p.status), ` exit ${p.exit_code ?? "?"}`, p.error ? " · " + p.error : "", p.stderr_tail ? el("pre", { class: "preview" }, p.stderr_tail) : null);
  if (e.type === "dlq_sent") return el("span", {}, statusBadge("dlq"), ` ${p.outcome || ""} · ${p.reason || ""}`, dlqLink(p, ctx));
  return text(e.payload);
}

// dlqLink leads from a dlq_sent event to its DLQ record on the DLQ tab
// (events of releases before dlq_partition have none).
function dlqLink(p, ctx) {
  if (!Number.isInteger(p.dlq_partition) || !Number.isInteger(p.dlq_offset)) return null;
  const at = `${p.dlq_partition}:${p.dlq_offset}`;
  if (!ctx.identity.features.kafka_read) return [" · DLQ record ", el("code", {}, at)];
  return [" · ", el("a", { href: `/debug?tab=dlq&partition=${p.dlq_partition}&offset=${p.dlq_offset}`, class: "dlq-link" }, "DLQ record " + at)];
}

function tasksTable(tasks, ctx, onTrace) {
  if (!tasks.length) return note("No task carries that label.");
  return el("div", { class: "scroll" }, el("table", { class: "grid" },
    el("thead", {}, el("tr", {}, ["Time", "Task", "Worker", "Source", "Message", "Outcome", "Error"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, tasks.map((t) => el("tr", {}, el("td", {}, timeEl(t.ts_ms)),
      el("td", {}, el("button", { type: "button", class: "linkish", onclick: () => onTrace(t.task_id) }, t.task_id)),
      el("td", {}, t.worker || ""), el("td", {}, t.source), el("td", {}, t.source === "kafka" ? coords(ctx, t.alias, t.partition, t.offset) : "—"),
      el("td", {}, statusBadge(t.status)), el("td", {}, t.error || ""))))));
}
