// Dashboard › Trends: throughput, failures and consumer lag over the last
// hour (or 6 h, 24 h), for the fleet or one worker, from
// GET /api/v1/dashboard/trends (each worker keeps its own bounded rings;
// the worker whose UI this is adds them up). Loaded after the first paint.
import { el, card, note, num, timeEl } from "../dom.js";
import { get } from "../api.js";
import { chart } from "../chart.js";

const WINDOWS = [["15m", "15 minutes"], ["1h", "1 hour"], ["6h", "6 hours"], ["24h", "24 hours"]];

// rate is tasks per second of a point: a closed step's count over the
// step, the open one's over the part of the step gone by.
function rate(p, key, stepMs, nowMs) {
  const secs = p.open ? Math.max(1, (nowMs - (p.ts_ms - stepMs)) / 1000) : stepMs / 1000;
  return p[key] / secs;
}

const perSec = (v) => (v >= 10 ? num(Math.round(v)) : v.toFixed(2)) + "/s";

// mountTrends draws the trends card into box and re-reads it every 10 s;
// onData gets each answer (the Consumer lag tile draws its trend from it).
export async function mountTrends(box, ctx, onData) {
  let windowSel = "1h", view = "fleet", data = null;
  const winSelect = el("select", { id: "trends-window", "aria-label": "Trend window" }, WINDOWS.map(([v, t]) => el("option", { value: v }, t)));
  winSelect.value = windowSel;
  const viewSelect = el("select", { id: "trends-view", "aria-label": "Whose trends" });
  const body = el("div");
  box.replaceChildren(card("Trends",
    el("div", { class: "toolbar" }, el("label", { for: "trends-window" }, "Window"), winSelect, el("label", { for: "trends-view" }, "Show"), viewSelect),
    body));
  const draw = () => {
    if (!data) return;
    const names = data.workers.map((w) => w.worker);
    viewSelect.replaceChildren(el("option", { value: "fleet" }, `Fleet (${names.length} worker${names.length === 1 ? "" : "s"})`),
      ...names.map((n) => el("option", { value: n }, n)));
    if (view !== "fleet" && !names.includes(view)) view = "fleet";
    viewSelect.value = view;
    const w = data.workers.find((x) => x.worker === view);
    const pts = view === "fleet" ? data.fleet : w.points;
    const stepMs = data.step_seconds * 1000;
    const hasLag = pts.some((p) => p.lag !== null && p.lag !== undefined);
    const oldest = Math.min(...data.workers.map((x) => x.available_from_ms));
    // Points by time, over the window or as much of it as was kept.
    const t = { at: (p) => p.ts_ms, span: [Math.max(data.from_ms, oldest), pts.length ? Math.max(data.to_ms, pts.at(-1).ts_ms) : data.to_ms] };
    const missing = data.missing || [];
    body.replaceChildren(
      el("div", { class: "charts trends", "data-view": view },
        chart("trend-throughput", "Throughput", pts, [["ok", (p) => rate(p, "ok", stepMs, data.to_ms)], ["failed", (p) => rate(p, "failed", stepMs, data.to_ms)]], perSec,
          { ...t, colors: ["s0", "s2"] }),
        chart("trend-failures", `Failures per ${data.step_seconds >= 60 ? data.step_seconds / 60 + " min" : data.step_seconds + " s"}`, pts, [["failed", (p) => p.failed]], num, { ...t, colors: ["s2"] }),
        hasLag || ctx.identity.features.kafka_source ? chart("trend-lag", "Consumer lag", pts, [["lag", (p) => p.lag]], num, { ...t, colors: ["s1"] }) : null),
      note(`${view === "fleet" ? "The fleet: " + names.join(", ") + " added up" : view + " alone"}, in ${data.step_seconds}-second steps; the newest point is the step under way. ` +
        "Each worker keeps, in memory since it started, the last hour in 10-second steps (360 points) and the last 24 hours in 5-minute steps (288 points); data here starts ", timeEl(oldest, true),
        ". Failures are failed and timed-out tasks; probes are not counted. Lag is what the group has not committed, each partition counted once."),
      ...(missing.length ? [el("p", { class: "trends-missing" }, "Not included: ", missing.map((m, i) => [i ? "; " : "", el("strong", {}, m.worker), ` (${m.reason})`]))] : []));
  };
  const load = async () => {
    data = await get("/api/v1/dashboard/trends?window=" + windowSel);
    draw();
    if (onData) onData(data);
  };
  winSelect.onchange = () => { windowSel = winSelect.value; load().catch(() => {}); };
  viewSelect.onchange = () => { view = viewSelect.value; draw(); };
  await load().catch((err) => body.replaceChildren(note("Trends are not available: " + err.message)));
  const timer = setInterval(() => load().catch(() => {}), 10000);
  return () => clearInterval(timer);
}

// lagTrend draws the fleet's lag over the answer's window for the tile.
export function lagTrend(data) {
  const pts = (data.fleet || []).slice(data.step_seconds === 10 ? -90 : 0);
  if (!pts.some((p) => p.lag !== null && p.lag !== undefined)) return null;
  return chart("lag-trend", data.step_seconds === 10 ? "Last 15 minutes" : `Last ${Math.round(data.window_seconds / 3600)} h`, pts, [["lag", (p) => p.lag]], num);
}
