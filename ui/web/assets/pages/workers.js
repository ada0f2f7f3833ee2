// Workers: every worker the registry lists (GET /api/v1/fleet/workers),
// with the load each one wrote on its card at its last heartbeat: a card
// is all the table needs, so a stopped or unreachable worker shows as such
// instead of as an error. "Running now" lists each live worker's running
// tasks (GET /api/v1/running?scope=fleet): this worker asks every trusted
// peer for its list and answers them all, naming the workers it could not
// list and why; the browser asks no other worker.
import { el, note, banner, num, timeEl, duration, encoded } from "../dom.js";
import { get } from "../api.js";
import { badge } from "../render.js";

const REFRESH_MS = 2000;
const RUNNING_LIMIT = 100;

const stateColors = { running: "green", starting: "blue", draining: "yellow", stopped: "gray", unreachable: "red", "*": "gray" };
const intakeColors = { flowing: "green", paused: "blue", backpressure: "yellow", executor_unavailable: "red", http_only: "gray" };
const intakeNames = { flowing: "flowing", paused: "paused", backpressure: "backpressure", executor_unavailable: "executor unavailable", http_only: "HTTP only" };
const breakerColors = { closed: "green", open: "red", "half-open": "yellow" };
// Live states: the worker writes its card; a load on any other card is
// stale or absent, and shows as "–".
const live = new Set(["starting", "running", "draining"]);
const dash = () => el("span", { class: "muted", title: "not reported" }, "–");

export async function mount(root) {
  const summary = el("p", { class: "muted", "aria-live": "polite" });
  const tbody = el("tbody");
  const msg = el("div");
  const heads = ["Worker", "State", "Heartbeat", "Version", "Partitions", "In flight", "Throughput", "Lag", "Intake", "Breakers", "UI"];
  root.append(summary, msg,
    el("div", { class: "scroll" }, el("table", { class: "grid workers" },
      el("thead", {}, el("tr", {}, heads.map((h) => el("th", { scope: "col" }, h)))), tbody)),
    note("Each worker writes its card into the shared folder at every heartbeat, with its load then: partitions owned, messages and executors in flight, tasks per second since its previous heartbeat, consumer lag, intake and sink breakers. A card whose heartbeat is older than three of its worker's intervals is unreachable (killed, hung or cut off); a clean shutdown leaves it stopped. Cards stay listed for fleet.registry.card_retention (default 24 h)."));
  const running = el("div", { class: "running-now" });
  root.append(el("h2", {}, "Running now"), running,
    note(`The tasks each worker runs at this moment, longest-running first (at most ${RUNNING_LIMIT} a worker): where the message came from, its key, the executor attempt (0: waiting for an executor slot) and how long it has run. This worker asks the others, with the token, only when their origin is trusted (fleet.trusted_urls or a static peer), and names those it could not list.`));

  let fetchedAt = 0;
  let workers = [];
  const draw = () => {
    const since = Date.now() - fetchedAt;
    const counts = {};
    for (const w of workers) counts[w.state] = (counts[w.state] || 0) + 1;
    summary.textContent = `${workers.length} worker${workers.length === 1 ? "" : "s"}: ` +
      Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ") + ".";
    tbody.replaceChildren(...workers.map((w) => row(w, since)));
  };
  const refresh = async () => {
    try {
      workers = (await get("/api/v1/fleet/workers")).workers || [];
      fetchedAt = Date.now();
      msg.replaceChildren();
      draw();
    } catch (err) {
      if (err.status === 404) msg.replaceChildren(banner("info", "This worker runs no registry: it lists no other workers."));
      else if (err.status !== 401) msg.replaceChildren(banner("error", "Cannot read the workers list: " + err.message));
    }
  };
  // One running-now request at a time: a peer that does not answer holds
  // it for 3 s, and the page does not pile up requests meanwhile.
  let asking = false;
  const refreshRunning = async () => {
    if (asking) return;
    asking = true;
    try {
      drawRunning(running, await get(`/api/v1/running?scope=fleet&limit=${RUNNING_LIMIT}`));
    } catch (err) {
      if (err.status !== 401) running.replaceChildren(banner("error", "Cannot read the running tasks: " + err.message));
    } finally {
      asking = false;
    }
  };
  await Promise.all([refresh(), refreshRunning()]);
  const timer = setInterval(() => { refresh(); refreshRunning(); }, REFRESH_MS);
  const tick = setInterval(draw, 1000); // heartbeat ages move between reads
  return () => { clearInterval(timer); clearInterval(tick); };
}

// drawRunning draws one block per worker of the answer: this worker's,
// each peer's that answered, then the workers not listed, with why.
function drawRunning(box, r) {
  const head = (name, self) => el("h3", {}, name, self ? el("span", { class: "muted" }, " (this worker)") : null);
  box.replaceChildren(runningBlock(head(r.worker, true), r, null),
    ...(r.peers || []).map((p) => runningBlock(head(p.worker, false), p, p.url)),
    ...(r.missing || []).map((m) => el("section", { "data-running-worker": m.worker, "data-skipped": "true" },
      head(m.worker, false), el("p", { class: "muted" }, `Not listed: ${m.reason}.`))));
}

// runningBlock is one worker's tasks; url is a peer's UI, where its task
// links open Live.
function runningBlock(head, r, url) {
  const tasks = r.tasks || [];
  const sum = el("p", { class: "muted running-total" }, r.total === 0 ? "Nothing running." :
    `${num(r.total)} task${r.total === 1 ? "" : "s"} running` + (r.total > tasks.length ? `, the ${num(tasks.length)} longest-running shown.` : "."));
  if (!tasks.length) return el("section", { "data-running-worker": r.worker }, head, sum);
  const link = (id) => !url ? el("a", { href: "/live?task=" + encodeURIComponent(id) }, id)
    : /^https?:\/\//.test(url) ? el("a", { href: url.replace(/\/+$/, "") + "/live?task=" + encodeURIComponent(id), rel: "noreferrer", target: "_blank" }, id) : id;
  return el("section", { "data-running-worker": r.worker }, head, sum,
    el("div", { class: "scroll" }, el("table", { class: "grid running" },
      el("thead", {}, el("tr", {}, ["Task", "Source", "Where", "Key", "Attempt", "Running for"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, tasks.map((t) => el("tr", { "data-task": t.task_id },
        el("td", {}, el("code", {}, link(t.task_id))),
        el("td", {}, badge(t.source, { kafka: "blue", http: "green", probe: "gray", "*": "gray" })),
        el("td", {}, where(t)),
        el("td", {}, t.key === "" && t.key_encoding !== "base64" ? el("span", { class: "muted" }, "–") : encoded(t.key, t.key_encoding, 80),
          t.key_truncated ? el("span", { class: "muted small" }, " (first 1 KiB)") : null),
        el("td", { class: "num" }, t.attempt === 0 ? el("span", { class: "muted", title: "waiting for an executor slot" }, "waiting")
          : t.attempt_ended ? el("span", { title: `attempt ${t.attempt} ended; the next waits for its backoff or an executor slot` }, `${t.attempt}, ended`) : String(t.attempt)),
        el("td", { class: "num", title: "since " + new Date(t.started_at_ms).toISOString() }, duration(t.elapsed_ms))))))));
}

// where is a task's origin: the Kafka alias partition:offset, or the
// ingress request id.
function where(t) {
  if (t.alias) return el("span", {}, el("code", {}, t.alias), ` ${t.partition}:${t.offset}`);
  if (t.request_id) return el("span", {}, "request ", el("code", {}, t.request_id));
  return el("span", { class: "muted" }, "–");
}

// row is one worker; since is how long ago the list was read (ages grow).
function row(w, since) {
  const l = live.has(w.state) ? w.load : null;
  const cell = (v, title) => el("td", { class: "num", title }, v === null || v === undefined ? dash() : v);
  const age = w.heartbeat_age_ms === null || w.heartbeat_age_ms === undefined ? null : w.heartbeat_age_ms + since;
  return el("tr", { "data-worker": w.name, "data-state": w.state },
    el("td", {}, el("strong", {}, w.name), w.self ? el("span", { class: "muted" }, " (this worker)") : null,
      el("div", { class: "muted small" }, w.cluster)),
    el("td", {}, badge(w.state, stateColors)),
    el("td", { class: "num" }, age === null ? dash() : el("span", { class: "hb-age" }, ago(age)),
      w.heartbeat_ms ? el("div", { class: "muted small" }, timeEl(w.heartbeat_ms, true)) : null),
    el("td", {}, w.release ? el("code", {}, w.release) : dash()),
    cell(l && l.partitions !== null ? num(l.partitions) : null, "source partitions owned"),
    cell(l ? inflight(l) : null, "Kafka messages running · executors busy / pool size"),
    cell(l ? `${l.tasks_per_second.toFixed(2)} tasks/s` : null, "tasks finished per second between its last two heartbeats"),
    cell(l && l.lag !== null ? msgs(l.lag) : null, "messages of its partitions not yet committed"),
    el("td", {}, l ? [intakeBadge(l.intake),
      l.stalled_partitions ? el("div", { class: "small error" }, `${num(l.stalled_partitions)} stall-paused`) : null] : dash()),
    el("td", {}, l && Object.keys(l.breakers || {}).length ? el("ul", { class: "plain breakers" }, Object.entries(l.breakers).map(([sink, st]) =>
      el("li", { "data-sink": sink }, el("code", {}, sink), " ", badge(st, breakerColors)))) : dash()),
    el("td", {}, uiLink(w)));
}

function intakeBadge(state) {
  const name = intakeNames[state] || state;
  return badge(name, { [name]: intakeColors[state] || "gray" });
}

function inflight(l) {
  const exec = `${num(l.tasks_running)}/${num(l.pool_size)} executors`;
  return l.messages_in_flight === null ? exec : `${msgs(l.messages_in_flight)} · ${exec}`;
}

const msgs = (n) => `${num(n)} msg${n === 1 ? "" : "s"}`;

// uiLink links the worker's own UI; a URL the registry does not trust is
// still a plain link (opening it sends nothing of this page), marked so.
function uiLink(w) {
  if (w.self) return el("a", { href: "/" }, "this UI");
  if (!/^https?:\/\//.test(w.url || "")) return dash();
  return el("span", {}, el("a", { href: w.url, class: "worker-ui", rel: "noreferrer", target: "_blank" }, w.url.replace(/^https?:\/\//, "")),
    w.trusted ? null : [" ", badge("not trusted", { "*": "yellow" })]);
}

// ago renders an age in ms as "3 s ago", "4 min ago", "2 h ago".
function ago(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}
