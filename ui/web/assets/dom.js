// DOM and formatting helpers shared by every page. Nothing here uses inline
// styles or HTML strings: the CSP allows neither.

// el builds an element: attrs are attributes (on* keys are listeners,
// false/null skip), children are nodes or text.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

const pad = (n, w = 2) => String(n).padStart(w, "0");

function stamp(d, utc) {
  const g = (m) => d[(utc ? "getUTC" : "get") + m]();
  return `${g("FullYear")}-${pad(g("Month") + 1)}-${pad(g("Date"))} ${pad(g("Hours"))}:${pad(g("Minutes"))}:${pad(g("Seconds"))}.${pad(g("Milliseconds"), 3)}`;
}

// localStamp and utcStamp render YYYY-MM-DD HH:MM:SS.mmm.
export const localStamp = (ms) => stamp(new Date(ms), false);
export const utcStamp = (ms) => stamp(new Date(ms), true) + " UTC";

// timeEl shows epoch ms in the operator's local time, UTC on hover.
export function timeEl(ms, short = false) {
  if (ms === null || ms === undefined || !Number.isFinite(Number(ms)) || Number(ms) <= 0) return el("span", { class: "muted" }, "—");
  const d = new Date(Number(ms));
  const text = short ? localStamp(d.getTime()).slice(11) : localStamp(d.getTime());
  return el("time", { datetime: d.toISOString(), title: utcStamp(d.getTime()) }, text);
}

const numberFmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 3 });

// formatValue renders a value in one of the spec's formats; ok is false
// when the value does not fit the format (the caller shows it raw).
export function formatValue(v, format) {
  switch (format) {
    case "duration_ms": {
      const n = Number(v);
      if (v === null || v === "" || !Number.isFinite(n)) return { ok: false };
      return { ok: true, text: duration(n) };
    }
    case "bytes": {
      const n = Number(v);
      if (v === null || v === "" || !Number.isFinite(n)) return { ok: false };
      return { ok: true, text: bytes(n) };
    }
    case "number": {
      const n = Number(v);
      if (v === null || v === "" || typeof v === "boolean" || !Number.isFinite(n)) return { ok: false };
      return { ok: true, text: numberFmt.format(n) };
    }
    case "timestamp": {
      const t = typeof v === "number" ? v : Date.parse(v);
      if (!Number.isFinite(t)) return { ok: false };
      return { ok: true, text: localStamp(t), utc: utcStamp(t) };
    }
  }
  return { ok: false };
}

// duration renders milliseconds as minutes and seconds.
export function duration(ms) {
  const neg = ms < 0 ? "-" : "";
  ms = Math.abs(ms);
  if (ms < 1000) return `${neg}${Math.round(ms)}ms`;
  if (ms < 60000) return `${neg}${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)}s`;
  const m = Math.floor(ms / 60000);
  const s = Math.floor((ms % 60000) / 1000);
  return `${neg}${m}m ${pad(s)}s`;
}

// bytes renders a size in binary units with one decimal.
export function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  let v = Math.abs(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (n < 0 ? "-" : "") + (i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`);
}

export const num = (n) => numberFmt.format(Number(n) || 0);

// text renders any decoded JSON value as cell text.
export function text(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

// field reads a possibly dotted field of a row.
export function field(row, name) {
  if (row === null || typeof row !== "object") return undefined;
  if (name in row) return row[name];
  let cur = row;
  for (const part of name.split(".")) {
    if (cur === null || typeof cur !== "object" || !(part in cur)) return undefined;
    cur = cur[part];
  }
  return cur;
}

// autoLabel turns a field name into a column heading.
export function autoLabel(name) {
  const s = String(name).replace(/[_.-]+/g, " ").trim();
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// note is a muted explanatory paragraph; banner an error or info box.
export const note = (...c) => el("p", { class: "muted" }, ...c);
export function banner(kind, ...c) {
  return el("div", { class: "banner banner-" + kind, role: kind === "error" ? "alert" : "status" }, ...c);
}

// card wraps a titled block.
export function card(title, ...c) {
  return el("section", { class: "card" }, title ? el("h2", {}, title) : null, ...c);
}

// kvTable shows an object's pairs (nested values as JSON).
export function kvTable(obj, render = (v) => text(v)) {
  const rows = Object.entries(obj || {}).map(([k, v]) => el("tr", {}, el("th", { scope: "row" }, k), el("td", {}, render(v, k))));
  if (!rows.length) return note("(empty)");
  return el("div", { class: "scroll" }, el("table", { class: "kv" }, el("tbody", {}, rows)));
}

// decodeText shows a UTF-8 or base64 value as the API marks it.
export function encoded(value, encoding, max = 400) {
  if (value === null || value === undefined) return el("span", { class: "muted" }, "null");
  const s = String(value);
  const shown = s.length > max ? s.slice(0, max) + "…" : s;
  if (encoding === "base64") return el("span", { class: "b64", title: "binary, shown as base64" }, el("span", { class: "tag" }, "base64"), " ", shown);
  return el("span", { class: "utf8" }, shown);
}

// debounce runs fn at most once per wait ms, on the trailing edge.
export function throttle(fn, wait) {
  let timer = null;
  return () => {
    if (timer) return;
    timer = setTimeout(() => { timer = null; fn(); }, wait);
  };
}
