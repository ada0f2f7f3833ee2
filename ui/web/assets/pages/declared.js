// Declared pages (/p/<slug>): the handler's widgets over the read APIs.
// Row widgets refresh over /ws as matching events, annotations or tasks
// arrive; stat widgets poll every 30 s. What this release does not know
// shows a placeholder instead of failing.
import { el, note, banner, text, field as fieldOf, kvTable } from "../dom.js";
import { get } from "../api.js";
import { table, columnsOf, cell, badge, formatted, placeholder } from "../render.js";
import { LiveSocket } from "../socket.js";
import { metrics, sum } from "./common.js";

const VIEWS = new Set(["table", "keyvalue", "string", "badge", "stat"]);
const SOURCES = new Set(["events", "annotations", "tasks", "metrics"]);
const STAT_POLL_MS = 30000;

export async function mount(root, ctx) {
  const bases = ctx.identity.link_bases || {};
  const grid = el("div", { class: "widgets" });
  root.append(grid);
  const live = []; // widgets fed by /ws: {source, push(rows)}
  const timers = [];
  for (const w of ctx.decl.widgets || []) {
    const body = el("div", { class: "widget-body" });
    grid.append(el("section", { class: "card widget", "data-view": w.view }, el("h2", {}, w.title || w.view), body));
    const src = w.source || {};
    if (!VIEWS.has(w.view)) { body.append(placeholder(`This widget needs a newer UI (unsupported view '${w.view}').`)); continue; }
    if (!SOURCES.has(src.kind)) { body.append(placeholder(`This widget needs a newer UI (unsupported source '${src.kind}').`)); continue; }
    if ((w.view === "stat") !== (src.kind === "metrics") || (w.view === "stat" && !src.metric)) {
      body.append(placeholder("Misconfigured: a stat view needs a source with a metric field (and only stat reads metrics)."));
      continue;
    }
    if (w.view === "stat") {
      const poll = async () => {
        try {
          const m = await metrics([src.metric]);
          const v = sum(m, src.metric);
          body.replaceChildren(el("div", { class: "big stat" }, formatted(v, w.format || "number")),
            ...(m.has(src.metric) ? [] : [note(`No metric family ${src.metric} on this worker.`)]));
        } catch (err) { body.replaceChildren(banner("error", err.message)); }
      };
      await poll();
      timers.push(setInterval(poll, STAT_POLL_MS));
      continue;
    }
    const limit = src.limit || 200;
    let rows = [];
    const draw = () => body.replaceChildren(view(w, rows, bases));
    try {
      rows = await load(src, limit);
      draw();
    } catch (err) {
      body.replaceChildren(banner("error", err.message));
    }
    live.push({ src, push: (fresh) => { rows = fresh.concat(rows).slice(0, limit); draw(); } });
  }
  if (!live.length) return () => timers.forEach(clearInterval);

  const types = new Set();
  let tasks = false;
  for (const l of live) {
    if (l.src.kind === "tasks") tasks = true;
    else if (l.src.kind === "annotations") types.add("annotation");
    else for (const t of l.src.event_types || []) types.add(t);
  }
  const sub = { subscribe: [tasks ? "tasks" : null, types.size ? "events" : null].filter(Boolean), event_types: [...types] };
  const sock = new LiveSocket(location.origin, sub, (frames) => {
    for (const l of live) {
      const fresh = [];
      for (const f of frames.slice().reverse()) {
        if (l.src.kind === "tasks" && f.stream === "tasks") fresh.push(f.data);
        if (f.stream !== "events") continue;
        if (l.src.kind === "annotations" && f.data.type === "annotation" && (f.data.kind || "").startsWith(l.src.kind_prefix || "")) fresh.push(annotationRow(f.data));
        if (l.src.kind === "events" && (l.src.event_types || []).includes(f.data.type)) fresh.push(f.data);
      }
      if (fresh.length) l.push(fresh);
    }
  });
  return () => { sock.close(); timers.forEach(clearInterval); };
}

// load reads a source's rows, newest first.
async function load(src, limit) {
  switch (src.kind) {
    case "tasks":
      return (await get(`/api/v1/live/task-results?limit=${limit}`)).results || [];
    case "events":
      return (await get(`/api/v1/events?types=${encodeURIComponent((src.event_types || []).join(","))}&limit=${limit}`)).events || [];
    case "annotations": {
      // Filtered here by kind prefix, so read the most the API gives and
      // keep limit matching rows.
      const evs = (await get("/api/v1/events?types=annotation&limit=1000")).events || [];
      return evs.filter((e) => (e.kind || "").startsWith(src.kind_prefix || "")).slice(0, limit).map(annotationRow);
    }
  }
  return [];
}

// annotationRow spreads an annotation's payload onto the row; the stamped
// ts and kind win over payload keys of the same name.
function annotationRow(e) {
  const p = e.payload && typeof e.payload === "object" && !Array.isArray(e.payload) ? e.payload : { payload: e.payload };
  return { ...p, ts: new Date(e.ts_ms).toISOString(), kind: e.kind };
}

function view(w, rows, bases) {
  const newest = rows[0];
  switch (w.view) {
    case "table":
      return table(rows, columnsOf(w.columns), { bases });
    case "keyvalue": {
      if (!newest) return note("No rows yet.");
      const v = w.field ? fieldOf(newest, w.field) : newest;
      return v && typeof v === "object" ? kvTable(v) : el("p", {}, text(v));
    }
    case "string":
      if (!newest) return note("No rows yet.");
      return el("p", { class: "big" }, cell(fieldOf(newest, w.field) ?? null, { format: w.format }, { row: newest, bases, key: w.field }));
    case "badge":
      if (!newest) return note("No rows yet.");
      return el("p", {}, badge(fieldOf(newest, w.field) ?? "", w.badge_colors || {}));
  }
  return placeholder(`This widget needs a newer UI (unsupported view '${w.view}').`);
}
