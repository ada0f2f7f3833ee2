// Pieces several pages share: message coordinates with "Probe this
// message", task status badges and metric sums.
import { el, num } from "../dom.js";
import { get } from "../api.js";
import { badge } from "../render.js";

// probeHref opens the Debug page's probe tab prefilled with a record.
export const probeHref = (alias, p, o) =>
  `/debug?tab=probe&alias=${encodeURIComponent(alias)}&partition=${p}&offset=${o}`;

// coords shows partition:offset with a "Probe this message" link when the
// Kafka read API and the probe are on.
export function coords(ctx, alias, p, o) {
  if (p === null || p === undefined || Number(p) < 0) return el("span", { class: "muted" }, "—");
  const f = ctx.identity.features;
  const label = `${p}:${o}`;
  if (!alias || !f.kafka_read || !f.probe) return el("code", {}, label);
  return el("span", { class: "coords" }, el("code", {}, label), " ",
    el("a", { href: probeHref(alias, p, o), class: "probe-link", title: `Probe this message (${alias} ${label})` }, "Probe"));
}

const statusColors = { ok: "green", failed: "red", timeout: "yellow", tempfail: "yellow", dlq: "purple", "*": "gray" };
export const statusBadge = (s) => badge(s, statusColors);

// metrics fetches the registry as name → samples; only the families named
// when names are given.
export async function metrics(names = []) {
  const q = names.map((n) => "name=" + encodeURIComponent(n)).join("&");
  const data = await get("/api/v1/debug/metrics" + (q ? "?" + q : ""));
  const out = new Map();
  for (const f of data.families || []) out.set(f.name, f.samples || []);
  return out;
}

// sum adds the samples of a family whose labels match filter.
export function sum(m, name, filter = {}) {
  let total = 0;
  for (const s of m.get(name) || []) {
    if (Object.entries(filter).every(([k, v]) => s.labels?.[k] === v)) total += Number(s.value) || 0;
  }
  return total;
}

// intakeCaps are the Kafka source's caps on work waiting to run, from the
// effective config (worker/kafka queue.go): with W = max(pipeline.
// max_in_flight, sources.kafka.max_poll_records), backpressure pauses the
// whole topic at 6 × W waiting messages or 64 MiB and resumes once fewer
// than 3 × W and under 32 MiB wait. Running messages do not count.
export function intakeCaps(cfg) {
  const w = Math.max(Number(cfg?.pipeline?.max_in_flight) || 0, Number(cfg?.sources?.kafka?.max_poll_records) || 0, 1);
  return { w, pause: 6 * w, resume: 3 * w };
}

// backpressureWords says what backpressure is doing in the operator's
// words: waiting is svc_kafka_messages_waiting; caps (intakeCaps) may be
// null while the config loads. The rule itself (W, the caps' formula) is
// in operations.md, "Intake queues and fair dispatch".
export function backpressureWords(active, waiting, caps) {
  const limit = caps ? `${num(caps.pause)} messages or 64 MiB` : "its limit";
  if (!active) return `off: ${num(waiting)} messages waiting to run; this worker stops fetching when ${caps ? limit : "too many"} wait, so work never piles up`;
  const again = caps ? `once fewer than ${num(caps.resume)} wait` : "once about half of them ran";
  return `active: ${num(waiting)} messages wait to run, more than this worker queues (${limit}), so it stopped fetching; it fetches again ${again} and under 32 MiB. Nothing is lost; the lag grows meanwhile. If it lasts, the executor or a sink is too slow: see In flight and Sinks.`;
}
