// Probe tab: run a payload (typed, uploaded, or a Kafka record fetched by
// coordinates) through the live handler and show the result rendered
// through the handler's probe details, the raw JSON one click away.
import { el, card, note, banner, kvTable, duration, encoded, text, autoLabel } from "../dom.js";
import { get, post } from "../api.js";
import { table, tableRow, columnsOf, cell, badge, formatted, expand, placeholder, renderCustom } from "../render.js";
import { statusBadge } from "./common.js";

export async function mount(root, ctx) {
  const payload = el("textarea", { id: "probe-payload", rows: 8, spellcheck: "false", placeholder: "message payload" });
  const key = el("input", { type: "text", id: "probe-key", placeholder: "(none)" });
  const labels = el("input", { type: "text", id: "probe-labels", placeholder: "name=value, name=value" });
  const file = el("input", { type: "file", id: "probe-file" });
  const from = el("div");
  const out = el("div", { "aria-live": "polite" });
  let b64 = null; // an uploaded or fetched payload that is not UTF-8
  let headers = [];

  file.onchange = async () => {
    const f = file.files[0];
    if (!f) return;
    const buf = new Uint8Array(await f.arrayBuffer());
    try {
      payload.value = new TextDecoder("utf-8", { fatal: true }).decode(buf);
      b64 = null;
    } catch {
      let s = "";
      for (const c of buf) s += String.fromCharCode(c);
      b64 = btoa(s);
      payload.value = `(binary file ${f.name}, ${buf.length} bytes, sent as base64)`;
    }
  };
  payload.oninput = () => { b64 = null; };

  const p = ctx.params;
  if (p.get("alias") && p.get("partition") !== null) {
    const alias = p.get("alias");
    try {
      const rec = await get(`/api/v1/debug/kafka/${encodeURIComponent(alias)}/message?partition=${encodeURIComponent(p.get("partition"))}&offset=${encodeURIComponent(p.get("offset"))}`);
      if (rec.payload_encoding === "base64") { b64 = rec.payload; payload.value = `(binary record, ${rec.payload_size_bytes} bytes, sent as base64)`; } else payload.value = rec.payload;
      key.value = rec.key ?? "";
      headers = rec.headers || [];
      from.replaceChildren(banner("info", `Prefilled from ${alias} ${rec.partition}:${rec.offset}`, headers.length ? ` with ${headers.length} header(s)` : "", "."));
    } catch (err) {
      from.replaceChildren(banner("error", `Cannot read ${alias} ${p.get("partition")}:${p.get("offset")}: ${err.message}`));
    }
  }

  const run = async (ev) => {
    ev.preventDefault();
    out.replaceChildren(note("Running…"));
    const body = { payload: b64 ?? payload.value, payload_encoding: b64 ? "base64" : "utf-8", headers, labels: {} };
    if (key.value) body.key = key.value;
    for (const pair of labels.value.split(",")) {
      const [k, ...v] = pair.split("=");
      if (k.trim()) body.labels[k.trim()] = v.join("=").trim();
    }
    try {
      const res = await post("/api/v1/debug/probe", body);
      out.replaceChildren(...(res.tasks || []).map((t) => result(t, res.probe_details, ctx)), ...(res.tasks?.length ? [] : [note("The handler arranged no task for this payload.")]));
    } catch (err) {
      out.replaceChildren(banner("error", "Probe failed: " + err.message));
    }
  };
  root.append(card("Probe", from,
    el("form", { class: "stack", onsubmit: run },
      el("label", { for: "probe-payload" }, "Payload"), payload,
      el("div", { class: "row" }, el("span", {}, el("label", { for: "probe-file" }, "or upload a file "), file)),
      el("div", { class: "row" }, el("label", { for: "probe-key" }, "Key"), key, el("label", { for: "probe-labels" }, "Labels"), labels),
      el("div", {}, el("button", { type: "submit", id: "probe-run" }, "Run probe"))),
    note("Runs through the live handler and executor pool as a message of source \"probe\": no sink, no DLQ, no offset moves.")), out);
}

function result(t, details, ctx) {
  const raw = el("details", { class: "raw" }, el("summary", {}, "Raw JSON"), el("pre", {}, JSON.stringify(t, null, 2)));
  const fields = details?.fields || [];
  const data = t.data;
  let rendered;
  if (fields.length && data && typeof data === "object" && !Array.isArray(data)) rendered = renderDetails(data, fields, ctx);
  else rendered = el("pre", { class: "preview output" }, encoded(t.output, t.output_encoding, 20000));
  return el("section", { class: "card probe-result", "data-status": t.status },
    el("h2", {}, "Result ", statusBadge(t.status)),
    el("dl", { class: "facts" },
      el("dt", {}, "Task"), el("dd", {}, el("code", {}, t.task_id)),
      el("dt", {}, "Exit"), el("dd", {}, String(t.exit_code)),
      el("dt", {}, "Attempts"), el("dd", {}, String(t.attempts)),
      el("dt", {}, "Time"), el("dd", {}, duration(t.duration_ms)),
      t.error ? [el("dt", {}, "Error"), el("dd", { class: "error" }, t.error)] : null),
    el("h3", {}, "Output"), rendered,
    el("h3", {}, "Stderr"), t.stderr ? el("pre", { class: "preview stderr" }, encoded(t.stderr, t.stderr_encoding, 8192)) : note("(empty)"),
    el("h3", {}, "Annotations"), t.annotations?.length ? el("ul", { class: "plain" }, t.annotations.map((a) => el("li", {}, el("code", {}, a.kind), " ", text(a.payload)))) : note("None."),
    el("h3", {}, "Labels"), kvTable(t.labels), raw);
}

// renderDetails renders stdout's JSON object by the declared fields.
export function renderDetails(data, fields, ctx) {
  const bases = ctx.identity.link_bases || {};
  return el("div", { class: "details" }, fields.map((f) => {
    const label = f.label || autoLabel(f.name);
    if (!Object.hasOwn(data, f.name)) return el("section", { class: "field" }, el("h4", {}, label), note("(not in this output)"));
    return el("section", { class: "field", "data-field": f.name }, el("h4", {}, label), fieldView(data[f.name], f, bases));
  }));
}

function fieldView(v, f, bases) {
  const rowsOpts = { bases, detail: f.detail };
  const cols = () => columnsOf(f.columns, f.row_fields);
  switch (f.view) {
    case "string":
      return el("p", {}, cell(v, { link_template: f.link_template, format: f.format, hint: f.hint }, { bases, key: f.name }));
    case "badge":
      return badge(v, f.badge_colors);
    case "keyvalue":
      return v && typeof v === "object" ? kvTable(v) : el("p", {}, text(v));
    case "table":
      return table(Array.isArray(v) ? v : [], cols(), rowsOpts);
    case "tables":
      return el("div", {}, Object.entries(v && typeof v === "object" ? v : {}).map(([name, rows]) =>
        el("div", { class: "subtable" }, el("h5", {}, name), table(Array.isArray(rows) ? rows : [], cols(), rowsOpts))));
    case "tree": {
      const c = cols();
      const t = table([], c, rowsOpts);
      const body = t.querySelector("tbody");
      body.replaceChildren();
      const walk = (rows, depth) => {
        for (const r of Array.isArray(rows) ? rows : []) {
          body.append(tableRow(r, c, rowsOpts, depth));
          walk(r && r.children, depth + 1);
        }
      };
      walk(v, 0);
      return t;
    }
    case "custom":
      return renderCustom(f.renderer, v, undefined, f.name) || el("pre", { class: "preview" }, formatted(v, null));
    default:
      return placeholder(`needs a newer UI (unsupported view '${f.view}')`);
  }
}

export { expand };
