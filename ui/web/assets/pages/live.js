// Live: tasks and events as they happen on every trusted worker of the
// fleet. Rows arrive over /ws in batches per animation frame and the DOM
// keeps at most MAX_ROWS of them, so a busy fleet cannot slow the page
// down. A worker the registry does not trust gets no socket and no token:
// it is listed as not trusted, as text. A worker the registry lists as
// stopped or unreachable gets no socket either: it is shown as such, and
// a socket that drops reconnects only once the registry shows its worker
// alive (a heartbeat newer than the loss), so a dead worker's port is
// never knocked on.
import { el, timeEl, note, banner, duration, bytes, kvTable, encoded, text } from "../dom.js";
import { get } from "../api.js";
import { panel, badge } from "../render.js";
import { LiveSocket } from "../socket.js";
import { coords, statusBadge } from "./common.js";

const MAX_ROWS = 500;
const FLEET_POLL_MS = 5000; // re-read the registry: workers come back, new ones join
const LOSS_POLL_MS = 1000; // after a socket dropped, until its worker's fate is known

const connColors = { live: "green", connecting: "blue", reconnecting: "yellow", draining: "yellow", stopped: "gray", unreachable: "red", gone: "gray", "*": "gray" };

export async function mount(root, ctx) {
  const state = { mode: "tasks", paused: false, held: [], status: "", type: "", label: "" };
  const listed = await fleet(ctx);
  const workers = listed.filter((w) => w.trusted);
  const untrusted = listed.filter((w) => !w.trusted);
  const selfWorker = workers.find((w) => w.self);
  const byBase = new Map(workers.map((w) => [w.base, w]));
  const conn = el("span", { class: "muted", "aria-live": "polite" });
  const fleetList = el("ul", { class: "plain fleet-status" });
  const held = el("span", { class: "muted" });
  // Over 100 successful tasks (and 100 routine events) a second per worker,
  // the rest are counted, not sent: failures and annotations always are.
  const sampled = el("span", { class: "muted sampled", title: "A worker sends at most 100 successful tasks and 100 routine events a second to each viewer; failures, annotations and DLQ records always come through. Counts and charts elsewhere are exact." });
  const pauseBtn = el("button", { type: "button", "aria-pressed": "false" }, "Pause view");
  const statusSel = el("select", { "aria-label": "Outcome" }, ["", "ok", "failed", "timeout"].map((s) => el("option", { value: s }, s || "any outcome")));
  const typeSel = el("select", { "aria-label": "Event type" }, ["", "task_received", "executor_started", "executor_finished", "annotation", "sink_delivered", "dlq_sent", "offset_committed", "state", "runtime_health"].map((s) => el("option", { value: s }, s || "any event type")));
  const labelIn = el("input", { type: "search", placeholder: "label name=value", "aria-label": "Label filter" });
  const modeTasks = el("button", { type: "button", role: "tab", "aria-selected": "true" }, "Tasks");
  const modeEvents = el("button", { type: "button", role: "tab", "aria-selected": "false" }, "Events");
  const tbody = el("tbody");
  const thead = el("thead");
  root.append(
    el("div", { class: "toolbar" }, el("div", { role: "tablist", class: "seg" }, modeTasks, modeEvents), statusSel, typeSel, labelIn, pauseBtn, held, sampled, conn),
    el("div", { class: "muted fleet-line" }, "Workers: ", fleetList),
    ...(untrusted.length ? [untrustedNote(untrusted)] : []),
    el("div", { class: "scroll" }, el("table", { class: "grid live" }, thead, tbody)));

  const heads = {
    tasks: ["Time", "Worker", "Task", "Source", "Partition:offset", "Key", "Labels", "Outcome", "Attempts", "Duration"],
    events: ["Time", "Worker", "Type", "Kind", "Task", "Summary"],
  };
  const setHead = () => thead.replaceChildren(el("tr", {}, heads[state.mode].map((h) => el("th", { scope: "col" }, h))));

  const matches = (item) => {
    const labels = item.labels || {};
    if (state.label) {
      const [k, v] = state.label.split("=");
      const hit = Object.entries(labels).some(([lk, lv]) => lk.includes(k.trim()) && (v === undefined || String(lv).includes(v.trim())));
      if (!hit) return false;
    }
    if (state.mode === "tasks") return !state.status || item.status === state.status;
    return !state.type || item.type === state.type;
  };

  const taskRow = (t) => {
    const tr = el("tr", { class: "clickable", tabindex: 0, "data-task": t.task_id },
      el("td", {}, timeEl(t.ts_ms, true)), el("td", {}, t.worker || ""), el("td", {}, el("code", {}, t.task_id)),
      el("td", {}, t.source), el("td", {}, t.source === "kafka" ? coords(ctx, t.alias, t.partition, t.offset) : el("span", { class: "muted" }, "—")),
      el("td", {}, t.key || ""), el("td", {}, labelText(t.labels)), el("td", {}, statusBadge(t.status)),
      el("td", {}, String(t.attempts ?? "")), el("td", {}, duration(t.duration_ms || 0)));
    const open = () => openTask(ctx, t, byBase.get(t._base) || selfWorker);
    tr.addEventListener("click", (ev) => { if (!ev.target.closest("a")) open(); });
    tr.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); open(); } });
    return tr;
  };
  const eventRow = (e) => el("tr", {},
    el("td", {}, timeEl(e.ts_ms, true)), el("td", {}, e.worker || ""), el("td", {}, e.type), el("td", {}, e.kind || ""),
    el("td", {}, e.task_id ? el("a", { href: "/history?task_id=" + encodeURIComponent(e.task_id) }, el("code", {}, e.task_id)) : ""),
    el("td", { class: "summary" }, text(e.payload).slice(0, 160)));

  const rows = { tasks: [], events: [] }; // newest first, capped
  const redraw = () => {
    setHead();
    tbody.replaceChildren(...rows[state.mode].filter(matches).slice(0, MAX_ROWS).map(state.mode === "tasks" ? taskRow : eventRow));
  };
  // awaiting is a running task whose panel is on show: its finished row
  // replaces it when it arrives.
  let awaiting = "";
  const add = (items) => {
    if (awaiting) {
      const done = items.find((it) => it._kind === "tasks" && it.task_id === awaiting);
      const p = document.getElementById("detail-panel");
      if (done && p && p.dataset.running === awaiting) openTask(ctx, done, byBase.get(done._base) || selfWorker);
      if (done || !p || p.dataset.running !== awaiting) awaiting = "";
    }
    for (const kind of ["tasks", "events"]) { // newest first, at most MAX_ROWS * 2 kept
      const mine = items.filter((it) => it._kind === kind);
      if (mine.length) rows[kind] = mine.slice(-MAX_ROWS * 2).reverse().concat(rows[kind]).slice(0, MAX_ROWS * 2);
    }
    if (state.paused) return;
    let fresh = items.filter((it) => it._kind === state.mode && matches(it));
    if (!fresh.length) return;
    if (fresh.length > MAX_ROWS) fresh = fresh.slice(fresh.length - MAX_ROWS); // only the newest can stay on screen
    const make = state.mode === "tasks" ? taskRow : eventRow;
    const frag = document.createDocumentFragment();
    for (let i = fresh.length - 1; i >= 0; i--) frag.append(make(fresh[i]));
    tbody.prepend(frag);
    while (tbody.rows.length > MAX_ROWS) tbody.lastElementChild.remove();
  };

  // Backfill from this worker, then go live on every worker.
  const [tr, ev] = await Promise.all([get("/api/v1/live/task-results?limit=200"), get("/api/v1/events?limit=200")]);
  rows.tasks = (tr.results || []).map((t) => ({ ...t, _kind: "tasks", _base: location.origin }));
  rows.events = (ev.events || []).map((e) => ({ ...e, _kind: "events", _base: location.origin }));
  redraw();

  // One socket per trusted worker the registry lists alive; the others
  // are shown with their registry state and watched until they return.
  const status = new Map(); // base → connecting, live, reconnecting, draining, stopped, unreachable, gone
  const sockets = new Map(); // base → LiveSocket
  let ended = false;
  let sampledClear = 0;
  const showConn = () => {
    const live = [...status.values()].filter((v) => v === "live").length;
    conn.textContent = `${live}/${byBase.size} live`;
    fleetList.replaceChildren(...[...byBase.values()].map((w) => {
      const st = status.get(w.base) || "connecting";
      const title = st === "unreachable" ? "its heartbeat is older than three of its intervals: killed, hung or cut off; no socket is opened"
        : st === "stopped" ? "it shut down cleanly; no socket is opened" : st === "reconnecting" ? "the socket dropped: waiting for the registry to show the worker alive" : "";
      return el("li", { "data-worker": w.name, "data-conn": st, title }, el("strong", {}, w.name), " ", badge(st, connColors));
    }));
  };
  const readFleet = async () => {
    try {
      return (await get("/api/v1/fleet/workers")).workers || [];
    } catch {
      return null;
    }
  };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  // retry decides, after w's socket dropped, whether to open a new one:
  // not while the registry shows the worker draining, stopped or
  // unreachable, nor before its card has a heartbeat newer than the one
  // it had when the socket dropped (a killed worker's never moves).
  const retry = (w) => async () => {
    if (w.self) return true;
    let at = null;
    while (!ended) {
      const list = await readFleet();
      const card = list && list.find((x) => x.name === w.name);
      if (list && !card) { status.set(w.base, "gone"); showConn(); return false; }
      if (card && gone(card.state)) { status.set(w.base, card.state); showConn(); return false; }
      if (card && card.state === "draining") { status.set(w.base, "draining"); showConn(); }
      if (card && !card.heartbeat_ms && card.state !== "draining") return true; // a static peer: plain backoff
      if (card && at === null) at = card.heartbeat_ms;
      else if (card && card.state !== "draining" && card.heartbeat_ms > at) return true;
      await sleep(LOSS_POLL_MS);
    }
    return false;
  };
  const open = (w) => {
    sockets.set(w.base, new LiveSocket(w.base, { subscribe: ["tasks", "events"] }, (frames, base) => {
      const items = [];
      for (const f of frames) {
        if (f.stream === "tasks") items.push({ ...f.data, worker: f.data.worker || byBase.get(base)?.name, _kind: "tasks", _base: base });
        else if (f.stream === "events") items.push({ ...f.data, _kind: "events", _base: base });
        else if (f.stream === "dropped") conn.textContent = `missed ${f.data.count} items: the worker's live stream overflowed`;
        else if (f.stream === "error" && f.data?.error === "too_slow") conn.textContent = "this page fell behind the live stream and was disconnected; reconnecting (items in between are missed)";
        else if (f.stream === "sampled") {
          sampled.textContent = sampledText(f.data, byBase.get(base)?.name);
          clearTimeout(sampledClear); // a worker sends one a second while it samples: gone when the rate drops
          sampledClear = setTimeout(() => { sampled.textContent = ""; }, 3000);
        }
      }
      if (state.paused) { state.held.push(...items); held.textContent = `${state.held.length} new while paused`; }
      add(items);
    }, (s, base) => {
      if (s === "gone") sockets.delete(base);
      else status.set(base, s);
      showConn();
    }, retry(w)));
  };
  for (const w of workers) {
    if (gone(w.state)) status.set(w.base, w.state);
    else open(w);
  }
  showConn();
  // Workers that come back (a restart) or join get a socket; a gone one
  // keeps its registry state on show.
  const poll = setInterval(async () => {
    const list = await fleet(ctx).catch(() => null);
    if (!list || ended) return;
    for (const w of list.filter((x) => x.trusted)) {
      if (!byBase.has(w.base)) byBase.set(w.base, w);
      if (sockets.has(w.base)) continue;
      if (gone(w.state)) status.set(w.base, w.state);
      else { byBase.set(w.base, w); open(w); }
    }
    showConn();
  }, FLEET_POLL_MS);

  const setMode = (m) => {
    state.mode = m;
    modeTasks.setAttribute("aria-selected", String(m === "tasks"));
    modeEvents.setAttribute("aria-selected", String(m === "events"));
    statusSel.hidden = m !== "tasks";
    typeSel.hidden = m !== "events";
    redraw();
  };
  modeTasks.onclick = () => setMode("tasks");
  modeEvents.onclick = () => setMode("events");
  statusSel.onchange = () => { state.status = statusSel.value; redraw(); };
  typeSel.onchange = () => { state.type = typeSel.value; redraw(); };
  labelIn.oninput = () => { state.label = labelIn.value.trim(); redraw(); };
  pauseBtn.onclick = () => {
    state.paused = !state.paused;
    pauseBtn.textContent = state.paused ? "Resume view" : "Pause view";
    pauseBtn.setAttribute("aria-pressed", String(state.paused));
    if (!state.paused) { state.held = []; held.textContent = ""; redraw(); }
  };
  setMode("tasks");

  const want = ctx.params.get("task");
  if (want) {
    const t = rows.tasks.find((r) => r.task_id === want);
    if (t) openTask(ctx, t, selfWorker);
    else if (await openRunning(ctx, want)) awaiting = want;
    else openTaskById(ctx, want);
  }
  return () => { ended = true; clearInterval(poll); clearTimeout(sampledClear); sockets.forEach((s) => s.close()); };
}

// untrustedNote lists the workers Live does not stream from: a card in the
// shared folder may name any URL, so only origins the operator trusts
// (fleet.trusted_urls, static peers) get the token. Names and URLs are text.
function untrustedNote(list) {
  return banner("warn",
    el("p", {}, `Not streamed from ${list.length === 1 ? "1 worker" : list.length + " workers"}: not trusted, so this page sends ${list.length === 1 ? "it" : "them"} no request and never the UI token. A card in the shared folder can name any URL; to stream from a worker, list its origin in `, el("code", {}, "fleet.trusted_urls"), "."),
    el("ul", { class: "plain untrusted" }, list.map((w) => el("li", { "data-untrusted": w.name },
      el("strong", {}, w.name), " ", el("code", {}, w.url), " ", badge("not trusted", { "*": "yellow" })))));
}

// sampledText says what a worker's last "sampled" frame means: of its
// successful tasks (and routine events) this second, 1 in N is listed.
function sampledText(d, worker) {
  const part = (notSent, sent, what) => {
    if (!notSent) return "";
    const all = notSent + (sent || 0);
    const ratio = sent ? `1 in ${Math.round(all / sent).toLocaleString()}` : "none";
    return `${what}: showing ${ratio} at this rate (${all.toLocaleString()} in the last second, ${notSent.toLocaleString()} not listed)`;
  };
  const sent = d.sent || {};
  const parts = [part(d.tasks, sent.tasks, "successful tasks"), part(d.events, sent.events, "routine events")].filter(Boolean);
  return parts.length ? `${worker ? worker + ": " : ""}${parts.join("; ")}; over ${d.per_second}/s the rest are counted, not listed` : "";
}

function labelText(labels) {
  return Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join(" ");
}

// openTaskById opens the panel of a task Live may not list (an older one,
// another worker's, one still running): its row is rebuilt from its trace,
// which this worker reads across the cluster (api.md, "Fleet-wide trace").
export async function openTaskById(ctx, id) {
  let tr;
  try {
    tr = await get("/api/v1/debug/trace?task_id=" + encodeURIComponent(id));
  } catch (err) {
    panel(`Task ${id}`, banner("error", "Trace unavailable: " + err.message));
    return;
  }
  const evs = tr.events || [];
  if (!evs.length) {
    panel(`Task ${id}`, note("No event of this task was found in the cluster's history."),
      el("p", {}, el("a", { href: "/history?task_id=" + encodeURIComponent(id), class: "trace-link" }, "Trace it in History")));
    return;
  }
  const pl = (e) => (e && e.payload && typeof e.payload === "object" ? e.payload : {});
  const rec = pl(evs.find((e) => e.type === "task_received"));
  const fin = evs.filter((e) => e.type === "executor_finished");
  const last = fin.length ? pl(fin[fin.length - 1]) : null;
  const labels = {};
  for (const e of evs) Object.assign(labels, e.labels || {});
  openTask(ctx, {
    task_id: id, ts_ms: evs[evs.length - 1].ts_ms, worker: (fin[fin.length - 1] || evs[0]).worker, source: rec.source || "",
    alias: rec.alias || "", partition: rec.partition ?? -1, offset: rec.offset ?? -1, key: rec.key ?? "", labels,
    status: last ? last.status : "running", attempts: fin.length, duration_ms: fin.reduce((a, e) => a + (pl(e).duration_ms || 0), 0),
    error: last?.error || "", output_size_bytes: last?.output_size_bytes || 0,
  }, null, tr);
}

// openTask shows a task's detail: its row, then its trace from the worker
// that ran it (attempts, stderr, annotations, where the result went) and,
// for a Kafka message, the message itself. A trace already read is given.
export async function openTask(ctx, t, worker, trace) {
  const body = el("div", { class: "loading" }, "Loading the trace…");
  const p = panel(`Task ${t.task_id}`,
    el("dl", { class: "facts" },
      fact("Outcome", statusBadge(t.status)), fact("Worker", t.worker || worker?.name || ""), fact("Source", t.source),
      fact("Message", t.source === "kafka" ? el("span", {}, t.alias, " ", coords(ctx, t.alias, t.partition, t.offset)) : "—"),
      fact("Key", t.key || "—"), fact("Attempts", String(t.attempts)), fact("Duration", duration(t.duration_ms || 0)),
      fact("Finished", timeEl(t.ts_ms)), fact("Output", bytes(t.output_size_bytes || 0) + " (its tail is under each attempt that kept one)"),
      t.error ? fact("Error", el("span", { class: "error" }, t.error)) : null),
    el("h3", {}, "Labels"), kvTable(t.labels),
    el("p", {}, el("a", { href: "/history?task_id=" + encodeURIComponent(t.task_id), class: "trace-link" }, "Open the full trace in History")),
    body);
  const base = worker && !worker.self && worker.trusted ? worker.base : "";
  try {
    const tr = trace || await get("/api/v1/debug/trace?task_id=" + encodeURIComponent(t.task_id), base);
    if (!p.isConnected) return;
    body.replaceWith(traceSummary(tr.events || []));
  } catch (err) {
    body.replaceWith(banner("error", "Trace unavailable: " + err.message));
  }
  if (t.source === "kafka" && ctx.identity.features.kafka_read && !base) {
    try {
      const rec = await get(`/api/v1/debug/kafka/${encodeURIComponent(t.alias)}/message?partition=${t.partition}&offset=${t.offset}`);
      if (p.isConnected) p.querySelector(".panel-body").append(el("h3", {}, "Stdin (the message)"), el("pre", { class: "preview" }, encoded(rec.payload, rec.payload_encoding, 2000)));
    } catch (err) {
      if (p.isConnected) p.querySelector(".panel-body").append(note("Message unavailable: " + err.message));
    }
  }
}

// openRunning shows a task that runs now on this worker (not yet among
// the finished ones): what the running tasks' list says of it and its
// trace so far (received, started). False when it does not run here.
async function openRunning(ctx, id) {
  let r;
  try {
    r = (await get("/api/v1/running?task_id=" + encodeURIComponent(id))).tasks[0];
  } catch {
    return false;
  }
  if (!r) return false;
  const body = el("div", { class: "loading" }, "Loading the trace so far…");
  const p = panel(`Task ${id}`,
    el("dl", { class: "facts" },
      fact("Outcome", badge("running", { running: "blue" })), fact("Worker", ctx.identity.worker), fact("Source", r.source),
      fact("Message", r.alias ? el("span", {}, r.alias, " ", coords(ctx, r.alias, r.partition, r.offset)) : r.request_id ? ["request ", el("code", {}, r.request_id)] : "—"),
      fact("Key", r.key === "" ? "—" : encoded(r.key, r.key_encoding, 200)),
      fact("Attempt", r.attempt === 0 ? "waiting for an executor slot" : r.attempt_ended ? `${r.attempt} ended; the next waits for its backoff or an executor slot` : String(r.attempt)),
      fact("Running for", el("span", { class: "running-for" }, duration(r.elapsed_ms))), fact("Started", timeEl(r.started_at_ms))),
    note("Still running: this is what is known so far. The panel shows the outcome, output and destination once the task finishes."),
    body);
  p.dataset.running = id;
  try {
    const tr = await get("/api/v1/debug/trace?task_id=" + encodeURIComponent(id));
    if (p.isConnected) body.replaceWith(traceSummary(tr.events || []));
  } catch (err) {
    body.replaceWith(banner("error", "Trace unavailable: " + err.message));
  }
  return true;
}

const fact = (k, v) => [el("dt", {}, k), el("dd", {}, v)];

function traceSummary(events) {
  const payload = (e) => (e.payload && typeof e.payload === "object" ? e.payload : {});
  const attempts = events.filter((e) => e.type === "executor_finished");
  const notes = events.filter((e) => e.type === "annotation");
  const dest = events.filter((e) => e.type === "sink_delivered" || e.type === "dlq_sent");
  const first = events[0]?.ts_ms;
  return el("div", {},
    el("h3", {}, "Attempts"),
    attempts.length ? el("ol", { class: "attempts" }, attempts.map((e) => {
      const a = payload(e);
      return el("li", {}, statusBadge(a.status), ` exit ${a.exit_code ?? "?"} · ${duration(a.duration_ms || 0)}`, a.error ? el("div", { class: "error small" }, a.error) : null,
        a.stdout_tail ? el("details", {}, el("summary", {}, "stdout tail"), el("pre", { class: "preview" }, a.stdout_tail))
          : a.status === "ok" && a.output_size_bytes ? el("div", { class: "small muted" }, "stdout tail not kept: a successful first attempt keeps none on disk (history.task_detail)") : null,
        a.stderr_tail ? el("details", { open: a.status !== "ok" }, el("summary", {}, "stderr tail"), el("pre", { class: "preview" }, a.stderr_tail)) : null);
    })) : note("No executor attempts recorded."),
    el("h3", {}, "Annotations"),
    notes.length ? el("ul", { class: "plain" }, notes.map((e) => el("li", {}, el("code", {}, e.kind), " ", text(e.payload)))) : note("None."),
    el("h3", {}, "Destination"),
    dest.length ? el("ul", { class: "plain" }, dest.map((e) => {
      const d = payload(e);
      return el("li", {}, e.type === "dlq_sent" ? [statusBadge("dlq"), ` ${d.outcome || ""} · ${d.reason || ""}`] : `sink ${d.sink}`);
    })) : note("Not delivered (yet): probes and HTTP requests without sinks go nowhere."),
    el("h3", {}, "Timeline"),
    el("ol", { class: "timeline" }, events.map((e) => el("li", {}, timeEl(e.ts_ms, true), ` ${e.type}${e.kind ? " " + e.kind : ""}`,
      first ? el("span", { class: "muted" }, ` +${duration(e.ts_ms - first)}`) : null))));
}

// gone are the registry states of a worker that serves nothing: Live
// opens no socket to it and says so.
const gone = (state) => state === "stopped" || state === "unreachable";

// fleet lists the fleet's workers (from the registry when this worker has
// one) as {name, url, base, self, state, trusted, heartbeat_ms}; this
// worker alone otherwise. This worker is always at location.origin and
// trusted; any other is trusted only when the registry says "trusted":
// true (its origin is in fleet.trusted_urls or a static peer's), so a
// registry without the field trusts none. Only trusted workers may get a
// request, and with it the token; two trusted entries of one origin are
// one worker (a live one before a stopped one).
async function fleet(ctx) {
  const self = { name: ctx.identity.worker, url: location.origin, base: location.origin, self: true, trusted: true, state: "running", heartbeat_ms: 0 };
  let data = null;
  try {
    data = await get("/api/v1/fleet/workers");
  } catch (err) {
    if (err.status === 404) return [self];
    throw err;
  }
  const out = [];
  const byBase = new Map();
  for (const w of data?.workers || []) {
    if (!/^https?:\/\//.test(w.url || "")) continue;
    let base;
    try { base = new URL(w.url).origin; } catch { continue; }
    const entry = w.self || base === location.origin
      ? { ...self, state: w.self ? w.state : self.state, heartbeat_ms: w.self ? w.heartbeat_ms : 0 }
      : { name: String(w.name), url: w.url, base, self: false, state: w.state, trusted: w.trusted === true, heartbeat_ms: w.heartbeat_ms || 0 };
    if (!entry.trusted) { out.push(entry); continue; }
    const had = byBase.get(entry.base);
    if (had && !(gone(had.state) && !gone(entry.state)) && !(entry.self && !had.self)) continue;
    if (had) out.splice(out.indexOf(had), 1, entry);
    else out.push(entry);
    byBase.set(entry.base, entry);
  }
  if (!byBase.has(location.origin)) out.unshift(self);
  return out;
}
