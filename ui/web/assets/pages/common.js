// Pieces several pages share: message coordinates with "Probe this
// message", task status badges and metric sums.
import { el } from "../dom.js";
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

// metrics fetches the registry as name → samples.
export async function metrics() {
  const data = await get("/api/v1/debug/metrics");
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

// workerBases lists the fleet's workers (from the registry when this
// worker has one) as {name, base}; this worker alone otherwise.
export async function fleet(ctx) {
  const self = [{ name: ctx.identity.worker, base: location.origin, self: true }];
  let data = null;
  try {
    data = await get("/api/v1/fleet/workers");
  } catch (err) {
    if (err.status === 404) return self;
    throw err;
  }
  const workers = (data?.workers || []).filter((w) => /^https?:\/\//.test(w.url || "") && w.state !== "stopped");
  if (!workers.length) return self;
  return workers.map((w) => {
    const base = new URL(w.url).origin;
    return { name: w.name, base, self: w.name === ctx.identity.worker || base === location.origin, state: w.state };
  });
}
