// Small inline SVG line charts, drawn by hand (no library): the Runtime
// tab's samples and the Dashboard's trends use the same helper.
import { el } from "./dom.js";

const NS = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs) {
  const n = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  return n;
}

// chart draws series (name, value of a sample) over the samples as lines
// in one small SVG, with its y range and the newest values as text. A
// value that is null or undefined leaves a gap (the line starts again at
// the next sample that has one). Samples are spread evenly, or by time
// with opts.at (a sample's time) over opts.span ([from, to], default the
// first to the last sample's time), and then the time axis's ends are
// labelled under the chart; opts.colors picks the series' colour classes
// (default s0, s1, ...).
export function chart(id, title, samples, series, fmt, opts = {}) {
  const W = 300, H = 90, PAD = 4;
  const vals = series.map(([, f]) => samples.map(f).map((v) => (v === null || v === undefined ? null : Math.max(0, Number(v) || 0))));
  const max = Math.max(...vals.flat().filter((v) => v !== null), 0) || 1;
  const cls = (si) => (opts.colors && opts.colors[si]) || "s" + si;
  const [lo, hi] = opts.span || (opts.at && samples.length ? [opts.at(samples[0]), opts.at(samples.at(-1))] : [0, 0]);
  const x = opts.at && hi > lo
    ? (i) => PAD + (Math.min(hi, Math.max(lo, opts.at(samples[i]))) - lo) * (W - 2 * PAD) / (hi - lo)
    : (i) => (samples.length < 2 ? W / 2 : PAD + (i * (W - 2 * PAD)) / (samples.length - 1));
  const y = (v) => H - PAD - (v / max) * (H - 2 * PAD);
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "data-chart": id, "data-samples": samples.length,
    "aria-label": `${title}, ${samples.length} samples, up to ${fmt(max)}` });
  svg.append(svgEl("line", { x1: 0, x2: W, y1: H - PAD, y2: H - PAD, class: "axis" }));
  vals.forEach((vs, si) => {
    const pts = vs.map((v, i) => (v === null ? null : `${x(i).toFixed(1)},${y(v).toFixed(1)}`)).filter(Boolean);
    svg.append(svgEl("polyline", { points: pts.join(" "), class: cls(si), "data-series": series[si][0], "data-n": pts.length }));
    const last = vs.findLastIndex((v) => v !== null);
    if (last >= 0) svg.append(svgEl("circle", { cx: x(last), cy: y(vs[last]), r: 2.5, class: cls(si) })); // the newest point, so one sample still shows
  });
  const newest = (vs) => { const v = vs.findLast((v) => v !== null); return v === undefined ? "–" : fmt(v); };
  const legend = el("ul", { class: "plain legend" }, series.map(([name], si) =>
    el("li", {}, el("span", { class: "key " + cls(si) }), ` ${name} `, el("strong", {}, newest(vals[si])))));
  const axis = opts.at && hi > lo
    ? el("div", { class: "chart-axis muted", "data-axis": `${lo},${hi}` }, el("span", {}, clock(lo, hi - lo)), el("span", {}, clock(hi, hi - lo)))
    : null;
  return el("figure", { class: "chart-box" }, el("figcaption", {}, title, el("span", { class: "muted small" }, ` (top: ${fmt(max)})`)), svg, axis, legend);
}

// clock is a time axis label: hours and minutes, with seconds over spans
// under 10 minutes and the day over spans of 12 hours or more.
function clock(ms, span) {
  const d = new Date(ms);
  const hm = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: span < 600000 ? "2-digit" : undefined, hour12: false });
  return span >= 12 * 3600000 ? `${d.toLocaleDateString([], { month: "short", day: "numeric" })} ${hm}` : hm;
}
