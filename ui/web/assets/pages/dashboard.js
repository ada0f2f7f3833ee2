// Dashboard: throughput, outcomes, capacity, flow control, sinks, request
// counts and links. Numbers refresh over /ws (a task or state frame
// triggers a re-read of the metrics), never by reloading the page.
import { el, card, num, note, timeEl, banner, throttle, bytes } from "../dom.js";
import { get } from "../api.js";
import { badge } from "../render.js";
import { LiveSocket } from "../socket.js";
import { metrics, sum, statusBadge, coords, intakeCaps, backpressureWords } from "./common.js";

const WINDOW_MS = 5 * 60 * 1000;
// FAMILIES are the metric families the Dashboard reads: it asks for these
// alone (the whole registry is over 25 KiB, read again on every refresh).
const FAMILIES = ["svc_tasks_total", "svc_dlq_records_total", "svc_executor_pool_busy", "svc_executor_pool_size",
  "svc_executor_pool_waiting", "svc_executor_healthy", "svc_kafka_messages_in_flight", "svc_kafka_messages_delivering",
  "svc_kafka_messages_staged", "svc_kafka_messages_waiting", "svc_kafka_partitions_stalled", "svc_kafka_transactions_total",
  "svc_backpressure_active", "svc_consume_pause_active", "svc_consumer_lag", "svc_sink_breaker_state"];
const BUCKET_MS = 10 * 1000;

export async function mount(root, ctx) {
  const id = ctx.identity;
  const tiles = el("div", { class: "tiles" });
  const sections = el("div", { class: "grid2" });
  root.append(tiles, sections);
  const times = []; // {t: ts_ms, n: tasks} finished in the window (n > 1: a /ws "sampled" count)
  const failures = [];

  const [results, m, counts] = await Promise.all([
    get("/api/v1/live/task-results?limit=1000"),
    metrics(FAMILIES),
    get("/api/v1/dashboard/counts"),
  ]);
  const now = Date.now();
  for (const r of results.results || []) {
    if (r.source === "probe") continue; // debugging a message is not traffic
    if (r.ts_ms > now - WINDOW_MS) times.push({ t: r.ts_ms, n: 1 });
    if (r.status !== "ok" && failures.length < 8) failures.push(r);
  }

  let latest = m;
  let latestCounts = counts;
  // Consumer lag of the whole group (a tile) and the trends (a card), both
  // loaded after the first paint: their modules and the chart helper are
  // not part of the first load.
  const kafka = id.features.kafka_source;
  const lagBox = kafka ? el("section", { class: "tile lag-tile" }, el("h2", {}, "Consumer lag"), el("div", { class: "big" }, "…")) : null;
  const trendsBox = el("div", { class: "trends-box" });
  root.append(trendsBox);
  let group = null, lagOff = "", trend = null, lagMod = null, trendsMod = null;
  // The intake caps come from the config, read once the first time
  // backpressure holds (it rarely does: no cost on a normal load).
  let caps = null;
  let capsAsked = false;
  const draw = () => {
    if (!capsAsked && id.features.kafka_source && sum(latest, "svc_backpressure_active") > 0) {
      capsAsked = true;
      get("/api/v1/config").then((c) => { caps = intakeCaps(c); draw(); }).catch(() => { capsAsked = false; });
    }
    tiles.replaceChildren(...[throughputTile(times), outcomesTile(latest), capacityTile(latest, id), flowTile(latest, id, caps),
      lagBox, historyTile(latestCounts, id)].filter(Boolean));
    sections.replaceChildren(...[failuresCard(failures, ctx), sinksCard(latest), countsCard(latestCounts, id), linksCard(id, group && group.group)].filter(Boolean));
  };
  draw();

  const drawLag = () => {
    if (!lagBox || !lagMod) return;
    const own = sum(latest, "svc_consumer_lag");
    const spark = trend && trendsMod ? trendsMod.lagTrend(trend) : null;
    if (!group) {
      lagBox.replaceChildren(...[el("h2", {}, "Consumer lag"), el("div", { class: "big", "data-lag": own }, `${num(own)} msgs`), spark,
        note(`this worker's partitions only: ${lagOff}`)].filter(Boolean));
      return;
    }
    const total = group.total_lag;
    lagBox.replaceChildren(...[el("h2", {}, el("a", { href: "/lag", class: "lag-link" }, "Consumer lag")),
      el("div", { class: "big", "data-lag": total ?? "" }, total === null ? "–" : `${num(total)} msgs`),
      el("p", { class: "lag-time" }, el("span", { class: "lag-seconds", "data-lag-seconds": group.lag_seconds ?? "" }, lagMod.behind(group.lag_seconds)), " · ", lagMod.drainBadge(group.drain)),
      spark,
      note(lagMod.summary(group), " · ", el("a", { href: "/lag", class: "per-partition" }, "per partition"))].filter(Boolean));
  };
  const readLag = async () => {
    if (!lagMod) lagMod = await import("./lag.js");
    const r = await lagMod.readGroup();
    group = r.g || null;
    lagOff = r.off || "";
    drawLag();
    draw();
  };
  let lagTimer = null, trendsCleanup = null;
  if (kafka) {
    readLag().catch(() => {});
    lagTimer = setInterval(() => readLag().catch(() => {}), 5000);
  }
  import("./trends.js").then(async (mod) => {
    trendsMod = mod;
    trendsCleanup = await mod.mountTrends(trendsBox, ctx, (d) => { trend = d; drawLag(); });
  }).catch((err) => trendsBox.replaceChildren(banner("error", "Trends failed to load: " + err.message)));

  const refresh = throttle(async () => {
    try {
      [latest, latestCounts] = await Promise.all([metrics(FAMILIES), get("/api/v1/dashboard/counts")]);
      draw();
    } catch (err) {
      if (err.status !== 401) sections.prepend(banner("error", "Refresh failed: " + err.message));
    }
  }, 1000);
  const sock = new LiveSocket(location.origin, { subscribe: ["tasks", "state"] }, (frames) => {
    for (const f of frames) {
      // Past 100 successful tasks a second the worker sends a count instead.
      if (f.stream === "sampled" && f.data.tasks > 0) times.push({ t: Date.now(), n: f.data.tasks });
      if (f.stream !== "tasks" || f.data.source === "probe") continue;
      times.push({ t: f.data.ts_ms || Date.now(), n: 1 });
      if (f.data.status !== "ok") {
        failures.unshift(f.data);
        failures.length = Math.min(failures.length, 8);
      }
    }
    refresh();
  });
  const timer = setInterval(refresh, 10000); // gauges move without tasks too
  return () => { sock.close(); clearInterval(timer); clearInterval(lagTimer); if (trendsCleanup) trendsCleanup(); };
}

function tile(title, big, ...rest) {
  return el("section", { class: "tile" }, el("h2", {}, title), el("div", { class: "big" }, big), ...rest);
}

function throughputTile(times) {
  const now = Date.now();
  times.sort((a, b) => a.t - b.t);
  while (times.length && times[0].t < now - WINDOW_MS) times.shift();
  const buckets = new Array(WINDOW_MS / BUCKET_MS).fill(0);
  let total = 0, lastMin = 0;
  for (const { t, n } of times) {
    const i = Math.floor((t - (now - WINDOW_MS)) / BUCKET_MS);
    if (i >= 0 && i < buckets.length) buckets[i] += n;
    total += n;
    if (t > now - 60000) lastMin += n;
  }
  const max = Math.max(1, ...buckets);
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${buckets.length * 4} 40`);
  svg.setAttribute("class", "spark");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `tasks per 10 seconds over the last 5 minutes, peak ${max}`);
  buckets.forEach((n, i) => {
    const h = Math.round((n / max) * 38);
    const r = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    for (const [k, v] of Object.entries({ x: i * 4, y: 40 - h, width: 3, height: h })) r.setAttribute(k, v);
    svg.append(r);
  });
  return tile("Throughput", `${(lastMin / 60).toFixed(2)} tasks/s`, svg, note(`${num(total)} tasks in the last 5 minutes`));
}

function outcomesTile(m) {
  const by = (s) => sum(m, "svc_tasks_total", { status: s });
  const dlq = sum(m, "svc_dlq_records_total", { outcome: "sent" });
  const rows = [["ok", by("ok")], ["failed", by("failed")], ["dlq", dlq], ["timeout", by("timeout")]];
  return tile("Outcomes", num(rows.reduce((a, [k, v]) => a + (k === "dlq" ? 0 : v), 0)) + " tasks",
    el("ul", { class: "outcomes" }, rows.map(([k, v]) => el("li", { "data-outcome": k }, statusBadge(k), " ", num(v)))),
    note("since this worker started"));
}

function capacityTile(m, id) {
  const busy = sum(m, "svc_executor_pool_busy");
  const size = sum(m, "svc_executor_pool_size");
  const waiting = sum(m, "svc_executor_pool_waiting");
  const inflight = sum(m, "svc_kafka_messages_in_flight");
  const delivering = sum(m, "svc_kafka_messages_delivering");
  const staged = id.kafka_delivery === "exactly_once" ? ` · ${num(sum(m, "svc_kafka_messages_staged"))} finished, waiting for their transaction` : "";
  const meter = el("meter", { min: 0, max: Math.max(size, 1), value: busy, "aria-label": "executor pool busy" });
  return tile("In flight", `${num(busy)} / ${num(size)}`, meter,
    note(`executors busy / pool size · ${num(waiting)} waiting` + (id.features.kafka_source ? ` · ${num(inflight)} Kafka messages in flight (${num(delivering)} delivering)${staged}` : "")));
}

// executorDown: the executor cannot run anything (svc_executor_healthy 0;
// absent when the worker runs no executor pool).
function executorDown(m) {
  return (m.get("svc_executor_healthy") || []).length > 0 && sum(m, "svc_executor_healthy") === 0;
}

function flowTile(m, id, caps) {
  const down = executorDown(m);
  const execNote = "the executor cannot be started or does not get ready: tasks wait, nothing is dead-lettered; /readyz says why";
  if (!id.features.kafka_source) {
    if (down) return tile("Intake", badge("executor unavailable", { "executor unavailable": "red" }), note(execNote + "; the ingress answers 503"));
    return tile("Intake", "HTTP only", note("backpressure and consume pause apply to the Kafka source"));
  }
  const bp = sum(m, "svc_backpressure_active") > 0;
  const paused = sum(m, "svc_consume_pause_active") > 0;
  const stalled = sum(m, "svc_kafka_partitions_stalled");
  const fenced = sum(m, "svc_kafka_transactions_total", { result: "fenced" }) > 0;
  const state = fenced ? "stopped: fenced" : down ? "executor unavailable" : paused ? "paused" : bp ? "backpressure" : "flowing";
  return tile("Intake", badge(state, { flowing: "green", paused: "blue", backpressure: "yellow", "executor unavailable": "red", "stopped: fenced": "red" }),
    el("ul", { class: "plain" },
      el("li", { class: "delivery-words", "data-delivery": id.kafka_delivery || "" }, "Delivery: ", deliveryWords(m, id, fenced)),
      el("li", {}, "Executor: ", down ? "unavailable, intake held (" + execNote + ")" : "available"),
      el("li", { class: "bp-words" }, "Backpressure: ", backpressureWords(bp, sum(m, "svc_kafka_messages_waiting"), caps)),
      el("li", {}, "Consume pause: ", paused ? el("a", { href: "/debug?tab=pause" }, "active") : "off"),
      el("li", {}, "Stall-paused partitions: ", num(stalled))));
}

// deliveryWords: the Kafka source's guarantee (sources.kafka.delivery)
// and, exactly-once, its transactions since the worker started.
function deliveryWords(m, id, fenced) {
  if (id.kafka_delivery !== "exactly_once") return "at-least-once (a crash re-delivers what was in flight)";
  const n = (r) => num(sum(m, "svc_kafka_transactions_total", { result: r }));
  if (fenced) return "exactly-once; fenced: another worker took this worker's transactional id, consuming stopped (/readyz says why)";
  return `exactly-once · ${n("committed")} transactions committed, ${n("aborted")} aborted (read again)`;
}

// historyTile: how far back the cluster's flight-recorder history goes and
// what it takes against its budget (history.max_bytes, history.max_age).
function historyTile(c, id) {
  const h = c && c.history;
  if (!id.features.recorder || !h) return null;
  if (!h.updated_ms) return tile("History", "—", note("not measured yet (no shared folder, or the first measurement is under way)"));
  const since = h.oldest_ms ? el("span", {}, "history since ", timeEl(h.oldest_ms)) : "no sealed history yet";
  const days = Math.round(h.max_age_ms / 86400000 * 10) / 10;
  // Over history.sample_above_per_second, successful tasks are counted,
  // not stored: say so while it happens (the counts stay exact).
  const sampling = h.tasks_sampled > 0
    ? el("p", { class: "history-sampled" }, `${num(h.tasks_sampled)} successful tasks counted but not stored in detail (over ${num(h.sample_above_per_second)}/s, history.sample_above_per_second)`)
    : null;
  if (!h.retention) {
    return tile("History", bytes(h.bytes), el("p", { class: "history-since" }, since), sampling,
      note(`no budget: history.archive.enabled is off, nothing is deleted · live file ${bytes(h.live_bytes)}`));
  }
  const meter = el("meter", { min: 0, max: h.max_bytes, value: Math.min(h.bytes, h.max_bytes), high: h.max_bytes * 0.9,
    "aria-label": "history size against history.max_bytes" });
  return tile("History", `${bytes(h.bytes)} of ${bytes(h.max_bytes)}`, meter, el("p", { class: "history-since" }, since), sampling,
    note(`kept ${days} days at most (history.max_age) · archives ${bytes(h.archive_bytes)}, sealed ${bytes(h.sealed_bytes)}, live file ${bytes(h.live_bytes)}`));
}

const breakerNames = { 0: "closed", 1: "open", 2: "half-open" };

function sinksCard(m) {
  const sinks = m.get("svc_sink_breaker_state") || [];
  if (!sinks.length) return card("Sinks", note("No sinks on this worker."));
  return card("Sinks", el("ul", { class: "plain" }, sinks.map((s) => {
    const st = breakerNames[s.value] || "unknown";
    return el("li", {}, el("strong", {}, s.labels.sink), " ", badge(st, { closed: "green", open: "red", "half-open": "yellow" }));
  })));
}

function failuresCard(rows, ctx) {
  if (!rows.length) return card("Recent failures", note("No failed tasks recorded."));
  return card("Recent failures", el("ul", { class: "failures" }, rows.map((r) =>
    el("li", {}, timeEl(r.ts_ms, true), " ", statusBadge(r.status), " ",
      el("a", { href: "/live?task=" + encodeURIComponent(r.task_id), class: "task-link" }, r.task_id), " ",
      r.source === "kafka" ? coords(ctx, r.alias, r.partition, r.offset) : el("span", { class: "muted" }, r.source),
      r.error ? el("div", { class: "muted small" }, r.error) : null))));
}

function countsCard(c, id) {
  if (!id.features.recorder) return null;
  // Probes are not traffic: the recorder keeps their rows, the card leaves them out.
  // The total is the rows' own sum, so the table adds up.
  const all = (st) => Object.values(st || {}).reduce((a, n) => a + (Number(n) || 0), 0);
  const probes = all((c.by_source || {}).probe);
  const traffic = Object.entries(c.by_source || {}).filter(([src]) => src !== "probe").reduce((a, [, st]) => a + all(st), 0);
  const rows = Object.entries(c.by_source || {}).filter(([src]) => src !== "probe").map(([src, st]) =>
    el("tr", {}, el("th", { scope: "row" }, src), ...["ok", "failed", "timeout"].map((k) => el("td", {}, num(st[k] || 0)))));
  return card("Requests by source",
    c.memory_only ? banner("info", "Memory-only recorder (storage.dir is empty): request counts are not kept and show zero.") : null,
    el("table", { class: "grid" }, el("thead", {}, el("tr", {}, el("th", {}, "source"), el("th", {}, "ok"), el("th", {}, "failed"), el("th", {}, "timeout"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 4, class: "muted" }, "No requests recorded.")))),
    note("Total ", el("span", { class: "counts-total" }, num(traffic)), " since ", timeEl(c.since_ms),
      probes ? ` (${num(probes)} debug probe${probes === 1 ? "" : "s"} not counted: probes are not traffic)` : ""));
}

// linksCard: Prometheus graphs of this worker (and of its consumer group:
// group is the group's name once the group view has been read).
function linksCard(id, group) {
  const items = [];
  const p = id.prometheus;
  if (p && p.url) {
    const sel = [];
    if (p.worker_label) sel.push(`${p.worker_label}="${id.worker}"`);
    if (p.cluster_label) sel.push(`${p.cluster_label}="${id.cluster}"`);
    const s = sel.length ? `{${sel.join(",")}}` : "";
    // Lag is the group's, not this worker's: every worker exports its own
    // partitions and one of them the unowned ones, so the group's lag by
    // partition adds both families over the whole fleet.
    const gsel = [...(group ? [`group="${group}"`] : []), ...(p.cluster_label ? [`${p.cluster_label}="${id.cluster}"`] : [])];
    const g = gsel.length ? `{${gsel.join(",")}}` : "";
    const lagExpr = `sum by (group, partition) (svc_consumer_lag${g} or svc_consumer_lag_orphaned${g})`;
    const q = (expr) => p.url.replace(/\/+$/, "") + "/graph?g0.expr=" + encodeURIComponent(expr) + "&g0.tab=0&g0.range_input=1h";
    for (const [label, expr] of [
      ["Tasks/s by status", `sum by (status) (rate(svc_tasks_total${s}[5m]))`],
      ["Task duration p95", `histogram_quantile(0.95, sum by (le) (rate(svc_task_duration_seconds_bucket${s}[5m])))`],
      ["DLQ records/s", `sum(rate(svc_dlq_records_total${s}[5m]))`],
      // Two series told apart by a label: "A or B" over equal (empty)
      // label sets would show A alone, never the pause.
      ["Backpressure and pause", `label_replace(max(svc_backpressure_active${s}), "holder", "backpressure", "", "") or label_replace(max(svc_consume_pause_active${s}), "holder", "consume_pause", "", "")`],
      ["Executor unavailable", `1 - min(svc_executor_healthy${s})`],
      ...(id.features.kafka_source ? [["Consumer lag", lagExpr]] : []),
    ]) items.push(el("li", {}, el("a", { href: q(expr), rel: "noreferrer", target: "_blank" }, label)));
  }
  for (const l of id.custom_links || []) items.push(el("li", {}, el("a", { href: l.url, rel: "noreferrer", target: "_blank" }, l.label)));
  if (!items.length) return null;
  return card("Links", el("ul", { class: "plain" }, items));
}
