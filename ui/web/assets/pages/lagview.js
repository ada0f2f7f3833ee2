// The Consumer lag page (/lag) and the Pause tab's lag card: every
// partition of the group with its offsets, lag in messages and in time,
// drain estimate, sparkline, the key holding it, its owner and state.
import { el, card, note, num, timeEl } from "../dom.js";
import { badge } from "../render.js";
import { readGroup, ago, behind, drainBadge, summary, msgs } from "./lag.js";

// sparkline draws a partition's lag over the last minutes (lag_trend, one
// point per 10 s lag read).
export function sparkline(points) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  const W = 90, H = 20;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("class", "lag-spark");
  svg.setAttribute("role", "img");
  const pts = points || [];
  const max = Math.max(1, ...pts.map((p) => p.lag));
  svg.setAttribute("aria-label", pts.length ? `lag over the last ${pts.length} reads, up to ${num(max)}` : "no lag samples yet");
  svg.dataset.n = pts.length;
  if (pts.length) {
    const t0 = pts[0].ts_ms, span = Math.max(1, pts.at(-1).ts_ms - t0);
    const xy = pts.map((p) => `${(pts.length < 2 ? W / 2 : ((p.ts_ms - t0) / span) * (W - 2) + 1).toFixed(1)},${(H - 1 - (p.lag / max) * (H - 2)).toFixed(1)}`);
    const line = document.createElementNS(NS, "polyline");
    line.setAttribute("points", xy.join(" "));
    svg.append(line);
  }
  return svg;
}

// partitionState says in a word or two what is happening to a partition.
export function partitionState(r) {
  if (r.unowned) return ["unowned", "red"];
  if (r.stalled) return ["stall-paused", "red"];
  if (r.paused) return ["paused", "blue"];
  if (r.paused === false) return ["flowing", "green"];
  return ["unknown", "gray"];
}

// ownerText names who holds a partition: a worker, a stopped worker's
// member, or nobody.
function ownerText(r) {
  if (!r.owner) return el("span", { class: "muted" }, "nobody (rebalance)");
  const who = r.owner.worker || r.owner.client_id || r.owner.member_id;
  if (r.unowned) return [who, el("span", { class: "muted" }, " (not alive)")];
  return r.mine ? [who, el("span", { class: "muted" }, " (this worker)")] : who;
}

// holding says which key holds a partition back (head_of_line: this
// worker's partitions, and with scope fleet the other owners' as they
// answered): the key, its task (a link to the Live panel, on the owner's
// UI for another worker's), its attempt, how long it has run and how many
// of its key wait behind it.
function holding(r, g) {
  const h = r.head_of_line;
  const owner = r.owner && r.owner.worker;
  if (!h) {
    const miss = !r.mine && (g.head_of_line_missing || []).find((m) => m.worker === owner);
    return el("span", { class: "muted" }, r.mine ? "–" : miss ? `not known: ${miss.reason}` : "–");
  }
  if (!h.keys.length) return el("span", { class: "muted" }, h.running || h.waiting ? "no key holds others" : "nothing");
  const k = h.keys[0];
  const task = k.task_ids[0];
  const peer = !r.mine && (g.head_of_line_peers || []).find((p) => p.worker === owner);
  const live = (id) => peer ? el("a", { href: peer.url.replace(/\/+$/, "") + "/live?task=" + encodeURIComponent(id), class: "task-link", rel: "noreferrer", target: "_blank" }, id)
    : el("a", { href: "/live?task=" + encodeURIComponent(id), class: "task-link" }, id);
  const since = k.since_ms ? `running ${ago((Date.now() - k.since_ms) / 1000)}` : "waiting for a slot";
  const attempt = k.attempt === null || k.attempt === undefined ? "" : k.attempt === 0 ? ", waiting for an executor"
    : k.attempt_ended ? `, attempt ${k.attempt} ended, the next waiting` : `, attempt ${k.attempt}`;
  return el("div", { class: "held-key", "data-key": k.key, "data-behind": k.behind, "data-attempt": k.attempt ?? "" },
    "key ", el("code", {}, k.key_encoding === "base64" ? `base64:${k.key}` : k.key), k.key_truncated ? "…" : "", " ",
    task ? live(task) : null,
    el("div", { class: "muted small" }, since, attempt, k.behind ? ` · ${num(k.behind)} of its key behind` : "",
      k.holds_commit ? " · the commit waits for it" : "",
      h.keys_holding > 1 ? ` · ${h.keys_holding - 1} more key${h.keys_holding === 2 ? "" : "s"}` : ""));
}

// lagTable lists every partition of the group with its offsets, lag,
// owner and state.
export function lagTable(g) {
  const rows = g.group_partitions || [];
  const head = ["Partition", "Owner", "Committed", "High watermark", "Lag", "Behind", "Drain", "Last minutes", "Holding it", "State"];
  return el("div", { class: "scroll" }, el("table", { class: "grid lag-table" },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows.map((r) => {
      const [st, color] = partitionState(r);
      return el("tr", { "data-partition": r.partition, "data-lag": r.lag ?? "", "data-lag-seconds": r.lag_seconds ?? "", "data-state": st },
        el("td", { class: "num" }, r.partition), el("td", {}, ownerText(r)),
        el("td", { class: "num" }, r.committed_offset === null ? "none" : num(r.committed_offset)),
        el("td", { class: "num" }, r.high_watermark === null ? "–" : num(r.high_watermark)),
        el("td", { class: "num" }, r.lag === null ? "–" : msgs(r.lag)),
        el("td", { class: "num behind", title: r.oldest_unconsumed_ms ? "oldest unconsumed message produced " + new Date(r.oldest_unconsumed_ms).toLocaleString() : "" }, r.lag === null ? "–" : behind(r.lag_seconds)),
        el("td", {}, drainBadge(r.drain)),
        el("td", {}, sparkline(r.lag_trend)),
        el("td", { class: "holding" }, holding(r, g)),
        el("td", {}, badge(st, { [st]: color }), r.unowned ? [" since ", timeEl(r.unowned_since_ms, true)] : null));
    }))));
}

// totalLine: the group's lag in messages and in time, where it is going,
// and when the offsets were read.
export function totalLine(g) {
  return el("p", { class: "lag-total" }, "Total lag ", el("strong", { "data-lag": g.total_lag ?? "" }, g.total_lag === null ? "–" : msgs(g.total_lag)),
    " · ", el("strong", { class: "lag-seconds", "data-lag-seconds": g.lag_seconds ?? "" }, behind(g.lag_seconds)), " · ", drainBadge(g.drain),
    " · ", summary(g), " · read ", timeEl(g.offsets_read_at_ms, true));
}

// oneAtATime runs f unless its previous run is still under way: a read
// that waits on the brokers (10 s) or a peer (3 s) is not piled up on.
function oneAtATime(f) {
  let busy = false;
  return async () => {
    if (busy) return;
    busy = true;
    try { await f(); } finally { busy = false; }
  };
}

// lagPanel is the Pause tab's card: the whole group's lag, re-read every
// 5 s while the tab is open.
export async function lagPanel(root) {
  const body = el("div", { "aria-live": "polite" });
  root.append(card("Consumer lag of the group", body,
    note("Every partition of the topic, whoever owns it, with offsets read from the brokers now. During a pause the paused partitions' lag grows as messages arrive; it falls back once intake resumes and the group commits. Another worker's paused state is what its card said at its last heartbeat.")));
  const load = oneAtATime(async () => {
    const { g, off } = await readGroup("fleet");
    if (off) { body.replaceChildren(note(off)); return; }
    body.replaceChildren(totalLine(g), lagTable(g));
  });
  await load().catch(() => {});
  const timer = setInterval(() => load().catch(() => {}), 5000);
  return () => clearInterval(timer);
}

// mount is the Consumer lag page (/lag): the group's lag per partition in
// messages and in time, where each is going, and who owns it; re-read
// every 5 s. Shown on every worker with a Kafka source, gated only by
// ui.kafka_read_enabled like the other Kafka reads.
export async function mount(root, ctx) {
  const f = ctx.identity.features;
  if (!f.kafka_source) {
    root.append(note("This worker has no Kafka source: there is no consumer lag to show."));
    return null;
  }
  const body = el("div", { "aria-live": "polite" });
  root.append(card("Every partition of the group", body,
    note("Offsets are read from the brokers now. ", el("strong", {}, "Behind"), " is how old the oldest message not yet consumed is (the timestamp of the record at the committed offset, read at most every 10 s per partition). ",
      el("strong", {}, "Drain"), " compares what was consumed and what arrived over the last 5 minutes: how long until the lag is 0 at that pace, or why it will not be. ",
      el("strong", {}, "Last minutes"), " is the lag at each 10 s read. ",
      el("strong", {}, "Holding it"), " names the key whose message runs while later messages of that key wait (messages of one key run in order) or that the commit waits for, with its attempt; its task opens on Live (on the owner's UI for another worker's partition, which this worker asks when that worker is trusted)."),
    note("Limits: the timestamp is the producer's, so a producer's clock skew or a replayed old message shows as lag; the committed offset moves with each commit (sources.kafka.commit_interval), so a draining partition looks up to that much older; a burst or a pause inside the 5 minutes moves the estimate. Another worker's paused state is what its card said at its last heartbeat."),
    f.consume_pause ? el("p", {}, "To hold this worker's intake: ", el("a", { href: "/debug?tab=pause" }, "Debug › Consume pause"), ".") : null));
  const load = oneAtATime(async () => {
    const { g, off } = await readGroup("fleet");
    if (off) { body.replaceChildren(note(off)); return; }
    body.replaceChildren(totalLine(g), lagTable(g));
  });
  await load().catch((err) => { if (err.status !== 401) body.replaceChildren(note("The group could not be read: " + err.message)); });
  const timer = setInterval(() => load().catch(() => {}), 5000);
  return () => clearInterval(timer);
}
