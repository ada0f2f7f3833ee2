// Debug › Runtime: the runtime health monitor and task throughput, read.
// Charts are small inline SVGs over the monitor's recent samples (one
// every 10 s, at most 60: ten minutes); stalls are a list with their top
// frames; throughput is a table with its units. The raw JSON of both
// routes is one toggle away. Re-read every 10 s while the tab is open.
import { el, card, note, banner, num, bytes, timeEl } from "../dom.js";
import { get } from "../api.js";
import { chart } from "../chart.js";

const REFRESH_MS = 10000;

export async function mount(root) {
  const body = el("div");
  const raw = el("div", { class: "raw-json", hidden: true });
  const toggle = el("button", { type: "button", class: "raw-toggle", "aria-pressed": "false", "aria-controls": "runtime-raw" }, "Show raw JSON");
  raw.id = "runtime-raw";
  toggle.onclick = () => {
    raw.hidden = !raw.hidden;
    toggle.setAttribute("aria-pressed", String(!raw.hidden));
    toggle.textContent = raw.hidden ? "Show raw JSON" : "Hide raw JSON";
  };
  root.append(el("div", { class: "toolbar" }, toggle), body, raw);
  const load = async () => {
    const [rt, tp] = await Promise.all([read("/api/v1/debug/runtime"), read("/api/v1/debug/throughput")]);
    body.replaceChildren(...runtimeCards(rt.data), throughputCard(tp.data));
    // The raw JSON is what each route answered ({"enabled":false,…} too),
    // not what the cards made of it.
    const rawOf = (r) => r.missing ? el("p", { class: "muted" }, "404: this worker's release has no such route.") : el("pre", { class: "preview" }, JSON.stringify(r.raw, null, 2));
    raw.replaceChildren(
      el("h3", {}, "GET /api/v1/debug/runtime"), rawOf(rt),
      el("h3", {}, "GET /api/v1/debug/throughput"), rawOf(tp));
  };
  await load();
  const timer = setInterval(() => load().catch((err) => body.prepend(banner("error", "Refresh failed: " + err.message))), REFRESH_MS);
  return () => clearInterval(timer);
}

// read GETs a route another release may not have yet: data is null when it
// answers 404 or {"enabled": false}; raw is the answer as it came.
async function read(path) {
  try {
    const raw = await get(path);
    return { raw, data: raw && raw.enabled === false ? null : raw };
  } catch (err) {
    if (err.status === 404) return { raw: null, data: null, missing: true };
    throw err;
  }
}

function runtimeCards(rt) {
  if (!rt) return [banner("info", "Runtime health is not available in this worker (runtime_health.enabled is false, or an older release).")];
  const cur = rt.current;
  if (!cur) return [card("Runtime health", note("The monitor has taken no sample yet."))];
  const samples = [...(rt.recent || [])].reverse(); // oldest first
  const span = samples.length > 1 ? `${samples.length} samples, ${timeEl(samples[0].ts_ms, true).textContent} to ${timeEl(samples.at(-1).ts_ms, true).textContent}` : "1 sample";
  const facts = [
    ["Scheduler lag p99", ms(cur.lag_p99_ms)], ["Goroutines", num(cur.goroutines)], ["Heap live", bytes(cur.heap_live_bytes)],
    ["RSS", cur.rss_bytes >= 0 ? bytes(cur.rss_bytes) : "unknown"], ["GC CPU", (cur.gc_cpu_fraction * 100).toFixed(2) + " %"],
    ["Open files", cur.open_fds >= 0 ? num(cur.open_fds) : "unknown"], ["Stalls", num(rt.stalls_total) + (rt.in_stall ? " (one now)" : "")],
  ];
  const byTime = { at: (s) => s.ts_ms };
  const charts = el("div", { class: "charts" },
    chart("lag", "Scheduler lag", samples, [["p50", (s) => s.lag_p50_ms], ["p99", (s) => s.lag_p99_ms], ["max", (s) => s.lag_max_ms]], ms, byTime),
    chart("heap", "Heap", samples, [["live", (s) => s.heap_live_bytes], ["total", (s) => s.heap_total_bytes]], bytes, byTime),
    chart("gc", "GC pauses", samples, [["p50", (s) => s.gc_pause_p50_ms], ["p99", (s) => s.gc_pause_p99_ms]], ms, byTime),
    chart("goroutines", "Goroutines", samples, [["live", (s) => s.goroutines]], num, byTime),
    chart("rss", "RSS", samples.filter((s) => s.rss_bytes >= 0), [["rss", (s) => s.rss_bytes]], bytes, byTime));
  return [
    card("Runtime health",
      el("ul", { class: "plain legend runtime-facts" }, facts.map(([k, v]) => el("li", {}, k + " ", el("strong", {}, v)))),
      note(`Each chart: the monitor's recent samples, one every ${rt.event_every_seconds} s and at most 60 (${span}); each sample's percentiles cover the ${rt.window_seconds} s before it. A healthy worker's lag stays well under a millisecond; see runtime-health.md for what lag, GC and RSS trends mean.`),
      charts),
    stallsCard(rt),
  ];
}

function stallsCard(rt) {
  const stalls = rt.stalls || [];
  if (!stalls.length) {
    return card("Stalls", note(`No stall since the worker started: no heartbeat was ${ms(rt.stall_threshold_ms)} or more late.`));
  }
  return card("Stalls", note(`The last ${stalls.length} stall(s), newest first (at most 5 kept). A stall is a heartbeat at least ${ms(rt.stall_threshold_ms)} late; its goroutines are sampled at most once a minute, and the top frames are where the other goroutines were, busiest first.`),
    el("ol", { class: "stalls" }, stalls.map((s) => el("li", { class: "stall" },
      el("p", {}, timeEl(s.ts_ms), ` · lag ${ms(s.lag_ms)} · ${num(s.goroutines)} goroutines`),
      s.sampled && (s.top_frames || []).length ? el("div", { class: "scroll" }, el("table", { class: "grid frames" },
        el("thead", {}, el("tr", {}, ["Goroutines", "State", "Function", "Location"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, s.top_frames.map((f) => el("tr", {}, el("td", { class: "num" }, num(f.goroutines)), el("td", {}, f.state),
          el("td", {}, el("code", {}, f.function)), el("td", {}, el("code", {}, f.location))))))) : note("Not sampled: a stack sample was taken less than a minute before."),
      s.dump ? el("details", {}, el("summary", {}, "Goroutine dump" + (s.dump_truncated ? " (cut at 64 KiB)" : "")), el("pre", { class: "preview" }, s.dump)) : null))));
}

// throughputCard: cost per second by window, in the cost label's unit.
function throughputCard(tp) {
  if (!tp) return card("Throughput", note("Task cost and throughput are off: set throughput.cost_label to a numeric task label (see runtime-health.md)."));
  const u = tp.cost_label;
  const row = (name, w) => el("tr", {},
    el("th", { scope: "row" }, name), el("td", { class: "num" }, `${num(w.seconds)} s`), el("td", { class: "num" }, num(w.tasks)),
    el("td", { class: "num" }, `${num(w.cost)} ${u}`), el("td", { class: "num" }, `${num(w.cost_per_second)} ${u}/s`),
    el("td", { class: "num" }, `${num(w.executor_seconds)} s`), el("td", { class: "num" }, `${num(w.speed)} ${u}/executor-s`), el("td", { class: "num" }, num(w.skipped)));
  const label = (w) => `${timeEl(w.start_ms, true).textContent}–${timeEl(w.end_ms, true).textContent}`;
  const closed = (tp.windows || []).slice(0, 10);
  const heads = ["Window", "Length", "Tasks", `Cost (${u})`, `Throughput (${u}/s)`, "Executor time", `Speed (${u}/executor-s)`, "Skipped"];
  return card(`Throughput by cost label "${u}"`,
    el("div", { class: "scroll" }, el("table", { class: "grid throughput" },
      el("thead", {}, el("tr", {}, heads.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, tp.current ? row(`now (${label(tp.current)})`, tp.current) : null, closed.map((w) => row(label(w), w)),
        tp.totals ? row("since start", tp.totals) : null))),
    note(`Windows of ${tp.window_seconds} s aligned to the clock: the open one (its rate over the time elapsed so far), ` +
      (closed.length ? `the ${closed.length} newest closed ones (the API keeps ${tp.history})` : "no closed one yet") +
      ", and the totals since start. Throughput is cost per second of real time; speed is cost per second of executor time."),
    el("p", { class: "small" }, "Tasks skipped (no usable cost label), by reason: ",
      Object.entries(tp.skipped || {}).map(([k, v], i) => [i ? " · " : "", k, " ", el("strong", {}, num(v))])));
}

// ms renders milliseconds with a precision that suits their size.
function ms(v) {
  const n = Number(v) || 0;
  if (n >= 1000) return (n / 1000).toFixed(2) + " s";
  if (n >= 10) return n.toFixed(0) + " ms";
  if (n >= 0.1) return n.toFixed(2) + " ms";
  return (n * 1000).toFixed(0) + " µs";
}
